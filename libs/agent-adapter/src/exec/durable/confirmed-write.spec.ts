import { CheckpointConflict, CheckpointStoreUnavailable } from '../../errors';
import {
  InterceptingStore,
  type StoreWrite,
} from '../../testing/intercepting-store';
import type { CheckpointStore } from '../checkpoints/checkpoint-store';
import { MemoryCheckpointStore } from '../checkpoints/memory.store';
import { writeConfirmed, type StoreRetry } from './confirmed-write';
import { openHead } from './head-seal';
import { KeyRing } from './key-ring';
import { sealCheckpoint, type Checkpoint } from './records';
import { SegmentWriter } from './segment-writer';
import { bareCheckpoint } from '../../../../../test/utils/segments';

const ring = new KeyRing({ current: 'confirmed-write-spec-secret-0123456789' });
const RUN = 'run-c';

/** Step 0 starts the run; a later step is a claim of `segment`. */
const checkpoint = (step: number, segment = 1): Checkpoint =>
  bareCheckpoint(ring, RUN, step, {
    segment,
    superstep: step,
    reason: step === 0 ? 'start' : 'claim',
  });

const started = (index: number) => ({
  node: 'n',
  index,
  tool: 'charge',
  phase: 'started' as const,
  argsHash: 'h',
  at: 0,
});

/** A dropped connection, as pg reports one. */
const dropped = () =>
  Object.assign(new Error('Connection terminated unexpectedly'), {
    code: 'ECONNRESET',
  });

/**
 * RUN started by w1 (segment 1) in a memory store, and a view of that store whose first write
 * does not land: meanwhile worker w2 claims the run (segment 2), then the connection drops.
 */
async function claimedMeanwhile() {
  const inner = new MemoryCheckpointStore();
  await new SegmentWriter(inner, ring, RUN, 1, 1, { owner: 'w1' }).checkpoint(
    checkpoint(0),
  );
  let first = true;
  const store = new InterceptingStore(inner, {
    before: async () => {
      if (!first) return;
      first = false;
      await new SegmentWriter(inner, ring, RUN, 2, 1, {
        owner: 'w2',
      }).checkpoint(checkpoint(1, 2), { expectCalls: 0 });
      throw dropped();
    },
  });
  return { inner, store };
}

/** Fails the writes `failAt` picks, before they reach the store or after they landed. */
function faulty(
  failAt: (write: StoreWrite, n: number) => 'before' | 'after' | undefined,
) {
  const inner = new MemoryCheckpointStore();
  let n = 0;
  const seen: Array<'before' | 'after' | 'ok'> = [];
  let current: 'before' | 'after' | undefined;
  const store = new InterceptingStore(inner, {
    before: (write) => {
      current = failAt(write, ++n);
      seen.push(current ?? 'ok');
      if (current === 'before') throw dropped();
    },
    after: () => {
      if (current === 'after') throw dropped();
    },
  });
  return { store, inner, seen };
}

/** `writeConfirmed` as a promise: settled by the callback it calls. */
const confirmed = (
  store: CheckpointStore,
  runId: string,
  sealedHead: string,
  write: () => Promise<void>,
  retry?: StoreRetry,
) =>
  new Promise<void>((resolve, reject) =>
    writeConfirmed(store, runId, sealedHead, write, resolve, reject, retry),
  );

describe('writeConfirmed (a write whose outcome a transient store failure left unknown)', () => {
  it('a write that failed before it landed goes again and lands once', async () => {
    const { store, inner, seen } = faulty((w, n) =>
      w.kind === 'recordCall' && n <= 3 ? 'before' : undefined,
    );
    const log = new SegmentWriter(store, ring, RUN, 1, 1, { owner: 'w' });
    await log.checkpoint(checkpoint(0));
    await log.started(0, started(0));
    expect(seen).toEqual(['ok', 'before', 'before', 'ok']);
    expect(await inner.calls(RUN, 0)).toHaveLength(1);
    expect(openHead(ring, (await inner.head(RUN))!)).toBe(1);
    expect(log.failure).toBeUndefined();
  });

  it('a write that landed but lost its reply is recognised as ours by its head seal, not retried into a conflict', async () => {
    const { store, inner, seen } = faulty((w) =>
      w.kind === 'save' && w.checkpoint.step === 1 ? 'after' : undefined,
    );
    const log = new SegmentWriter(store, ring, RUN, 1, 1, { owner: 'w' });
    await log.checkpoint(checkpoint(0));
    await log.started(0, started(0));
    await log.checkpoint(
      { ...checkpoint(1), logBefore: 1 },
      { calls: await log.drain() },
    );
    expect(seen).toEqual(['ok', 'ok', 'after']); // written once
    expect((await inner.latest(RUN))?.step).toBe(1);
    await log.started(1, started(0)); // the segment goes on
    expect((await inner.head(RUN))?.calls).toBe(2);
  });

  it('a write that landed only after its read-back (its statement still running) refuses the resend, and is still recognised as ours', async () => {
    // The connection drops while the first attempt's statement is still running on the server:
    // the read-back finds nothing, the first attempt then commits, and the resend is refused.
    const inner = new MemoryCheckpointStore();
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let firstApplied: Promise<void> | undefined;
    let n = 0;
    const store = new InterceptingStore(inner, {
      before: async (write) => {
        if (write.kind !== 'save') return;
        n++;
        if (n === 1) {
          const { checkpoint: cp, options } = write;
          firstApplied = gate.then(() => inner.save(cp, options));
          throw dropped();
        }
        release();
        await firstApplied;
      },
    });
    const sealed = sealCheckpoint(ring, checkpoint(0));
    await confirmed(
      store,
      RUN,
      'seal-of-this-write',
      () => store.save(sealed, { head: 'seal-of-this-write' }),
      { attempts: 7, firstDelayMs: 1 },
    );
    expect(n).toBe(2);
    expect((await inner.head(RUN))?.sealed).toBe('seal-of-this-write');
    expect((await inner.history(RUN)).checkpoints).toHaveLength(1);

    // Refused for anything else (another writer's head): the conflict stands.
    const other = new InterceptingStore(new MemoryCheckpointStore(), {
      before: async (write) => {
        if (write.kind !== 'save') return;
        if (++n === 3) {
          await other.save(sealed, { head: 'another-writer' });
          throw dropped();
        }
      },
    });
    const err = await confirmed(
      other,
      RUN,
      'seal-of-this-write',
      () => other.save(sealed, { head: 'seal-of-this-write' }),
      { attempts: 7, firstDelayMs: 1 },
    ).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CheckpointConflict);
  });

  it('a store that stays unavailable is CheckpointStoreUnavailable after the attempts (failures) it is given', async () => {
    const inner = new MemoryCheckpointStore();
    let writes = 0;
    const err = await confirmed(
      inner,
      RUN,
      'seal',
      () => {
        writes++;
        return Promise.reject(dropped());
      },
      { attempts: 3, firstDelayMs: 1 },
    ).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CheckpointStoreUnavailable);
    expect((err as CheckpointStoreUnavailable).transient).toBe(true);
    expect((err as Error).message).toMatch(
      /stayed unavailable through 3 attempts .*Connection terminated unexpectedly/,
    );
    expect(writes).toBe(3); // three failed writes, each read back in between
  });

  it('an error that is not transient is not retried', async () => {
    let writes = 0;
    const refused = new CheckpointConflict('refused', RUN);
    await expect(
      confirmed(new MemoryCheckpointStore(), RUN, 'seal', () => {
        writes++;
        return Promise.reject(refused);
      }),
    ).rejects.toBe(refused);
    expect(writes).toBe(1);
  });

  it('a write that did not land while another worker took the run goes again and is refused by the compare-and-set', async () => {
    const { inner, store } = await claimedMeanwhile();
    const sealed = sealCheckpoint(ring, checkpoint(1));
    const err = await confirmed(store, RUN, 'not-the-head', () =>
      store.save(sealed, { head: 'not-the-head' }),
    ).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CheckpointConflict);
    expect((await inner.latest(RUN))?.segment).toBe(2);
  });
  it("a claim that did not land while a racing claimant's identical claim did is not taken for ours (found by the crash fuzzer)", async () => {
    // Two recoverers claim segment 2 from the same head: the same step, segment, count, status.
    const { inner, store } = await claimedMeanwhile();
    const w3 = new SegmentWriter(store, ring, RUN, 2, 1, { owner: 'w3' });
    const err = await w3
      .checkpoint(checkpoint(1, 2), { expectCalls: 0 })
      .catch((e: unknown) => e);
    // Before the fix the head read back carried the same seal: w3 went on driving w2's run.
    expect(err).toBeInstanceOf(CheckpointConflict);
    expect((await inner.head(RUN))?.owner).toBe('w2');
  });
});
