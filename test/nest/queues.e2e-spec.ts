/**
 * Queues in the Nest module: `@Flow(name, { queue })` and `DurableModule.forRoot({ queues })`
 * limit the runs `FlowRunner.enqueue` stores, over every application on the store (two here, on
 * one SQLite file); bad queue options fail the bootstrap, naming the option.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SQLiteCheckpointStore } from 'agent-adapter';
import {
  DurableModule,
  Flow,
  FlowRunner,
  Node,
  type DurableModuleOptions,
} from 'agent-adapter/nest';
import { KEY } from './fixtures/tickets.fixtures';
import { Apps } from './utils';

interface Job {
  name?: string;
  done?: boolean;
}

/** Nodes in progress across every application of the test, and the most seen at once. */
const gauge = { now: 0, max: 0 };

@Flow('one-at-a-time', { queue: { concurrency: 1 } })
class OneAtATime {
  @Node({ start: true, end: true })
  async work(): Promise<Partial<Job>> {
    gauge.max = Math.max(gauge.max, ++gauge.now);
    await new Promise((r) => setTimeout(r, 30));
    gauge.now--;
    return { done: true };
  }
}

@Flow('unlimited')
class Unlimited {
  @Node({ start: true, end: true })
  work(): Partial<Job> {
    return { done: true };
  }
}

describe('queues in the Nest module (e2e, SQLite)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'aa-nest-queues-'));
  const apps = new Apps();
  const stores: SQLiteCheckpointStore[] = [];
  let n = 0;
  afterEach(async () => {
    await apps.closeAll();
    while (stores.length) await stores.pop()!.close();
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  const boot = (path: string, options: Partial<DurableModuleOptions> = {}) => {
    const store = new SQLiteCheckpointStore(path);
    stores.push(store);
    return apps.boot(
      [
        DurableModule.forRoot({
          store,
          key: KEY,
          takeover: { everyMs: 30 },
          ...options,
        }),
      ],
      { providers: [OneAtATime, Unlimited] },
    );
  };

  it("@Flow's queue holds over two applications: one run at a time, every run done", async () => {
    const path = join(dir, `runs-${++n}.db`);
    const [a, b] = [await boot(path), await boot(path)];
    const runner = a.get(FlowRunner);
    const ids: string[] = [];
    for (let i = 0; i < 6; i++)
      ids.push((await runner.enqueue(OneAtATime, {})).runId);
    const other = await b.get(FlowRunner).enqueue('unlimited', {});
    const status = async (id: string) => (await runner.get(id)).status;
    for (let i = 0; i < 300; i++) {
      const all = await Promise.all(ids.map(status));
      if (all.every((s) => s === 'done')) break;
      await new Promise((r) => setTimeout(r, 20));
    }
    expect(await Promise.all(ids.map(status))).toEqual(ids.map(() => 'done'));
    expect(gauge.max).toBe(1);
    expect((await runner.get(other.runId)).status).toBe('done');
  });

  it('a queue named in forRoot and in @Flow, and a bad limit, fail the bootstrap by name', async () => {
    const path = join(dir, `runs-${++n}.db`);
    await expect(
      boot(path, { queues: { 'one-at-a-time': { concurrency: 2 } } }),
    ).rejects.toThrow(
      `DurableModule: queue "one-at-a-time" is configured twice, in @Flow('one-at-a-time', { queue }) and in the module's queues. Keep one.`,
    );
    await expect(
      boot(path, { queues: { mail: { perKey: 0 } } }),
    ).rejects.toThrow(
      'DurableModule: "queues.mail.perKey" must be a positive integer, got 0.',
    );
  });
});
