/**
 * What a save and a fenced append write to a run's head, the same for both engines: the statement
 * texts and their parameters. The engines differ only in how they make the head write atomic with
 * the rows it guards (Postgres: one statement of data-modifying CTEs; SQLite: one immediate
 * transaction) and in how they insert a batch of calls.
 */
import type {
  CallRecord,
  CheckpointRecord,
  SaveOptions,
  StreamRecord,
} from '../checkpoint-store';
import type { SplitCalls } from './sql.call-batches';
import { CHECKPOINT_COLUMNS } from './sql.rows';
import {
  UNFINISHED_SQL,
  unfinishedSql,
  type SqlDialect,
  type SqlNames,
} from './sql.schema';

/**
 * The parameters every statement of a save binds (one array per save, shared by its statements):
 * $1 run id, $2 step, $3 status, $4 segment, $5 owner, $6 lease expiry, $7 now, $8 flow, $9 the
 * batch's call count, $10 the sealed checkpoint, $11 the head seal, $12-$14 the records kept in
 * the checkpoint row and their first and last superstep (`SplitCalls`; NULL for none). Step 0
 * adds $15-$17, the key of the run's last record after the save (segment, superstep, seq; zeros
 * without one). A later step adds $15 the call count a recoverer saw, $16 the batch's segment,
 * $17-$18 its first record's superstep and seq, $19-$20 its last one's (each NULL without). An
 * engine appends its own after these.
 */
export function saveParams(
  cp: CheckpointRecord,
  o: SaveOptions,
  now: number,
  row: Pick<SplitCalls, 'inRow' | 'from' | 'to'>,
): unknown[] {
  const calls = o.calls ?? [];
  // Whole milliseconds: the column is a BIGINT.
  const lease =
    o.leaseExpiresAt === undefined ? null : Math.floor(o.leaseExpiresAt);
  // prettier-ignore
  const params: unknown[] = [
    cp.runId, cp.step, cp.status, cp.segment, o.owner ?? null, lease, now,
    cp.flow, calls.length, cp.sealed, o.head ?? '', row.inRow, row.from, row.to,
  ];
  const first = calls[0];
  const last = calls[calls.length - 1];
  // Postgres refuses parameters a statement does not use: each step binds its own.
  if (cp.step === 0)
    params.push(last?.segment ?? 0, last?.superstep ?? 0, last?.seq ?? 0);
  // prettier-ignore
  else params.push(
    o.expectCalls ?? null, first?.segment ?? null, first?.superstep ?? null, first?.seq ?? null,
    last?.superstep ?? null, last?.seq ?? null,
  );
  return params;
}

/** A checkpoint row that keeps no call records (an enqueue's). */
export const NO_ROW_CALLS: Pick<SplitCalls, 'inRow' | 'from' | 'to'> = {
  inRow: null,
  from: null,
  to: null,
};

/**
 * Whether the run's last record (the head's `last_*`) comes before the key given by the three
 * operands: a write appends only after it (call-order.ts). Comparisons, no row value: both
 * engines evaluate it as it reads. A head that counts records but keeps no last key (zeros:
 * edited below the store) matches nothing, as on Redis: order could not be checked.
 */
export function afterLastSql(
  segment: string,
  superstep: string,
  seq: string,
): string {
  return `(calls = 0 OR last_segment > 0) AND (last_segment < ${segment} OR (last_segment = ${segment} AND (last_superstep < ${superstep}
    OR (last_superstep = ${superstep} AND last_seq < ${seq}))))`;
}

/**
 * The head write of a save, over `saveParams`. Step 0 inserts the head unless the run exists. A
 * later step updates it under the compare-and-set: exactly the next step of an unfinished run,
 * the run's segment or the next one (a claim), the call count a recoverer saw, and fencing and order for
 * the calls saved with it. Postgres is told the type of each parameter that may be NULL.
 */
export function saveHeadSql(
  dialect: SqlDialect,
  n: SqlNames,
  step: number,
): string {
  if (step === 0) {
    return `INSERT INTO ${n.runs} (run_id, flow, step, status, segment, calls, sealed, owner, lease_expires_at, updated_at,
      last_segment, last_superstep, last_seq)
      VALUES ($1, $8, $2, $3, $4, $9, $11, $5, $6, $7, $15, $16, $17) ON CONFLICT (run_id) DO NOTHING`;
  }
  return updateHeadSql(dialect, n);
}

/**
 * The head write of an enqueue: step 0 with its place on the queue, over `saveParams` and then
 * `placementParams`. Inserts nothing when the run id is stored or the dedupe key is held by an
 * unfinished run of the queue (no conflict target: every unique index counts).
 */
export function enqueueHeadSql(n: SqlNames): string {
  return `INSERT INTO ${n.runs} (run_id, flow, step, status, segment, calls, sealed, owner, lease_expires_at, updated_at,
      last_segment, last_superstep, last_seq, queue, queue_key, dedupe_key, priority, available_at)
    VALUES ($1, $8, $2, $3, $4, $9, $11, $5, $6, $7, $15, $16, $17, $18, $19, $20, $21, $22) ON CONFLICT DO NOTHING`;
}

/**
 * A condition on the head row a write found by its run id (`IS TRUE`: the same rows pass), written
 * so that no index can serve it. On a young table Postgres costs a scan of every running run by
 * `runs_status_id` like the run id's own lookup and may pick it, and a connection keeps the plan it
 * made while the table was small: each write would then walk more entries as runs pile up.
 */
export const onFoundRun = (condition: string): string =>
  `(${condition}) IS TRUE`;

/** The found run is running (fenced writes: appends, stream appends, lease renewals). */
export const FOUND_RUNNING = onFoundRun(`status = 'running'`);

function updateHeadSql(dialect: SqlDialect, n: SqlNames): string {
  // Postgres is told the type of a parameter it cannot deduce (NULL, or a CASE's operand).
  const as = (i: number, type: string) =>
    dialect === 'postgres' ? `$${i}::${type}` : `$${i}`;
  const int = (i: number) => as(i, 'int');
  // The end time is written once, by the save that ends the run (see ENDED_SQL).
  return `UPDATE ${n.runs} SET step = $2, status = $3, segment = $4, owner = $5, lease_expires_at = $6,
      updated_at = $7, calls = calls + $9, sealed = $11,
      ended_at = CASE WHEN ${unfinishedSql(as(3, 'varchar'))} THEN NULL ELSE ${as(7, 'bigint')} END,
      ${setLastSql(int(16), int(19), int(20))}
    WHERE run_id = $1 AND step = $2 - 1 AND ${onFoundRun(UNFINISHED_SQL)} AND (segment = $4 OR segment = $4 - 1)
      AND (${int(15)} IS NULL OR calls = ${int(15)})
      AND (${int(16)} IS NULL OR (segment = ${int(16)} AND ${FOUND_RUNNING} AND ${afterLastSql(int(16), int(17), int(18))}))`;
}

/** A save's SET of the head's last record: the batch's last, or the stored one without a batch. */
export function setLastSql(
  segment: string,
  superstep: string,
  seq: string,
): string {
  return `last_segment = COALESCE(${segment}, last_segment), last_superstep = COALESCE(${superstep}, last_superstep),
      last_seq = COALESCE(${seq}, last_seq)`;
}

/**
 * The checkpoint row's columns, in the order both engines fill them from $1, $2, $8, $3, $4, $10,
 * $12, $13, $14 (its call records and their supersteps' range).
 */
export function insertCheckpointSql(n: SqlNames): string {
  return `INSERT INTO ${n.checkpoints} (${CHECKPOINT_COLUMNS}, calls, calls_from, calls_to)`;
}

/**
 * The parameters of a fenced append's head write: $1 run id, $2 segment, $3 the call count, $4 the
 * head seal, $5-$6 the first record's superstep and seq, $7-$8 the last one's.
 */
export function appendParams(
  runId: string,
  segment: number,
  calls: readonly CallRecord[],
  head: string | undefined,
): unknown[] {
  const first = calls[0]!;
  const last = calls[calls.length - 1]!;
  // prettier-ignore
  return [runId, segment, calls.length, head ?? '', first.superstep, first.seq, last.superstep, last.seq];
}

/**
 * Counts the appended calls on the head and keeps their last key, only while `segment` is the
 * running run's own and the batch comes after the run's last record.
 */
export function appendHeadSql(n: SqlNames): string {
  return `UPDATE ${n.runs} SET calls = calls + $3, sealed = $4, last_segment = $2, last_superstep = $7, last_seq = $8
    WHERE run_id = $1 AND segment = $2 AND ${FOUND_RUNNING} AND ${afterLastSql('$2', '$5', '$6')}`;
}

/*
 * Stream appends. The head's `streamed` column counts the run's entries: the append takes its
 * offsets from it under the head's compare-and-set (the run's segment, running): its fencing.
 */

/** An append's parameters: what `streamHeadSql` and `dropOldSql` bind, and the entries. */
export interface StreamParams {
  /** $1 run id, $2 segment, $3 entry count, $4 entries kept, $5 the entries' superstep. */
  head: [string, number, number, number, number];
  entries: readonly Omit<StreamRecord, 'offset'>[];
}

export function streamParams(
  runId: string,
  segment: number,
  entries: readonly Omit<StreamRecord, 'offset'>[],
  keep: number,
): StreamParams {
  const superstep = Math.min(...entries.map((e) => e.superstep));
  return { head: [runId, segment, entries.length, keep, superstep], entries };
}

/** Counts the entries on the head, only while `segment` is the running run's own: the first offset. */
export function streamHeadSql(n: SqlNames, pg: boolean): string {
  const count = pg ? '$3::int' : '$3';
  return `UPDATE ${n.runs} SET streamed = streamed + ${count}
    WHERE run_id = $1 AND segment = $2 AND ${FOUND_RUNNING} RETURNING streamed - ${count} AS first`;
}

/**
 * Drops the entries of earlier supersteps beyond the newest `keep` ($4), given the stream's new
 * length as `length`. Offsets follow supersteps, so what it drops is the stream's oldest.
 */
export function dropOldSql(n: SqlNames, length: string): string {
  return `DELETE FROM ${n.stream} WHERE run_id = $1 AND entry_no < ${length} - $4 AND superstep < $5`;
}
