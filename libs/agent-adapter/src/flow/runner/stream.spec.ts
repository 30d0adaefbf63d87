/**
 * Run streams (`ctx.publish`, `publish()` from a tool, `FlowRunner.stream`): entries in order, each
 * once, however often a superstep runs (a crash, a pause); read live while the run goes on, from
 * an offset, with the run's access rules; bad data and late publishes refused.
 */
import {
  Executor,
  Flow,
  FlowRunner,
  NotInRun,
  RunAccessDenied,
  StreamEntriesDropped,
  ToolRegistry,
  publish,
  type CheckpointStore,
  type Json,
  type StreamEntry,
} from 'agent-adapter';
import { CrashingStore, SimulatedCrash } from 'agent-adapter/testing';
import { KEY, memoryAndSqlite } from '../../../../../test/utils/specs';

interface Job {
  items: string[];
  done?: string[];
}

/** Publishes a line per item from the node and one progress entry per item from the tool. */
function jobFlow() {
  return new Flow<Job>('job')
    .node('work', async (s, ctx) => {
      await ctx.publish({ start: s.items.length });
      const done: string[] = [];
      for (const item of s.items) {
        done.push(await ctx.call<string>('process', { item }));
        void ctx.publish({ finished: item }); // not awaited: the superstep waits for it
      }
      return { done };
    })
    .node('report', async (s, ctx) => {
      await ctx.publish({ report: s.done?.length ?? 0 });
    })
    .edge('work', 'report')
    .end('report');
}

function toolsWith(ran: string[], inside?: (item: string) => void) {
  return new ToolRegistry().register(
    'process',
    async (a: { item: string }) => {
      ran.push(a.item);
      await publish({ progress: a.item });
      inside?.(a.item);
      return `did ${a.item}`;
    },
    { idempotent: true },
  );
}

function runnerOn(
  store: CheckpointStore,
  registry: ToolRegistry,
  extra: { streamRetention?: number } = {},
) {
  return new FlowRunner(new Executor(registry), {
    checkpoints: store,
    checkpointKey: KEY,
    leaseMs: 2_000,
    ...extra,
  });
}

async function all(entries: AsyncIterable<StreamEntry>): Promise<Json[]> {
  const out: Json[] = [];
  for await (const e of entries) out.push(e.data);
  return out;
}

const EXPECTED: Json[] = [
  { start: 2 },
  { progress: 'a' },
  { finished: 'a' },
  { progress: 'b' },
  { finished: 'b' },
  { report: 2 },
];

describe.each(memoryAndSqlite('stream'))('run streams on %s', (_n, fresh) => {
  let store: CheckpointStore;
  fresh((s) => (store = s));

  it('a run publishes from its nodes and tools; a reader gets each entry once, in order, numbered', async () => {
    const runner = runnerOn(store, toolsWith([]));
    const flow = jobFlow();
    await runner.run(flow, { items: ['a', 'b'] }, { runId: 'j1' });
    const entries: StreamEntry[] = [];
    for await (const e of runner.stream(flow, 'j1')) entries.push(e);
    expect(entries.map((e) => e.data)).toEqual(EXPECTED);
    expect(entries.map((e) => e.offset)).toEqual([0, 1, 2, 3, 4, 5]);
    expect(entries.map((e) => [e.superstep, e.node])).toEqual([
      [0, 'work'],
      [0, 'work'],
      [0, 'work'],
      [0, 'work'],
      [0, 'work'],
      [1, 'report'],
    ]);
    expect(await all(runner.stream(flow, 'j1', { from: 4 }))).toEqual(
      EXPECTED.slice(4),
    );
    runner.close();
  });

  it('a superstep run again after a crash publishes nothing twice', async () => {
    const ran: string[] = [];
    const view = new CrashingStore(store);
    const flow = jobFlow();
    // The worker dies inside the second item's tool, after its progress entry was published.
    const w1 = runnerOn(
      view,
      toolsWith(ran, (item) => (item === 'b' ? view.kill() : undefined)),
    );
    await expect(
      w1.run(flow, { items: ['a', 'b'] }, { runId: 'j2' }),
    ).rejects.toBeInstanceOf(SimulatedCrash);
    w1.close();
    const w2 = runnerOn(store, toolsWith(ran));
    const seen = await all(w2.stream(flow, 'j2', { follow: false }));
    expect(seen).toEqual(EXPECTED.slice(0, 4));
    expect((await w2.recover(flow, 'j2')).status).toBe('done');
    expect(ran).toEqual(['a', 'b', 'b']); // the idempotent call in doubt ran again
    expect(await all(w2.stream(flow, 'j2'))).toEqual(EXPECTED);
    w2.close();
  });

  it('a reader follows a live run: entries stored in this process are read at once, and it ends with the run', async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const flow = new Flow<{ n: number }>('live')
      .node('talk', async (_s, ctx) => {
        await ctx.publish('hello');
        await gate;
        await ctx.publish('bye');
      })
      .end('talk');
    const runner = runnerOn(store, new ToolRegistry());
    const running = runner.run(flow, { n: 1 }, { runId: 'l1' });
    await new Promise((r) => setTimeout(r, 50));
    const reader = runner.stream(flow, 'l1', { pollMs: 60_000 });
    const first = await reader.next();
    expect(first.value).toMatchObject({ offset: 0, data: 'hello' });
    const second = reader.next();
    release();
    expect((await second).value).toMatchObject({ offset: 1, data: 'bye' });
    await running;
    expect((await reader.next()).done).toBe(true);
    runner.close();
  });

  it('an abort ends a reader that waits, without an error', async () => {
    const flow = new Flow<{ n: number }>('waits')
      .node('ask', async (_s, ctx) => {
        await ctx.publish('asked');
        await ctx.call('approve', {});
      })
      .end('ask');
    const registry = new ToolRegistry().register('approve', () => 'ok', {
      approval: true,
    });
    const runner = runnerOn(store, registry);
    const paused = await runner.run(flow, { n: 1 }, { runId: 'p1' });
    expect(paused.status).toBe('paused');
    const abort = new AbortController();
    const read = all(
      runner.stream(flow, 'p1', { signal: abort.signal, pollMs: 20 }),
    );
    setTimeout(() => abort.abort(), 100);
    expect(await read).toEqual(['asked']);
    // The resumed superstep runs the node again: its entry is not published twice.
    await runner.resume(flow, 'p1', { approved: true });
    expect(await all(runner.stream(flow, 'p1'))).toEqual(['asked']);
    runner.close();
  });

  it("checks the reader's identity and the flow, before reading anything", async () => {
    const runner = runnerOn(store, toolsWith([]));
    const flow = jobFlow();
    await runner.run(
      flow,
      { items: ['a'] },
      { runId: 'j3', ctx: { user: 'ana' } },
    );
    await expect(
      all(runner.stream(flow, 'j3', { ctx: { user: 'bo' } })),
    ).rejects.toBeInstanceOf(RunAccessDenied);
    const other = new Flow<Job>('other').node('x', () => undefined).end('x');
    await expect(
      all(runner.stream(other, 'j3', { ctx: { user: 'ana' } })),
    ).rejects.toThrow(/job/);
    expect(
      await all(runner.stream(flow, 'j3', { ctx: { user: 'ana' } })),
    ).toHaveLength(4);
    expect(() => runner.stream(flow, 'j3', { from: -1 })).toThrow(/from/);
    runner.close();
  });

  it('keeps the newest entries: a reader from a dropped offset is told where to go on', async () => {
    const runner = runnerOn(store, toolsWith([]), { streamRetention: 2 });
    const flow = jobFlow();
    await runner.run(flow, { items: ['a', 'b'] }, { runId: 'j4' });
    // Superstep 0's five entries: the last one kept, with the report (superstep 1).
    await expect(all(runner.stream(flow, 'j4'))).rejects.toMatchObject({
      constructor: StreamEntriesDropped,
      first: 4,
    });
    expect(await all(runner.stream(flow, 'j4', { from: 4 }))).toEqual(
      EXPECTED.slice(4),
    );
    runner.close();
  });

  it('refuses what is not JSON, a publish after the superstep, and publish() outside a run', async () => {
    let late!: () => Promise<void>;
    const flow = new Flow<{ n: number }>('bad')
      .node('n', async (_s, ctx) => {
        await expect(ctx.publish(undefined as unknown as Json)).rejects.toThrow(
          /Node "n".*not JSON/,
        );
        late = () => ctx.publish('late');
      })
      .end('n');
    const runner = runnerOn(store, new ToolRegistry());
    expect((await runner.run(flow, { n: 1 }, { runId: 'b1' })).status).toBe(
      'done',
    );
    await expect(late()).rejects.toThrow(/after its superstep ended/);
    await expect(publish('x')).rejects.toBeInstanceOf(NotInRun);
    expect(await all(runner.stream(flow, 'b1'))).toEqual([]);
    runner.close();
  });
});
