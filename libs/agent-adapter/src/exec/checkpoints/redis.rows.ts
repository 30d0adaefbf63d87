import type { CheckpointRecord, RunStatus } from './checkpoint-store';

/** Columns kept beside each checkpoint's sealed text (`cols:<step>` in the run hash). */
export type Cols = [flow: string, status: RunStatus, segment: number];

export function toCheckpoint(
  runId: string,
  step: string,
  [flow, status, segment]: Cols,
  sealed = '',
): CheckpointRecord {
  return {
    runId,
    step: Number(step),
    flow,
    status,
    segment: Number(segment),
    sealed,
  };
}

/**
 * A checkpoint read from the run hash: its sealed text and its `cols:<step>` field. A field that is
 * missing or is not `[flow, status, segment]` (edited, truncated) does not stop the read: the row
 * comes back with placeholder columns and `unreadable` saying why, so opening it is
 * `CheckpointStoreCorrupt` for that row alone and the rest of the run's history stays readable.
 */
export function checkpointFromHash(
  runId: string,
  step: string,
  cols: string | undefined,
  sealed: string,
): CheckpointRecord {
  const field = `cols:${step}`;
  let parsed: unknown;
  try {
    parsed = cols === undefined ? undefined : (JSON.parse(cols) as unknown);
  } catch {
    return unreadable(
      runId,
      step,
      sealed,
      `its columns (${field}) are not JSON`,
    );
  }
  if (
    Array.isArray(parsed) &&
    parsed.length === 3 &&
    typeof parsed[0] === 'string' &&
    typeof parsed[1] === 'string' &&
    Number.isInteger(parsed[2])
  ) {
    return toCheckpoint(runId, step, parsed as Cols, sealed);
  }
  return unreadable(
    runId,
    step,
    sealed,
    cols === undefined
      ? `its columns (${field}) are missing`
      : `its columns (${field}) are not [flow, status, segment]`,
  );
}

function unreadable(
  runId: string,
  step: string,
  sealed: string,
  why: string,
): CheckpointRecord {
  // Placeholders: the row's real columns are unknown (see CheckpointRecord.unreadable).
  const record = toCheckpoint(
    runId,
    step,
    ['?', '?' as RunStatus, NaN],
    sealed,
  );
  return { ...record, unreadable: why };
}
