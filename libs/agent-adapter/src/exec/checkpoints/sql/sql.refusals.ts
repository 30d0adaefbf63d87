/** Why the SQL store refuses a write: checked before it, mapped from a driver error, or explained after. */
import { CheckpointConflict } from '../../../errors';
import { Messages } from '../../../errors/messages';
import type {
  CallRecord,
  CheckpointRecord,
  RunHead,
  SaveOptions,
} from '../checkpoint-store';

/** Every call of a batch must belong to the run and (for recordCall) the segment it is written for. */
export function checkBatch(
  runId: string,
  calls: CallRecord[],
  segment = calls[0]?.segment,
): void {
  for (const c of calls) {
    if (c.runId !== runId || c.segment !== segment) {
      throw new CheckpointConflict(
        Messages.fenced(runId, c.segment, segment),
        runId,
      );
    }
  }
}

/** A unique violation on the call log means a (segment, superstep, seq) was written before. */
export function duplicateOr(
  error: unknown,
  runId: string,
  calls: CallRecord[],
): unknown {
  const code =
    (error as { code?: string; driverError?: { code?: string } }).driverError
      ?.code ?? (error as { code?: string }).code;
  if (
    code === '23505' ||
    code === 'SQLITE_CONSTRAINT_PRIMARYKEY' ||
    code === 'SQLITE_CONSTRAINT_UNIQUE'
  ) {
    const c = calls[0];
    return new CheckpointConflict(
      Messages.duplicateCall(
        runId,
        c?.segment ?? 0,
        c?.superstep ?? 0,
        c?.seq ?? 0,
      ),
      runId,
    );
  }
  return error;
}

/** A refused write, for the message: a save with its options, or an append to a segment. */
export type RefusedWrite =
  { save: CheckpointRecord; options: SaveOptions } | { segment: number };

/**
 * After a refused write: says why from the head read after it (a message only; the write did
 * nothing), in the order the compare-and-set checks.
 */
export function whyRefused(
  runId: string,
  head: RunHead | undefined,
  w: RefusedWrite,
): CheckpointConflict {
  if ('segment' in w)
    return new CheckpointConflict(
      Messages.fenced(runId, w.segment, head?.segment),
      runId,
    );
  const { save, options } = w;
  if (head && save.step !== 0 && head.step === save.step - 1) {
    if (head.status === 'done' || head.status === 'failed') {
      return new CheckpointConflict(Messages.ended(runId, head.status), runId);
    }
    if (save.segment !== head.segment && save.segment !== head.segment + 1) {
      return new CheckpointConflict(
        Messages.fenced(runId, save.segment, head.segment),
        runId,
      );
    }
    if (
      options.expectCalls !== undefined &&
      head.calls !== options.expectCalls
    ) {
      return new CheckpointConflict(Messages.logMoved(runId), runId);
    }
    const segment = options.calls?.[0]?.segment;
    if (segment !== undefined)
      return new CheckpointConflict(
        Messages.fenced(runId, segment, head.segment),
        runId,
      );
  }
  return new CheckpointConflict(
    Messages.conflictStep(runId, save.step, head?.step),
    runId,
  );
}
