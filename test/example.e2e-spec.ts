/**
 * The example worker (`npm start`) as a user runs it, on its SQLite default: a crash inside
 * email_tickets, recovery that asks for a decision, and the decided rerun. Keeps the example and
 * the README walkthrough from rotting.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const ROOT = join(__dirname, '..');

function start(
  env: Record<string, string>,
): Promise<{ code: number | null; signal: string | null; out: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [
        '-r',
        join(ROOT, 'test/utils/ts-register.js'),
        join(ROOT, 'src/main.ts'),
      ],
      { cwd: ROOT, env: { ...process.env, ...env }, timeout: 30_000 },
      (error, stdout, stderr) => {
        const e = error as (Error & { code?: number; signal?: string }) | null;
        resolve({
          code: e ? (e.code ?? null) : 0,
          signal: e?.signal ?? null,
          out: stdout + stderr,
        });
      },
    );
  });
}

describe('the example worker (npm start) on SQLite', () => {
  const dir = mkdtempSync(join(tmpdir(), 'aa-example-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('crash inside email_tickets → recovery asks → the decided rerun finishes; the card is charged once', async () => {
    const crashed = await start({ DATA_DIR: dir, CRASH_IN: 'email_tickets' });
    expect(crashed.signal).toBe('SIGKILL');

    const asked = await start({ DATA_DIR: dir });
    expect(asked.code).toBe(0);
    expect(asked.out).toMatch(
      /needs a decision, calls in doubt: email_tickets \(started, no result recorded\)/,
    );

    const decided = await start({ DATA_DIR: dir, RERUN_IN_DOUBT: '1' });
    expect(decided.out).toMatch(/recovered → done at step 4: tickets sent/);

    const ledger = readFileSync(join(dir, 'ledger.log'), 'utf8')
      .trim()
      .split('\n');
    expect(ledger.filter((l) => l.includes('charge_card'))).toHaveLength(1);
    expect(ledger.filter((l) => l.includes('email_tickets'))).toHaveLength(2);
    const keys = ledger
      .filter((l) => l.includes('email_tickets'))
      .map((l) => /key (\S+)/.exec(l)?.[1]);
    expect(keys[0]).toBe(keys[1]);
  });
});
