/** The Redis store's reads turned into the store port's types. */
import { compareCallKeys, type CallKey } from '../call-order';
import type {
  CallRecord,
  CheckpointRecord,
  HistoryPage,
  RunHead,
  RunStatus,
} from '../checkpoint-store';
import {
  CALL_FIELD,
  CHECKPOINT_FIELD,
  COLUMNS_FIELD,
  HEAD_FIELDS,
} from './redis.layout';

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

/**
 * A run's head from the values of `HMGET <run hash> ...HEAD_FIELDS` (in that order); undefined
 * when the run has none.
 */
export function toHead(
  runId: string,
  values: ReadonlyArray<string | null>,
): RunHead | undefined {
  const h: Partial<Record<(typeof HEAD_FIELDS)[number], string>> = {};
  HEAD_FIELDS.forEach((name, k) => {
    const value = values[k];
    if (value != null) h[name] = value;
  });
  if (h.step === undefined) return undefined;
  return {
    runId,
    flow: h.flow ?? '',
    step: Number(h.step),
    status: h.status as RunStatus,
    segment: Number(h.segment),
    updatedAt: Number(h.updatedAt),
    calls: Number(h.calls ?? 0),
    sealed: h.sealed ?? '',
    ...(h.owner !== undefined && { owner: h.owner }),
    ...(h.lease !== undefined && { leaseExpiresAt: Number(h.lease) }),
    // Its name only: the store completes it from the queue's placement (redis.queues.ts).
    ...(h.queue !== undefined && { queue: { name: h.queue, priority: 0 } }),
    ...(h.lastCall !== undefined && { lastCall: toCallKey(h.lastCall) }),
  };
}

/**
 * The head's `lastCall` field ('segment:superstep:seq'); numbers that are not a key (NaN) for an
 * edited one, which `runs verify` then reports against the records (the scripts refuse to append).
 */
function toCallKey(field: string): CallKey {
  const [segment, superstep, seq] = /^\d+:\d+:\d+$/.test(field)
    ? field.split(':').map(Number)
    : [NaN, NaN, NaN];
  return { segment: segment!, superstep: superstep!, seq: seq! };
}

/** Call records from `superstep:segment:seq` → sealed pairs of the run's call fields. */
export function toCalls(
  runId: string,
  fields: Array<[string, string]>,
): CallRecord[] {
  return fields.map(([field, sealed]) => {
    const [superstep = 0, segment = 0, seq = 0] = field.split(':').map(Number);
    return { runId, segment, seq, superstep, sealed };
  });
}

/** A flat `[field, value, field, value, ...]` reply as pairs. */
export function pairs(flat: string[]): Array<[string, string]> {
  const out: Array<[string, string]> = [];
  for (let i = 0; i + 1 < flat.length; i += 2)
    out.push([flat[i]!, flat[i + 1]!]);
  return out;
}

/** A run hash read whole (HGETALL's flat pairs) as its checkpoints and call records, in order. */
export function historyFromHash(runId: string, flat: string[]): HistoryPage {
  const fields = new Map(pairs(flat));
  const checkpoints: CheckpointRecord[] = [];
  const callFields: Array<[string, string]> = [];
  for (const [field, sealed] of fields) {
    if (field.startsWith(CALL_FIELD))
      callFields.push([field.slice(CALL_FIELD.length), sealed]);
    if (!field.startsWith(CHECKPOINT_FIELD)) continue;
    const step = field.slice(CHECKPOINT_FIELD.length);
    const cols = fields.get(COLUMNS_FIELD + step);
    checkpoints.push(checkpointFromHash(runId, step, cols, sealed));
  }
  const calls = toCalls(runId, callFields);
  checkpoints.sort((a, b) => a.step - b.step);
  return { checkpoints, calls: calls.sort(compareCallKeys) };
}
