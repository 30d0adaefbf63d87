/**
 * Queues (`FlowRunner.enqueue`, admitted by `takeOver`): a run is stored and its id returned at
 * once; workers start it under the queue's limits, counted over every worker; a dedupe key makes
 * one run; a waiting run is not recovered around its queue.
 */
import {
  DurableSetupError,
  Executor,
  Flow,
  FlowRunner,
  RunQueued,
  type CheckpointStore,
  type QueueOptions,
} from 'agent-adapter';
import {
  KEY,
  ticketsFlow,
  ticketsRegistry,
  type LedgerEntry,
} from 'agent-adapter/testing/fixtures';
import { memoryAndSqlite, sleep, until } from '../../../../../test/utils/specs';

const ORDER = { show: 'Hamlet', seats: 2 };

/** Tool calls in progress across every worker, and the most seen at once. */
class Gauge {
  now = 0;
  max = 0;
  async during(ms: number): Promise<void> {
    this.max = Math.max(this.max, ++this.now);
    await sleep(ms);
    this.now--;
  }
}

function worker(
  store: CheckpointStore,
  ledger: LedgerEntry[],
  name: string,
  options: { gauge?: Gauge; queues?: Record<string, QueueOptions> } = {},
): FlowRunner {
  const registry = ticketsRegistry(ledger, name, {
    onTool: async () => options.gauge?.during(15),
  });
  return new FlowRunner(new Executor(registry), {
    checkpoints: store,
    checkpointKey: KEY,
    leaseMs: 2_000,
    workerId: name,
    ...(options.queues && { queues: options.queues }),
  });
}

describe.each(memoryAndSqlite('queues'))('queues on %s', (_name, fresh) => {
  let store: CheckpointStore;
  fresh((s) => (store = s));
  const status = async (runId: string) => (await store.head(runId))?.status;

  it('enqueue stores the run and returns at once; only a takeover with the flow starts it, and recover refuses it meanwhile', async () => {
    const ledger: LedgerEntry[] = [];
    const w1 = worker(store, ledger, 'w1');
    const { runId, created } = await w1.enqueue(ticketsFlow(), ORDER);
    expect(created).toBe(true);
    expect(await status(runId)).toBe('running');
    expect((await store.head(runId))?.queue).toMatchObject({
      name: 'tickets',
      priority: 0,
    });
    await sleep(100);
    expect(ledger).toEqual([]);
    await expect(w1.recover(ticketsFlow(), runId)).rejects.toBeInstanceOf(
      RunQueued,
    );
    expect((await w1.recoverAll(ticketsFlow())).size).toBe(0);

    const takeover = w1.takeOver([ticketsFlow()], { everyMs: 1_000 });
    try {
      // Woken by the next enqueue on this runner, not by its timer.
      const second = await w1.enqueue(ticketsFlow(), ORDER);
      expect(
        await until(
          async () =>
            (await status(runId)) === 'done' &&
            (await status(second.runId)) === 'done',
          900,
        ),
      ).toBe(true);
      expect(ledger.filter((e) => e.tool === 'charge_card')).toHaveLength(2);
      expect((await store.head(runId))?.queue?.admittedAt).toEqual(
        expect.any(Number),
      );
    } finally {
      await takeover.stop();
    }
  });

  it('concurrency 2 over three workers: never more than two runs at once, every run done, each tool once', async () => {
    const ledger: LedgerEntry[] = [];
    const gauge = new Gauge();
    const queues = { tickets: { concurrency: 2 } };
    const workers = ['w1', 'w2', 'w3'].map((name) =>
      worker(store, ledger, name, { gauge, queues }),
    );
    const ids: string[] = [];
    for (let i = 0; i < 8; i++)
      ids.push((await workers[i % 3]!.enqueue(ticketsFlow(), ORDER)).runId);
    // One run at a time per worker: two at once can only be two workers, so the limit is shown
    // to hold over the fleet, and a loaded machine cannot leave every run to one fast worker.
    const takeovers = workers.map((w) =>
      w.takeOver([ticketsFlow()], { everyMs: 20, concurrency: 1 }),
    );
    try {
      expect(
        await until(
          async () =>
            (await Promise.all(ids.map(status))).every((s) => s === 'done'),
          20_000,
        ),
      ).toBe(true);
    } finally {
      await Promise.all(takeovers.map((t) => t.stop()));
    }
    expect(gauge.max).toBe(2);
    expect(ledger.filter((e) => e.tool === 'charge_card')).toHaveLength(8);
    expect(new Set(ledger.map((e) => e.worker)).size).toBeGreaterThan(1);
  });

  it('perKey 1: runs of one key one after another, other keys beside them; priority first; a delay waits', async () => {
    const ledger: LedgerEntry[] = [];
    const w1 = worker(store, ledger, 'w1', {
      queues: { tickets: { perKey: 1 } },
    });
    const put = (key: string, extra: object = {}) =>
      w1.enqueue(ticketsFlow(), ORDER, { key, ...extra });
    const a1 = await put('a');
    const a2 = await put('a', { priority: -1 });
    const b1 = await put('b');
    const later = await put('c', { delayMs: 400 });
    const started = Date.now();
    const takeover = w1.takeOver([ticketsFlow()], { everyMs: 20 });
    try {
      await until(async () => (await status(later.runId)) === 'done', 5_000);
    } finally {
      await takeover.stop();
    }
    const admitted = async (id: string) =>
      (await store.head(id))?.queue?.admittedAt as number;
    // Key a: the priority -1 run first, the other once it ended.
    expect(await admitted(a2.runId)).toBeLessThan(await admitted(a1.runId));
    expect(await admitted(b1.runId)).toBeLessThan(await admitted(a1.runId));
    expect(await admitted(later.runId)).toBeGreaterThanOrEqual(started + 300);
  });

  it('50 enqueues with one dedupe key make one run', async () => {
    const w1 = worker(store, [], 'w1');
    const results = await Promise.all(
      Array.from({ length: 50 }, () =>
        w1.enqueue(ticketsFlow(), ORDER, { dedupeKey: 'order-7' }),
      ),
    );
    expect(results.filter((r) => r.created)).toHaveLength(1);
    expect(new Set(results.map((r) => r.runId)).size).toBe(1);
    expect((await store.list({ flow: 'tickets' })).runs).toHaveLength(1);
  });

  it('bad queue options and enqueue arguments are refused by name, before anything is stored', async () => {
    expect(() =>
      worker(store, [], 'w1', { queues: { tickets: { concurrency: 0 } } }),
    ).toThrow(
      new DurableSetupError(
        'FlowRunner: "queues.tickets.concurrency" must be a positive integer, got 0.',
      ),
    );
    expect(() =>
      worker(store, [], 'w1', {
        queues: { 'bad name': {} },
      }),
    ).toThrow(/Queue name "bad name" is invalid/);
    expect(() =>
      worker(store, [], 'w1', {
        queues: { q: { rateLimit: { limit: 5, intervalMs: -1 } } },
      }),
    ).toThrow(/"queues.q.rateLimit.intervalMs" must be a positive integer/);
    const w1 = worker(store, [], 'w1');
    await expect(
      w1.enqueue(ticketsFlow(), ORDER, { priority: 1.5 }),
    ).rejects.toThrow(/priority must be an integer/);
    await expect(
      w1.enqueue(ticketsFlow(), ORDER, { delayMs: -5 }),
    ).rejects.toThrow(/delayMs must be a non-negative integer/);
    await expect(
      w1.enqueue(ticketsFlow(), ORDER, { dedupeKey: '' }),
    ).rejects.toThrow(/dedupeKey must be a string of 1-200 characters/);
    expect((await store.list()).runs).toEqual([]);
  });

  it('a run admitted by a worker without its flow is released at once: a worker with the flow takes it, not a lease later', async () => {
    const ledger: LedgerEntry[] = [];
    // w1 admits from the shared queue but has another flow only; w2 has the tickets flow.
    const other = new Flow<{ x?: number }>('other')
      .node('n', () => ({}))
      .end('n');
    const w1 = worker(store, ledger, 'w1', { queues: { shared: {} } });
    const w2 = worker(store, ledger, 'w2', { queues: { shared: {} } });
    const { runId } = await w2.enqueue(ticketsFlow(), ORDER, {
      queue: 'shared',
    });
    const t1 = w1.takeOver([other], { everyMs: 5_000 });
    try {
      await t1.lookNow();
      const head = await store.head(runId);
      // Admitted by w1, and released: due at once, not when w1's 2 s lease would expire.
      expect(head?.queue?.admittedAt).toBeDefined();
      expect(head?.leaseExpiresAt ?? 0).toBeLessThanOrEqual(Date.now());
      const t2 = w2.takeOver([ticketsFlow()], { everyMs: 5_000 });
      try {
        await t2.lookNow();
        expect(
          await until(async () => (await status(runId)) === 'done', 1_000),
        ).toBe(true);
      } finally {
        await t2.stop();
      }
    } finally {
      await t1.stop();
      w1.close();
      w2.close();
    }
  });
});
