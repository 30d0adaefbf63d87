/**
 * `recoverEach`, the streaming form of `recoverAll`: bounded memory (one page listed, at most
 * `concurrency` recoveries started and not yet taken), keyset paging that neither skips nor
 * repeats runs that finish meanwhile, and an early exit that stops listing and starting runs.
 */
import {
  CheckpointConflict,
  Executor,
  Flow,
  FlowRunner,
  MemoryCheckpointStore,
  RunLeaseHeld,
  ToolRegistry,
  type ListUnfinishedOptions,
  type RunHead,
  type RunResult,
} from 'agent-adapter';
import { CrashingStore, settle } from 'agent-adapter/testing';
import { runnerOn } from '../../../../../test/utils/specs';

interface Steps {
  a?: string;
  b?: string;
}

/** Two supersteps, one call of the idempotent `work` tool each. */
function stepsFlow(): Flow<Steps> {
  return new Flow<Steps>('steps')
    .node('a', async (_s, ctx) => ({
      a: await ctx.call<string>('work', { node: 'a', run: ctx.runId }),
    }))
    .node('b', async (_s, ctx) => ({
      b: await ctx.call<string>('work', { node: 'b', run: ctx.runId }),
    }))
    .edge('a', 'b')
    .end('b');
}

const id = (i: number) => `r${String(i).padStart(3, '0')}`;

/** A shared store that reports its listings and counts recoveries started (their head reads). */
class WatchedStore extends CrashingStore {
  readonly listings: Array<{ after?: string; ids: string[] }> = [];
  /** Recoveries started: `recover` reads the head first. */
  heads = 0;
  onList?: (page: RunHead[], options: ListUnfinishedOptions) => void;
  failListing?: number;

  override async listUnfinished(flow: string, options?: ListUnfinishedOptions) {
    if (this.listings.length + 1 === this.failListing)
      throw new Error('listing failed');
    const page = await super.listUnfinished(flow, options);
    this.listings.push({
      ...(options?.after !== undefined && { after: options.after }),
      ids: page.map((h) => h.runId),
    });
    this.onList?.(page, options ?? {});
    return page;
  }

  override async head(runId: string) {
    this.heads++;
    return super.head(runId);
  }
}

/** `n` runs of stepsFlow cut short before their first checkpoint (`work` of `a` in doubt). */
async function unfinished(
  store: MemoryCheckpointStore,
  n: number,
  leaseMs?: number,
) {
  const registry = new ToolRegistry().register('work', () => 'first try', {
    idempotent: true,
  });
  for (let i = 0; i < n; i++) {
    const dying = new CrashingStore(
      store,
      (w, moment) =>
        w.kind === 'save' && w.checkpoint.step === 1 && moment === 'before',
    );
    await runnerOn(dying, registry, {
      workerId: 'dead',
      ...(leaseMs !== undefined && { leaseMs }),
    })
      .run(stepsFlow(), {}, { runId: id(i) })
      .catch(() => undefined);
  }
  await settle();
}

/** A memory store holding `n` unfinished runs, and the watched view a sweep goes through. */
async function watched(n: number) {
  const inner = new MemoryCheckpointStore();
  await unfinished(inner, n);
  return { inner, store: new WatchedStore(inner) };
}

/** A recovering worker whose `work` tool counts calls in flight and may wait on a gate. */
function recoverer(store: WatchedStore, workerId = 'w2') {
  const calls = new Map<string, number>();
  const probe = {
    inFlight: 0,
    maxInFlight: 0,
    calls,
    gate: undefined as
      ((runId: string) => Promise<void> | undefined) | undefined,
  };
  const registry = new ToolRegistry().register(
    'work',
    async (a: { node: string; run: string }) => {
      const runId = a.run;
      probe.inFlight++;
      probe.maxInFlight = Math.max(probe.maxInFlight, probe.inFlight);
      try {
        calls.set(
          `${runId}/${a.node}`,
          (calls.get(`${runId}/${a.node}`) ?? 0) + 1,
        );
        await probe.gate?.(runId);
        await new Promise((resolve) => setImmediate(resolve));
        return `recovered ${a.node}`;
      } finally {
        probe.inFlight--;
      }
    },
    { idempotent: true },
  );
  const runner = runnerOn(store, registry, {
    workerId,
  });
  return { runner, probe };
}

async function statuses(store: MemoryCheckpointStore, n: number) {
  const out: Record<string, number> = {};
  for (let i = 0; i < n; i++) {
    const status = (await store.head(id(i)))?.status ?? 'missing';
    out[status] = (out[status] ?? 0) + 1;
  }
  return out;
}

describe('FlowRunner.recoverEach', () => {
  it('yields every run once while holding one listed page and at most `concurrency` recoveries', async () => {
    const { inner, store } = await watched(250);
    const { runner, probe } = recoverer(store);
    const concurrency = 3;
    let yielded = 0;
    let maxHeld = 0;
    const listedBefore = () =>
      store.listings.reduce((n, l) => n + l.ids.length, 0);
    // Runs the sweep holds: listed and not yet yielded.
    store.onList = () =>
      (maxHeld = Math.max(maxHeld, listedBefore() - yielded));
    const seen = new Set<string>();
    for await (const [runId, outcome] of runner.recoverEach(stepsFlow(), {
      force: true,
      concurrency,
    })) {
      yielded++;
      expect(seen.has(runId)).toBe(false);
      seen.add(runId);
      expect(outcome).toMatchObject({ status: 'done' });
      // Started and not yet taken by this loop: never more than `concurrency`.
      expect(store.heads - yielded).toBeLessThanOrEqual(concurrency);
      maxHeld = Math.max(maxHeld, listedBefore() - yielded);
      if (yielded === 10) {
        // A consumer that does not pull: the sweep waits for it instead of running on.
        const started = store.heads;
        for (let i = 0; i < 20; i++) await settle();
        expect(store.heads).toBe(started);
        expect(store.heads - yielded).toBeLessThanOrEqual(concurrency);
      }
    }
    expect(seen.size).toBe(250);
    expect(probe.maxInFlight).toBeLessThanOrEqual(concurrency);
    expect(maxHeld).toBeLessThanOrEqual(100 + concurrency);
    // Pages of 100 by run id, each after the last id of the one before.
    expect(store.listings.map((l) => [l.after, l.ids.length])).toEqual([
      [undefined, 100],
      [id(99), 100],
      [id(199), 50],
    ]);
    expect(await statuses(inner, 250)).toEqual({ done: 250 });
    runner.close();
  });

  it('recoverAll is the same sweep collected: a map of every outcome', async () => {
    const { store } = await watched(120);
    const { runner, probe } = recoverer(store);
    const all = await runner.recoverAll(stepsFlow(), {
      force: true,
      concurrency: 2,
    });
    expect([...all.keys()].sort()).toEqual(
      Array.from({ length: 120 }, (_, i) => id(i)),
    );
    expect(probe.maxInFlight).toBeLessThanOrEqual(2);
    expect(store.listings).toHaveLength(2);
    runner.close();
  });

  it('keyset paging: runs that finish while the sweep pages are neither lost nor recovered twice', async () => {
    const { inner, store } = await watched(150);
    const { runner, probe } = recoverer(store);
    const competitor = recoverer(new WatchedStore(inner)).runner;
    // r000's recovery waits until the second page is listed: it is still in flight (unfinished)
    // then, while the rest of page one has finished and left the unfinished set.
    let secondPage!: () => void;
    const listedTwice = new Promise<void>((r) => (secondPage = r));
    probe.gate = (runId) => (runId === id(0) ? listedTwice : undefined);
    const raced: Array<Promise<RunResult<Steps>>> = [];
    store.onList = (page, options) => {
      if (options.after === undefined) {
        // Another worker finishes r120 before the second page is listed (it is not listed)...
        raced.push(competitor.recover(stepsFlow(), id(120)));
      } else {
        // ...and r140 right after it was listed (this sweep's claim of it conflicts).
        raced.push(competitor.recover(stepsFlow(), id(140)));
        secondPage();
      }
    };
    const outcomes = new Map<string, RunResult<Steps> | Error>();
    for await (const [runId, outcome] of runner.recoverEach(stepsFlow(), {
      force: true,
      concurrency: 2,
    })) {
      expect(outcomes.has(runId)).toBe(false);
      outcomes.set(runId, outcome);
      // The competitor's first recovery has finished before the second page is listed.
      if (outcomes.size === 1) await raced[0];
    }
    await Promise.all(raced);
    expect(store.listings.map((l) => l.after)).toEqual([undefined, id(99)]);
    expect(store.listings[1]!.ids).not.toContain(id(120));
    expect(outcomes.has(id(120))).toBe(false);
    expect(outcomes.size).toBe(149);
    expect(outcomes.get(id(0))).toMatchObject({ status: 'done' });
    const r140 = outcomes.get(id(140));
    if (r140 instanceof Error) expect(r140).toBeInstanceOf(CheckpointConflict);
    else expect(r140?.status).toBe('done');
    // Each superstep that was cut short ran once after the crash, whoever recovered it.
    expect(await statuses(inner, 150)).toEqual({ done: 150 });
    for (let i = 0; i < 150; i++) {
      if (i === 120 || i === 140) continue;
      expect([
        probe.calls.get(`${id(i)}/a`),
        probe.calls.get(`${id(i)}/b`),
      ]).toEqual([1, 1]);
    }
    runner.close();
    competitor.close();
  });

  it('leaving the loop early stops listing and starting runs; those started finish first', async () => {
    const { inner, store } = await watched(250);
    const { runner, probe } = recoverer(store);
    let taken = 0;
    for await (const [, outcome] of runner.recoverEach(stepsFlow(), {
      force: true,
      concurrency: 4,
    })) {
      expect(outcome).toMatchObject({ status: 'done' });
      if (++taken === 5) break;
    }
    // Nothing is left running behind the loop...
    expect(probe.inFlight).toBe(0);
    const started = store.heads;
    expect(started).toBeLessThanOrEqual(5 + 4);
    expect(await statuses(inner, 250)).toEqual({
      done: started,
      running: 250 - started,
    });
    // ...and nothing more is listed or started afterwards.
    for (let i = 0; i < 20; i++) await settle();
    expect(store.listings).toHaveLength(1);
    expect(store.heads).toBe(started);
    runner.close();
  });

  it('a listing that fails ends the iteration with its error, after the outcomes of the runs already started', async () => {
    const { store } = await watched(130);
    store.failListing = 2;
    const { runner } = recoverer(store);
    const ids: string[] = [];
    const error = await (async () => {
      for await (const [runId] of runner.recoverEach(stepsFlow(), {
        force: true,
        concurrency: 3,
      }))
        ids.push(runId);
    })().catch((e: unknown) => e);
    expect(error).toMatchObject({ message: 'listing failed' });
    expect(ids.sort()).toEqual(Array.from({ length: 100 }, (_, i) => id(i)));
    store.failListing = undefined;
    await expect(
      runner.recoverAll(stepsFlow(), { force: true }),
    ).resolves.toHaveProperty('size', 30);
    runner.close();
  });

  it('runs held by a live lease are yielded as RunLeaseHeld without taking a recovery slot', async () => {
    const { store } = await watched(130);
    const { runner } = recoverer(store);
    const outcomes: Array<RunResult<Steps> | Error> = [];
    for await (const [, outcome] of runner.recoverEach(stepsFlow(), {
      concurrency: 1,
    }))
      outcomes.push(outcome);
    expect(outcomes).toHaveLength(130);
    expect(outcomes.every((o) => o instanceof RunLeaseHeld)).toBe(true);
    expect(store.heads).toBe(0); // nothing was read, let alone claimed
    runner.close();
  });

  it('a run another worker took after it was listed is RunLeaseHeld, not claimed from under that worker', async () => {
    const inner = new MemoryCheckpointStore();
    await unfinished(inner, 2, 100);
    await new Promise((resolve) => setTimeout(resolve, 150)); // the dead worker's leases expire
    const store = new WatchedStore(inner);
    const until = async (ready: () => boolean) => {
      for (let i = 0; i < 400 && !ready(); i++)
        await new Promise((resolve) => setTimeout(resolve, 5));
      expect(ready()).toBe(true);
    };
    const sweeper = recoverer(store);
    let releaseSweep!: () => void;
    const sweepGate = new Promise<void>((resolve) => (releaseSweep = resolve));
    sweeper.probe.gate = (runId) => (runId === id(0) ? sweepGate : undefined);
    const outcomes = new Map<string, RunResult<Steps> | Error>();
    const sweep = (async () => {
      for await (const [runId, outcome] of sweeper.runner.recoverEach(
        stepsFlow(),
        { concurrency: 1 },
      ))
        outcomes.set(runId, outcome);
    })();
    // Both runs are listed (leases expired); the sweep is inside r000's tool.
    await until(() => sweeper.probe.inFlight === 1);
    // Meanwhile another worker recovers r001 and is alive inside its tool.
    const operator = recoverer(store, 'w3');
    let releaseOperator!: () => void;
    const operatorGate = new Promise<void>(
      (resolve) => (releaseOperator = resolve),
    );
    operator.probe.gate = () => operatorGate;
    const taken = operator.runner.recover(stepsFlow(), id(1));
    await until(() => operator.probe.inFlight === 1);

    releaseSweep();
    await sweep;
    expect(outcomes.get(id(0))).toMatchObject({ status: 'done' });
    expect(outcomes.get(id(1))).toBeInstanceOf(RunLeaseHeld);
    expect(outcomes.get(id(1))).toMatchObject({ owner: 'w3' });
    releaseOperator();
    await expect(taken).resolves.toMatchObject({ status: 'done' });
    expect(sweeper.probe.calls.has(`${id(1)}/a`)).toBe(false);
    expect(operator.probe.calls.get(`${id(1)}/a`)).toBe(1);
    sweeper.runner.close();
    operator.runner.close();
  });

  it('an aborted signal stops the sweep starting runs; the outcomes of those started are still yielded', async () => {
    const { inner, store } = await watched(20);
    const { runner } = recoverer(store);
    const stop = new AbortController();
    const outcomes: Array<RunResult<Steps> | Error> = [];
    for await (const [, outcome] of runner.recoverEach(stepsFlow(), {
      concurrency: 3,
      force: true,
      signal: stop.signal,
    })) {
      outcomes.push(outcome);
      if (outcomes.length === 2) stop.abort();
    }
    // At the abort at most `concurrency` recoveries had been started beyond the two taken.
    expect(store.heads).toBeLessThanOrEqual(2 + 3);
    expect(outcomes).toHaveLength(store.heads);
    expect(outcomes.every((o) => !(o instanceof Error))).toBe(true);
    expect(await statuses(inner, 20)).toEqual({
      done: store.heads,
      running: 20 - store.heads,
    });
    runner.close();
  });

  it('checks concurrency when called, not on the first pull', () => {
    const runner = new FlowRunner(new Executor(new ToolRegistry()));
    expect(() => runner.recoverEach(stepsFlow(), { concurrency: 0 })).toThrow(
      TypeError,
    );
    runner.close();
  });
});
