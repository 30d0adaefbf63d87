/** Why the SQL store refuses a write: checked before it, mapped from a driver error, or explained after. */
import { CheckpointConflict, CheckpointStoreCorrupt } from '../../../errors';
import { Messages } from '../../../errors/messages';
import { checkCallOrder, compareCallKeys } from '../call-order';
import type {
  CallRecord,
  CheckpointRecord,
  RunHead,
  SaveOptions,
} from '../checkpoint-store';
import type { Engine } from './sql.engine';
import { HEAD_COLUMNS, toHead, type RunRow } from './sql.rows';

/**
 * Every call of a batch must belong to the run and (for recordCall) the segment it is written for,
 * in order (call-order.ts; the head write checks that the batch comes after the run's last record).
 */
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
  checkCallOrder(runId, calls);
}

/**
 * A unique violation: a checkpoint row or call row the head does not count is stored under the
 * write's key (the head's compare-and-set refuses any write the store itself made twice).
 */
export function duplicateOr(error: unknown, runId: string): unknown {
  const code =
    (error as { code?: string; driverError?: { code?: string } }).driverError
      ?.code ?? (error as { code?: string }).code;
  if (
    code === '23505' ||
    code === 'SQLITE_CONSTRAINT_PRIMARYKEY' ||
    code === 'SQLITE_CONSTRAINT_UNIQUE'
  ) {
    return new CheckpointConflict(Messages.duplicateRow(runId), runId);
  }
  return error;
}

/** A refused write, for the message: a save with its options, or an append to a segment. */
export type RefusedWrite =
  | { save: CheckpointRecord; options: SaveOptions }
  | { segment: number; calls?: readonly CallRecord[] };

/** After a refused write: reads the head and its last record's key, and says why. */
export async function refusedBecause(
  engine: Engine,
  runId: string,
  write: RefusedWrite,
): Promise<CheckpointConflict | CheckpointStoreCorrupt> {
  const [row] = await engine.all<RunRow>(
    `SELECT ${HEAD_COLUMNS} FROM ${engine.tables.runs} WHERE run_id = $1`,
    [runId],
  );
  return whyRefused(runId, row && toHead(row), write);
}

/**
 * Why a write was refused, from the head read after it, with the key of the run's last call record
 * (a message only; the write did nothing), in the order the compare-and-set checks.
 */
export function whyRefused(
  runId: string,
  head: RunHead | undefined,
  w: RefusedWrite,
): CheckpointConflict | CheckpointStoreCorrupt {
  const last = head?.lastCall;
  const outOfOrder = (calls: readonly CallRecord[] | undefined) => {
    const first = calls?.[0];
    if (first && !last && head && head.calls > 0)
      return new CheckpointStoreCorrupt(
        Messages.corruptUnreadable(
          runId,
          "its last call key (the head's last_segment, last_superstep, last_seq)",
          'it is missing (zeros), and the run has call records',
        ),
        runId,
      );
    if (first && last && compareCallKeys(first, last) <= 0)
      return new CheckpointConflict(
        Messages.callOutOfOrder(runId, first, last),
        runId,
      );
  };
  if ('segment' in w)
    return (
      (head?.segment === w.segment &&
        head.status === 'running' &&
        outOfOrder(w.calls)) ||
      new CheckpointConflict(
        Messages.fenced(runId, w.segment, head?.segment),
        runId,
      )
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
      return (
        (segment === head.segment &&
          head.status === 'running' &&
          outOfOrder(options.calls)) ||
        new CheckpointConflict(
          Messages.fenced(runId, segment, head.segment),
          runId,
        )
      );
  }
  return new CheckpointConflict(
    Messages.conflictStep(runId, save.step, head?.step),
    runId,
  );
}
