import { AsyncLocalStorage } from 'node:async_hooks';
import { CheckpointConflict, CheckpointStoreCorrupt } from '../../errors';
import { MemoryCheckpointStore } from '../checkpoints/memory.store';
import { assertNoGaps } from '../../flow/runner/run-reader';
import { openHead } from './head-seal';
import { SegmentWriter } from './segment-writer';
import { KeyRing } from './key-ring';
import {
  openCall,
  sealCheckpoint,
  type CallContent,
  type Checkpoint,
  type CheckpointContent,
} from './records';
import { bareCheckpoint } from '../../../../../test/utils/segments';

const ring = new KeyRing({ current: 'call-log-spec-secret-0123456789abc' });
const RUN = 'run-1';

const tick = () => new Promise<void>((resolve) => setImmediate(resolve));

function content(
  phase: CallContent['phase'],
  index = 0,
  over: Partial<CallContent> = {},
): CallContent {
  return {
    node: 'n',
    index,
    tool: 'tool',
    phase,
    argsHash: 'h',
    ...(phase === 'done' && { outcome: { ok: true as const, value: index } }),
    at: 0,
    ...over,
  };
}

/** A checkpoint of RUN (running, superstep 0) at `step`, in `segment`. */
const checkpoint = (
  step: number,
  segment = 1,
  reason: CheckpointContent['reason'] = 'start',
): Checkpoint => bareCheckpoint(ring, RUN, step, { segment, reason });

const sealed = (cp: Checkpoint) => sealCheckpoint(ring, cp);

/** Segment `segment` of RUN (incarnation 1), written by worker `w`. */
const writer = (store: MemoryCheckpointStore, segment = 1) =>
  new SegmentWriter(store, ring, RUN, segment, 1, { owner: 'w' });

/**
 * A memory store holding step 0 of RUN (segment 1, running), and the writer of segment 1 that
 * wrote it (a writer's count of the run's calls starts from the checkpoint it opens with).
 */
async function storeWithRun(): Promise<{
  store: MemoryCheckpointStore;
  log: SegmentWriter;
}> {
  const store = new MemoryCheckpointStore();
  const log = writer(store, 1);
  await log.checkpoint(checkpoint(0));
  return { store, log };
}

async function stored(store: MemoryCheckpointStore, superstep: number) {
  return (await store.calls(RUN, superstep)).map((r) => {
    const c = openCall(ring, r);
    return { segment: c.segment, seq: c.seq, phase: c.phase, index: c.index };
  });
}

describe('SegmentWriter', () => {
  it('numbers records 1, 2, 3 within a superstep and restarts at 1 for the next', async () => {
    const { store, log } = await storeWithRun();
    await log.started(0, content('started', 0));
    await log.started(0, content('started', 1));
    await log.started(0, content('started', 2));
    await log.started(1, content('started', 0));
    await log.started(1, content('started', 1));
    expect(await stored(store, 0)).toEqual([
      { segment: 1, seq: 1, phase: 'started', index: 0 },
      { segment: 1, seq: 2, phase: 'started', index: 1 },
      { segment: 1, seq: 3, phase: 'started', index: 2 },
    ]);
    expect(await stored(store, 1)).toEqual([
      { segment: 1, seq: 1, phase: 'started', index: 0 },
      { segment: 1, seq: 2, phase: 'started', index: 1 },
    ]);
  });

  it('seals each record at its coordinates', async () => {
    const { store, log } = await storeWithRun();
    await log.started(0, content('started', 0, { args: { a: 1 } }));
    const [record] = await store.calls(RUN, 0);
    expect(record).toMatchObject({
      runId: RUN,
      segment: 1,
      seq: 1,
      superstep: 0,
    });
    expect(openCall(ring, record!)).toMatchObject({
      phase: 'started',
      args: { a: 1 },
      superstep: 0,
    });
  });

  it('stores `started` before resolving', async () => {
    const { store, log } = await storeWithRun();
    const write = jest.spyOn(store, 'recordCall');
    await log.started(0, content('started'));
    expect(write).toHaveBeenCalledTimes(1);
    expect(await stored(store, 0)).toHaveLength(1);
  });

  it('buffers a result and sends it with the next `started` in one write', async () => {
    const { store, log } = await storeWithRun();
    const write = jest.spyOn(store, 'recordCall');
    await log.started(0, content('started', 0));
    log.finished(0, content('done', 0));
    await Promise.resolve();
    expect(await stored(store, 0)).toHaveLength(1);
    await log.started(0, content('started', 1));
    expect(write).toHaveBeenCalledTimes(2);
    expect(write.mock.calls[1]?.[2].map((r) => r.seq)).toEqual([2, 3]);
    expect((await stored(store, 0)).map((r) => r.phase)).toEqual([
      'started',
      'done',
      'started',
    ]);
    await tick();
    expect(write).toHaveBeenCalledTimes(2);
  });

  it('flushes a buffered result right after the current tick', async () => {
    const { store, log } = await storeWithRun();
    await log.started(0, content('started', 0));
    log.finished(0, content('done', 0));
    log.finished(0, content('unrecordable', 1, { reason: 'a Date' }));
    for (let i = 0; i < 5; i++) await Promise.resolve();
    expect(await stored(store, 0)).toHaveLength(1);
    await tick();
    await tick();
    expect((await stored(store, 0)).map((r) => [r.seq, r.phase])).toEqual([
      [1, 'started'],
      [2, 'done'],
      [3, 'unrecordable'],
    ]);
    expect(await log.drain()).toEqual([]);
  });

  it('hands buffered results to drain() (for the checkpoint) instead of writing them', async () => {
    const { store, log } = await storeWithRun();
    const write = jest.spyOn(store, 'recordCall');
    const immediates = () =>
      process.getActiveResourcesInfo().filter((r) => r === 'Immediate').length;
    const before = immediates();
    await log.started(0, content('started', 0));
    log.finished(0, content('done', 0));
    expect(immediates()).toBe(before + 1);
    const drained = await log.drain();
    expect(drained.map((r) => openCall(ring, r))).toMatchObject([
      { seq: 2, phase: 'done', superstep: 0, segment: 1 },
    ]);
    // The result flush had nothing left to write: cancelled, not left to spin the event loop.
    expect(immediates()).toBe(before);
    await tick();
    await tick();
    expect(write).toHaveBeenCalledTimes(1);
    expect(await stored(store, 0)).toHaveLength(1);
    expect(await log.drain()).toEqual([]);
  });

  it('gives calls started together one write, however many microtasks apart they log', async () => {
    const { store, log } = await storeWithRun();
    const write = jest.spyOn(store, 'recordCall');
    // A node's Promise.all: each call does some async work of its own before it logs.
    const call = async (awaits: number, i: number) => {
      for (let k = 0; k < awaits; k++) await Promise.resolve();
      await log.started(0, content('started', i));
    };
    await Promise.all([0, 1, 3, 7].map((awaits, i) => call(awaits, i)));
    expect(write).toHaveBeenCalledTimes(1);
    expect((await stored(store, 0)).map((r) => r.seq)).toEqual([1, 2, 3, 4]);
    // A later call is its own write.
    await log.started(0, content('started', 4));
    expect(write).toHaveBeenCalledTimes(2);
  });

  it('drain() waits for a started write not yet sent, and does not take its record', async () => {
    const { store, log } = await storeWithRun();
    const started = log.started(0, content('started', 0));
    expect(await log.drain()).toEqual([]);
    await started;
    expect(await stored(store, 0)).toHaveLength(1);
  });

  it('drain() waits for writes in flight', async () => {
    const { store, log } = await storeWithRun();
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const real = store.recordCall.bind(store);
    jest.spyOn(store, 'recordCall').mockImplementation(async (...args) => {
      await gate;
      return real(...args);
    });
    const started = log.started(0, content('started', 0));
    let drained = false;
    const draining = log.drain().then((records) => {
      drained = true;
      return records;
    });
    await tick();
    expect(drained).toBe(false);
    release();
    await started;
    expect(await draining).toEqual([]);
    expect(await stored(store, 0)).toHaveLength(1);
  });

  it('queues what is logged while a write is in flight into one next write, settled in order', async () => {
    const { store, log } = await storeWithRun();
    const releases: Array<() => void> = [];
    const real = store.recordCall.bind(store);
    const write = jest
      .spyOn(store, 'recordCall')
      .mockImplementation(async (...args) => {
        await new Promise<void>((resolve) => releases.push(resolve));
        return real(...args);
      });
    const settledOrder: string[] = [];
    const first = log
      .started(0, content('started', 0))
      .then(() => settledOrder.push('first'));
    await tick(); // the first write is in flight, held
    expect(write).toHaveBeenCalledTimes(1);
    log.finished(0, content('done', 0));
    const second = log
      .started(0, content('started', 1))
      .then(() => settledOrder.push('second'));
    const third = log
      .started(0, content('started', 2))
      .then(() => settledOrder.push('third'));
    let quiet = false;
    const settled = log.settled().then(() => (quiet = true));
    await tick();
    expect(write).toHaveBeenCalledTimes(1); // nothing overtakes the write in flight
    releases.shift()!();
    await first;
    await tick();
    expect(write).toHaveBeenCalledTimes(2); // the rest in one write
    expect(write.mock.calls[1]![2].map((r) => r.seq)).toEqual([2, 3, 4]);
    expect(quiet).toBe(false);
    expect(settledOrder).toEqual(['first']);
    releases.shift()!();
    await Promise.all([second, third, settled]);
    expect(settledOrder).toEqual(['first', 'second', 'third']);
    expect((await stored(store, 0)).map((r) => r.seq)).toEqual([1, 2, 3, 4]);
  });

  it('issues a write queued behind one in flight in the async context of the caller that queued it', async () => {
    const { store, log } = await storeWithRun();
    const context = new AsyncLocalStorage<string>();
    const releases: Array<() => void> = [];
    const seen: Array<string | undefined> = [];
    const real = store.recordCall.bind(store);
    jest.spyOn(store, 'recordCall').mockImplementation(async (...args) => {
      seen.push(context.getStore()); // what a driver's instrumentation would read
      await new Promise<void>((resolve) => releases.push(resolve));
      return real(...args);
    });
    const first = context.run('first', () =>
      log.started(0, content('started', 0)),
    );
    await tick();
    const second = context.run('second', () =>
      log.started(0, content('started', 1)),
    );
    await tick();
    context.run('releaser', () => releases.shift()!());
    await first;
    await tick();
    releases.shift()!();
    await second;
    expect(seen).toEqual(['first', 'second']);
  });

  it('keeps numbering across flushes with no gap', async () => {
    const { store, log } = await storeWithRun();
    for (let i = 0; i < 4; i++) {
      await log.started(0, content('started', i));
      log.finished(0, content('done', i));
      if (i % 2) await tick();
    }
    const rest = await log.drain();
    await store.recordCall(RUN, 1, rest);
    const all = await store.calls(RUN, 0);
    expect(all.map((r) => r.seq)).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
    assertNoGaps(RUN, all);
  });

  it('fails every write after the store refused one (fenced segment)', async () => {
    const { store, log } = await storeWithRun();
    // Another worker claims the run: segment 1 is cut off.
    await writer(store, 2).checkpoint(checkpoint(1, 2, 'claim'), {
      expectCalls: 0,
    });
    const write = jest.spyOn(store, 'recordCall');
    const first = await log
      .started(0, content('started', 0))
      .catch((e: unknown) => e);
    expect(first).toBeInstanceOf(CheckpointConflict);
    expect((first as Error).message).toMatch(/segment 1 was cut off/);
    expect(log.failure).toBe(first);

    await expect(log.started(0, content('started', 1))).rejects.toBe(first);
    log.finished(0, content('done', 1));
    await tick();
    await expect(log.drain()).rejects.toBe(first);
    expect(write).toHaveBeenCalledTimes(1);
    expect(await store.calls(RUN, 0)).toEqual([]);
  });

  describe('checkpoint() (sealed here, written in order with the records)', () => {
    it("deferred: goes out with the next superstep's first started record, in one save", async () => {
      const { store, log } = await storeWithRun();
      const [save, record] = [
        jest.spyOn(store, 'save'),
        jest.spyOn(store, 'recordCall'),
      ];
      await log.started(0, content('started', 0));
      log.finished(0, content('done', 0));
      const saved = jest.fn();
      void log
        .checkpoint(checkpoint(1), { calls: await log.drain(), deferred: true })
        .then(saved);
      await Promise.resolve();
      expect(saved).not.toHaveBeenCalled();
      await log.started(1, content('started', 0));
      expect(saved).toHaveBeenCalledTimes(1);
      expect(record).toHaveBeenCalledTimes(1); // superstep 0's started only
      expect(save).toHaveBeenCalledTimes(1);
      expect(save.mock.calls[0]![1]).toMatchObject({ owner: 'w' });
      expect(save.mock.calls[0]![1]).not.toHaveProperty('leaseExpiresAt');
      expect((await store.latest(RUN))?.step).toBe(1);
      expect((await stored(store, 0)).map((r) => r.phase)).toEqual([
        'started',
        'done',
      ]);
      expect((await stored(store, 1)).map((r) => r.phase)).toEqual(['started']);
    });

    it('deferred: goes out alone once the microtask queue is empty, and drain() waits for it', async () => {
      const { store, log } = await storeWithRun();
      const saved = jest.fn();
      void log.checkpoint(checkpoint(1), { deferred: true }).then(saved);
      expect(await log.drain()).toEqual([]);
      expect(saved).toHaveBeenCalledTimes(1);
      expect((await store.latest(RUN))?.step).toBe(1);
    });

    it('a refused deferred save fails the started record it carried and every later write; nothing is stored', async () => {
      const { store, log } = await storeWithRun();
      await store.save(sealed(checkpoint(1, 2, 'claim'))); // another worker claimed the run
      const written = log
        .checkpoint(checkpoint(2), { deferred: true })
        .catch((e: unknown) => e);
      const refused = await log
        .started(1, content('started', 0))
        .catch((e: unknown) => e);
      expect(refused).toBeInstanceOf(CheckpointConflict);
      expect(await written).toBe(refused);
      expect(log.failure).toBe(refused);
      await expect(log.drain()).rejects.toBe(refused);
      expect((await store.latest(RUN))?.segment).toBe(2);
      expect(await store.calls(RUN, 1)).toEqual([]);
    });

    it('now: writes at once with the records handed over, the lease counted from the write', async () => {
      const store = new MemoryCheckpointStore();
      const log = new SegmentWriter(store, ring, RUN, 1, 1, {
        owner: 'w',
        leaseMs: 60_000,
      });
      await log.checkpoint(checkpoint(0));
      const save = jest.spyOn(store, 'save');
      await log.started(0, content('started', 0));
      log.finished(0, content('done', 0));
      const calls = await log.drain();
      const before = Date.now();
      await log.checkpoint(checkpoint(1), { calls, expectCalls: 1 });
      const options = save.mock.calls[0]![1]!;
      expect(options).toMatchObject({ owner: 'w', expectCalls: 1 });
      expect(options.calls?.map((r) => r.seq)).toEqual([2]);
      // Counted from the write, rounded down to a quarter of the lease (leaseEnd).
      expect(options.leaseExpiresAt).toBeGreaterThan(before + 45_000);
      expect(options.leaseExpiresAt).toBeLessThanOrEqual(Date.now() + 60_000);
      expect(options.leaseExpiresAt! % 15_000).toBe(0);
      expect((await store.latest(RUN))?.step).toBe(1);
    });

    it('now: a refused save rejects with the conflict and fails every later write', async () => {
      const { store, log } = await storeWithRun();
      const refused = await log
        .checkpoint(checkpoint(5))
        .catch((e: unknown) => e);
      expect(refused).toBeInstanceOf(CheckpointConflict);
      expect(log.failure).toBe(refused);
      await expect(log.started(0, content('started', 0))).rejects.toBe(refused);
      expect((await store.latest(RUN))?.step).toBe(0);
    });
  });

  it('keeps the failure of a background flush for the next write', async () => {
    const { store, log } = await storeWithRun();
    await log.started(0, content('started', 0));
    // Another worker claims the run: segment 1 is cut off.
    await store.save(sealed(checkpoint(1, 2, 'claim')));
    log.finished(0, content('done', 0));
    await tick();
    await tick();
    expect(log.failure).toBeInstanceOf(CheckpointConflict);
    await expect(log.started(0, content('started', 1))).rejects.toBe(
      log.failure,
    );
    await expect(log.drain()).rejects.toBe(log.failure);
    expect(await stored(store, 0)).toHaveLength(1);
  });

  describe('the head seal (written with every write)', () => {
    it('covers the columns and the call count each write leaves, and the incarnation', async () => {
      const { store, log } = await storeWithRun();
      const opens = async () => {
        const head = (await store.head(RUN))!;
        return { incarnation: openHead(ring, head), calls: head.calls };
      };
      expect(await opens()).toEqual({ incarnation: 1, calls: 0 });
      await log.started(0, content('started', 0));
      await log.started(0, content('started', 1));
      expect(await opens()).toEqual({ incarnation: 1, calls: 2 });
      log.finished(0, content('done', 0));
      await log.checkpoint(
        { ...checkpoint(1), superstep: 1, logBefore: 3 },
        { calls: await log.drain() },
      );
      expect(await opens()).toEqual({ incarnation: 1, calls: 3 });
      // A claim by another segment counts from the count it insists on.
      const claimer = writer(store, 2);
      await claimer.checkpoint(checkpoint(2, 2, 'claim'), { expectCalls: 3 });
      await claimer.started(1, content('started', 0));
      expect(await opens()).toEqual({ incarnation: 1, calls: 4 });
    });

    it('fails to open once a sealed column of the head is changed', async () => {
      const { store, log } = await storeWithRun();
      await log.started(0, content('started', 0));
      const head = (await store.head(RUN))!;
      for (const edit of [
        { status: 'done' as const },
        { step: 1 },
        { segment: 2 },
        { calls: 0 },
        { flow: 'g' },
        { sealed: '' },
      ]) {
        expect(() => openHead(ring, { ...head, ...edit })).toThrow(
          CheckpointStoreCorrupt,
        );
      }
      // Ownership and times are outside the seal.
      expect(
        openHead(ring, {
          ...head,
          owner: 'x',
          leaseExpiresAt: 1,
          updatedAt: 2,
        }),
      ).toBe(1);
    });

    it('of a writer whose first write is not a checkpoint that knows the count is refused, nothing written', async () => {
      const { store } = await storeWithRun();
      const write = jest.spyOn(store, 'recordCall');
      const stray = writer(store, 1);
      await expect(stray.started(0, content('started', 0))).rejects.toThrow(
        /first write is not a checkpoint/,
      );
      expect(write).not.toHaveBeenCalled();
    });
  });
});
