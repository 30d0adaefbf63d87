/**
 * MCP tools as durable tools against a real MCP server (test/mcp/mcp-server.js, the SDK's
 * McpServer) over stdio: a worker process (test/mcp/mcp-worker.ts) runs a flow calling one MCP
 * tool on SQLite and is SIGKILLed while the server handles the call; another process recovers.
 * A destructive tool's call is in doubt (RecoveryNeedsDecision naming it, charged once); an
 * idempotent tool's call reruns once, with the same idempotency key in `_meta`.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ChildHarness, killAll } from '../utils/child-process';
import { spawnTs } from '../utils/ts-child';

const WORKER = join(__dirname, 'mcp-worker.ts');

interface LedgerLine {
  start?: number;
  tool?: string;
  args?: unknown;
  key?: string | null;
  pid?: number;
}

function ledgerOf(file: string): LedgerLine[] {
  if (!existsSync(file)) return [];
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as LedgerLine);
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe('MCP tools over stdio: SIGKILL of the worker inside a call', () => {
  const dirs: string[] = [];
  const servers = new Set<number>();

  afterAll(async () => {
    await killAll();
    // The servers end when their worker's pipe closes; one that did not is killed by its pid.
    for (const pid of servers) if (alive(pid)) process.kill(pid, 'SIGKILL');
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  function sandbox() {
    const dir = mkdtempSync(join(tmpdir(), 'aa-mcp-'));
    dirs.push(dir);
    const ledger = join(dir, 'ledger.jsonl');
    const env = {
      ...process.env,
      NODE_OPTIONS: '',
      SQLITE_PATH: join(dir, 'runs.db'),
      MCP_LEDGER: ledger,
    };
    const runId = `mcp-${randomBytes(4).toString('hex')}`;
    const worker = (mode: string, tool: string, extra: object = {}) =>
      new ChildHarness(
        spawnTs(WORKER, [mode, runId, tool, JSON.stringify(argsOf(tool))], {
          env: { ...env, ...extra },
          files: [WORKER],
        }),
        { name: `mcp worker ${mode} ${tool}` },
      );
    const ledgerNow = () => {
      const lines = ledgerOf(ledger);
      for (const l of lines) if (l.start) servers.add(l.start);
      return lines;
    };
    return { worker, ledger: ledgerNow };
  }

  const argsOf = (tool: string) =>
    tool === 'charge' ? { amount: 40 } : { item: 'seat-7' };

  /** Runs `tool` in a worker, SIGKILLs it once the server has the call, then recovers. */
  async function killedInside(tool: string) {
    const box = sandbox();
    const first = box.worker('run', tool, { MCP_HANG: tool });
    const deadline = Date.now() + 30_000;
    while (!box.ledger().some((l) => l.tool === tool)) {
      if (Date.now() > deadline)
        throw new Error(`the server never got "${tool}": ${first.stderr}`);
      await sleep(25);
    }
    await first.kill();
    // The worker's server child sees its stdin close and ends, its hanging call with it.
    const hung = box.ledger().find((l) => l.tool === tool)!.pid!;
    for (let i = 0; i < 200 && alive(hung); i++) await sleep(25);
    expect(alive(hung)).toBe(false);
    const recovery = box.worker('recover', tool);
    const exit = await recovery.exit(60_000);
    expect({ code: exit.code, stderr: recovery.stderr }).toEqual({
      code: 0,
      stderr: '',
    });
    const outcome = JSON.parse(recovery.stdout.trim().split('\n').at(-1)!) as {
      status?: string;
      r?: unknown;
      error?: string;
      calls?: Array<[string, string]>;
    };
    return { outcome, calls: box.ledger().filter((l) => l.tool === tool) };
  }

  it('a destructive tool (destructiveHint) cut off by the crash is in doubt: recovery asks, the server charged once', async () => {
    const { outcome, calls } = await killedInside('charge');
    expect(outcome.error).toBe('RecoveryNeedsDecision');
    expect(outcome.calls!.map(([tool]) => tool)).toEqual(['charge']);
    expect(calls).toHaveLength(1);
  }, 120_000);

  it('an idempotent tool (idempotentHint) cut off by the crash reruns once, with the same idempotency key', async () => {
    const { outcome, calls } = await killedInside('reserve');
    expect(outcome).toEqual({
      status: 'done',
      r: {
        content: [{ type: 'text', text: 'reserved seat-7' }],
        structuredContent: { item: 'seat-7' },
      },
    });
    expect(calls).toHaveLength(2);
    expect(typeof calls[0]!.key).toBe('string');
    expect(calls[1]!.key).toBe(calls[0]!.key);
  }, 120_000);
});
