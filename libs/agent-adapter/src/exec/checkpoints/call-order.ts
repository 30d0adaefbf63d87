/**
 * The order every store appends a run's call records in: by (segment, superstep, seq), each batch
 * in that order and after the last record stored. A record that does not come after it is a
 * duplicate or was sent out of order, and both mean another writer uses the segment. Because the
 * order is checked against the head's last key, a store needs no lookup per record to refuse a
 * duplicate, and may keep records wherever it likes (the SQL store keeps a save's records in its
 * checkpoint row).
 */
import { CheckpointConflict } from '../../errors';
import { Messages } from '../../errors/messages';
import type { CallKey, CallRecord } from './checkpoint-store';

export type { CallKey } from './checkpoint-store';

/** No record stored yet: every record (seq counts from 1) comes after it. */
export const NO_CALL: CallKey = Object.freeze({
  segment: 0,
  superstep: 0,
  seq: 0,
});

/** Negative, zero or positive as `a` comes before, at or after `b`. */
export function compareCallKeys(a: CallKey, b: CallKey): number {
  return a.segment - b.segment || a.superstep - b.superstep || a.seq - b.seq;
}

/**
 * Refuses (CheckpointConflict, before anything is written) a batch whose records are not in order,
 * or whose first record does not come after `last` (the run's last stored record). Returns the
 * batch's last key, what the write leaves as the run's last (`last` for an empty batch).
 */
export function checkCallOrder(
  runId: string,
  records: readonly CallRecord[],
  last: CallKey = NO_CALL,
): CallKey {
  let previous = last;
  for (const record of records) {
    if (compareCallKeys(record, previous) <= 0)
      throw new CheckpointConflict(
        Messages.callOutOfOrder(runId, record, previous),
        runId,
      );
    previous = record;
  }
  // The three numbers alone: a store keeping the key must not keep the caller's record.
  return {
    segment: previous.segment,
    superstep: previous.superstep,
    seq: previous.seq,
  };
}
