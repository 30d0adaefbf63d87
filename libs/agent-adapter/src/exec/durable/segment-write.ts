import { Messages } from '../../errors/messages';
import type {
  CallRecord,
  CheckpointRecord,
  SaveOptions,
} from '../checkpoints/checkpoint-store';
import { leaseEnd } from './lease-end';
import type { Checkpoint } from './records';

/**
 * The pieces of one write of a `SegmentWriter`: the checkpoint waiting for it, the head it leaves,
 * the store options it carries, and the `started` callers it settles. Pure, apart from the clock
 * a lease counts from: the writer's queue decides when each write goes out.
 */

/** Who writes a segment, and what its checkpoints say about ownership. */
export interface SegmentOwner {
  /** Written as the head's owner with every checkpoint. */
  owner: string;
  /** With every checkpoint the lease is set to about this long from the write (`leaseEnd`); none without it. */
  leaseMs?: number;
  /** Instead of `leaseMs`: the lease ends at this time (epoch ms; a schedule's next tick). */
  leaseUntil?: number;
}

/** The run's head as a write leaves it: its latest checkpoint's columns and the call count. */
export type SegmentHead = Pick<CheckpointRecord, 'flow' | 'step' | 'status'> & {
  calls: number;
};

/** A sealed checkpoint waiting for the next write, and its caller's promise. */
export interface PendingCheckpoint {
  record: CheckpointRecord;
  expectCalls: number | undefined;
  acceptLostWrites: boolean;
  waitsUntil: number | null | undefined;
  settle: { resolve: () => void; reject: (error: Error) => void };
}

/** The callers of `started` waiting on one write. */
export interface Waiters {
  promise: Promise<void>;
  resolve: () => void;
  reject: (error: Error) => void;
}

export function waiters(): Waiters {
  let resolve!: () => void;
  let reject!: (error: Error) => void;
  const promise = new Promise<void>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/**
 * The head a write leaves: the checkpoint's columns (or the last one's) and the call count. A
 * segment's count starts from its first checkpoint: a new run's (0) or the one a claim insists
 * on (`expectCalls`, the head's count), and then counts what this segment appends.
 */
export function headAfter(
  runId: string,
  segment: number,
  last: SegmentHead | undefined,
  checkpoint: PendingCheckpoint | undefined,
  records: CallRecord[],
): SegmentHead {
  const base = checkpoint
    ? (checkpoint.expectCalls ??
      (checkpoint.record.step === 0 ? 0 : last?.calls))
    : last?.calls;
  const columns = checkpoint?.record ?? last;
  if (base === undefined || columns === undefined) {
    // A programming error: a segment opens with a checkpoint that knows the run's count.
    throw new Error(Messages.segmentWithoutCount(runId, segment));
  }
  const { flow, step, status } = columns;
  return { flow, step, status, calls: base + records.length };
}

/** The store options of a checkpoint's write. Read when the write is made: the lease counts from then. */
export function saveOptions(
  writer: SegmentOwner,
  checkpoint: PendingCheckpoint,
  records: CallRecord[],
  head: string,
): SaveOptions {
  const { owner, leaseMs, leaseUntil } = writer;
  // Assigned, not spread from conditional objects: this runs on every checkpoint.
  const options: SaveOptions = { head, owner };
  if (records.length) options.calls = records;
  const { expectCalls, waitsUntil } = checkpoint;
  if (expectCalls !== undefined) options.expectCalls = expectCalls;
  if (checkpoint.acceptLostWrites) options.acceptLostWrites = true;
  // A run that waits is due at its time (never, for null); one driven here, at its lease's end.
  const due =
    waitsUntil !== undefined
      ? waitsUntil
      : (leaseUntil ??
        (leaseMs !== undefined ? leaseEnd(Date.now(), leaseMs) : null));
  if (due !== null) options.leaseExpiresAt = due;
  return options;
}

/**
 * When a run that waits falls due, as the store indexes it: a sleeping run at its wake time, a
 * paused one at its approval's deadline, or never (null: it waits for a person). Undefined for a
 * run that does not wait: its due time is the writer's lease.
 */
export function waitsUntil(cp: Checkpoint): number | null | undefined {
  if (cp.status === 'sleeping') return cp.wakeAt ?? null;
  if (cp.status === 'paused') return cp.pending?.deadline ?? null;
  return undefined;
}
