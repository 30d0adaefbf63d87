/**
 * `agent-adapter schedules list|pause|resume` on a SQLite file a runner declared schedules in: the
 * CLI reads the records (verified with the key), and its pause stops the runner's takeover firing.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  Executor,
  Flow,
  FlowRunner,
  SQLiteCheckpointStore,
  ToolRegistry,
} from 'agent-adapter';
import { KEY, sleep } from '../../../../test/utils/specs';
import { runCli } from './program';

describe('schedules commands', () => {
  const dir = mkdtempSync(join(tmpdir(), 'aa-cli-schedules-'));
  const path = join(dir, 'runs.db');
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  async function cli(...argv: string[]) {
    let stdout = '';
    let stderr = '';
    const code = await runCli(['--store', `sqlite:${path}`, ...argv], {
      stdout: (s) => void (stdout += s),
      stderr: (s) => void (stderr += s),
      env: { CHECKPOINT_KEY: KEY },
    });
    return { code, stdout, stderr };
  }

  it('lists, pauses and resumes what a runner declared; a paused schedule fires nowhere', async () => {
    const store = new SQLiteCheckpointStore(path);
    const runner = new FlowRunner(new Executor(new ToolRegistry()), {
      checkpoints: store,
      checkpointKey: KEY,
      workerId: 'w',
    });
    const flow = new Flow<{ n?: number }>('nightly')
      .node('n', () => ({ n: 1 }))
      .end('n');
    await runner.schedule(flow, '0 3 * * *', {
      timezone: 'Europe/Berlin',
      catchUp: 'all',
    });
    await runner.schedule(flow, '* * * * * *', { name: 'every-second' });
    const takeover = runner.takeOver([flow], { everyMs: 100 });
    try {
      const listed = await cli('schedules', 'list');
      expect(listed.code).toBe(0);
      expect(listed.stdout).toMatch(
        /every-second\s+nightly\s+\* \* \* \* \* \*\s+UTC\s+skip\s+last\s+active/,
      );
      expect(listed.stdout).toMatch(
        /nightly\s+nightly\s+0 3 \* \* \*\s+Europe\/Berlin\s+skip\s+all\s+active\s+\d{4}-/,
      );
      const json = JSON.parse(
        (await cli('--json', 'schedules', 'list')).stdout,
      );
      expect(json).toHaveLength(2);

      const paused = await cli('schedules', 'pause', 'every-second');
      expect(paused).toMatchObject({
        code: 0,
        stdout: 'Paused schedule every-second.\n',
      });
      await sleep(300);
      const ticks = async () =>
        (await store.list({ flow: 'nightly', limit: 100 })).runs.length;
      const before = await ticks();
      await sleep(1_500);
      expect(await ticks()).toBe(before);
      expect((await cli('schedules', 'list')).stdout).toMatch(
        /every-second.*paused\s+-/,
      );

      const resumed = await cli('schedules', 'resume', 'every-second');
      expect(resumed.stdout).toMatch(
        /Resumed schedule every-second: next tick \d{4}-/,
      );
      await sleep(1_500);
      expect(await ticks()).toBeGreaterThan(before);

      const unknown = await cli('schedules', 'pause', 'nope');
      expect(unknown.code).toBe(2);
      expect(unknown.stderr).toMatch(/No schedule "nope" is stored/);
    } finally {
      await takeover.stop();
      runner.close();
      await store.close();
    }
  });
});
