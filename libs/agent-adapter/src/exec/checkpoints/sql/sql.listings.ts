import { CheckpointStoreCorrupt } from '../../../errors';
import { Messages } from '../../../errors/messages';
import { compareCallKeys } from '../call-order';
import type {
  RunStatus,
  CallRecord,
  CheckpointRecord,
  HistoryPage,
  DueQuery,
  HeadlessPage,
  HeadlessQuery,
  ListQuery,
  ListUnfinishedOptions,
  RunHead,
  RunPage,
} from '../checkpoint-store';
import type { Engine } from './sql.engine';
import { decodeCalls, rowCalls } from './sql.call-batches';
import {
  HEAD_COLUMNS,
  toCall,
  toCheckpoint,
  toHead,
  type CallRow,
  type CheckpointRow,
  type RunRow,
} from './sql.rows';
import { DUE_SQL, LISTED_UNFINISHED_SQL, type SqlNames } from './sql.schema';

/**
 * The SQL store's listings of run heads, one statement each, every one an index range: the flow's
 * unfinished runs by run id (recovery's sweep), due work by due time, the operators' pages
 * newest first, and the runs whose head is missing; and a run's call records and whole history.
 */

/** `CheckpointStore.listUnfinished`: through `runs_unfinished` (flow, run_id). */
export async function unfinishedHeads(
  engine: Engine,
  names: SqlNames,
  flow: string,
  options: ListUnfinishedOptions,
): Promise<RunHead[]> {
  const params: unknown[] = [flow];
  // A run waiting on a queue is not recovery's: only an admission starts it.
  let where = `flow = $1 AND ${LISTED_UNFINISHED_SQL}`;
  if (options.after !== undefined)
    where += ` AND run_id > $${params.push(options.after)}`;
  if (options.leaseExpiredBefore !== undefined) {
    where += ` AND (lease_expires_at IS NULL OR lease_expires_at < $${params.push(options.leaseExpiredBefore)})`;
  }
  const rows = await engine.all<RunRow>(
    `SELECT ${HEAD_COLUMNS} FROM ${names.runs} WHERE ${where} ORDER BY run_id LIMIT $${params.push(options.limit ?? 100)}`,
    params,
  );
  return rows.map(toHead);
}

/**
 * `CheckpointStore.listDue`: through `runs_due` (by due time). A running or sleeping run without a
 * due time is due at once; a paused one without is not in the index.
 */
export async function dueHeads(
  engine: Engine,
  names: SqlNames,
  query: DueQuery,
): Promise<RunHead[]> {
  const params: unknown[] = [Math.floor(query.now)];
  let where = `${DUE_SQL} AND (lease_expires_at IS NULL OR lease_expires_at < $1)`;
  if (query.flows !== undefined) {
    if (query.flows.length === 0) return [];
    const flows = query.flows.map((f) => `$${params.push(f)}`);
    where += ` AND flow IN (${flows.join(', ')})`;
  }
  const rows = await engine.all<RunRow>(
    `SELECT ${HEAD_COLUMNS} FROM ${names.runs} WHERE ${where} ORDER BY lease_expires_at NULLS FIRST, run_id LIMIT $${params.push(query.limit ?? 100)}`,
    params,
  );
  return rows.map(toHead);
}

/** `CheckpointStore.list`: newest first by the row id, with the flow and status filters. */
export async function headPage(
  engine: Engine,
  names: SqlNames,
  query: ListQuery,
): Promise<RunPage> {
  const limit = query.limit ?? 50;
  const params: unknown[] = [];
  const where: string[] = [];
  if (query.flow !== undefined)
    where.push(`flow = $${params.push(query.flow)}`);
  if (query.status !== undefined)
    where.push(`status = $${params.push(query.status)}`);
  if (query.before !== undefined)
    where.push(`id < $${params.push(Number(query.before))}`);
  const rows = await engine.all<RunRow>(
    `SELECT id, ${HEAD_COLUMNS} FROM ${names.runs}${where.length ? ` WHERE ${where.join(' AND ')}` : ''} ORDER BY id DESC LIMIT $${params.push(limit + 1)}`,
    params,
  );
  const page = rows.slice(0, limit);
  const last = page[page.length - 1];
  return {
    runs: page.map(toHead),
    ...(rows.length > limit && last && { next: String(last.id) }),
  };
}

/**
 * `CheckpointStore.listHeadless`: walks the checkpoints' distinct run ids by their key (one index
 * probe each, a loose index scan: not every checkpoint row) and keeps those with no head row.
 */
export async function headlessRuns(
  engine: Engine,
  names: SqlNames,
  query: HeadlessQuery,
): Promise<HeadlessPage> {
  const limit = query.limit ?? 100;
  const next = (from: string) =>
    `SELECT c.run_id FROM ${names.checkpoints} c WHERE c.run_id > ${from} ORDER BY c.run_id LIMIT 1`;
  const rows = await engine.all<{ run_id: string }>(
    `WITH RECURSIVE ids(run_id) AS (
      SELECT (${next('$1')})
      UNION ALL
      SELECT (${next('ids.run_id')}) FROM ids WHERE ids.run_id IS NOT NULL
    )
    SELECT run_id FROM ids WHERE run_id IS NOT NULL
      AND NOT EXISTS (SELECT 1 FROM ${names.runs} r WHERE r.run_id = ids.run_id)
    LIMIT $2`,
    [query.cursor ?? '', limit + 1],
  );
  const runIds = rows.slice(0, limit).map((r) => r.run_id);
  return {
    runIds,
    ...(rows.length > limit && { next: runIds[runIds.length - 1] }),
  };
}

/**
 * One row of a read that takes a run's call records from the calls table and from checkpoint rows
 * in one statement (one snapshot: two statements could see a record saved between them, and
 * report a gap in a healthy run's log). `batch` is set on a checkpoint row's part.
 */
interface LogRow {
  step: number | null;
  flow: string | null;
  status: RunStatus | null;
  superstep: number | null;
  segment: number;
  seq: number | null;
  sealed: string;
  batch: string | null;
}

/** The call records of one superstep, every segment, by (segment, seq): the port's `calls`. */
export async function supersteps(
  engine: Engine,
  n: SqlNames,
  runId: string,
  superstep: number,
): Promise<CallRecord[]> {
  // A record is kept in the row of a step at or after its superstep (sql.call-batches.ts).
  const rows = await engine.all<LogRow>(
    `SELECT NULL AS step, superstep, segment, seq, sealed, NULL AS batch FROM ${n.calls}
       WHERE run_id = $1 AND superstep = $2
     UNION ALL SELECT step, NULL, segment, NULL, sealed, calls FROM ${n.checkpoints}
       WHERE run_id = $1 AND step >= $2 AND calls_from <= $2 AND calls_to >= $2`,
    [runId, superstep],
  );
  const records: CallRecord[] = [];
  for (const row of rows) {
    // The calls table's part has no step; a checkpoint row's always has one (its key).
    if (row.step === null) {
      records.push(toCall({ ...row, run_id: runId } as CallRow));
      continue;
    }
    const decoded = decodeCalls(runId, row.batch ?? '');
    if (!Array.isArray(decoded))
      throw new CheckpointStoreCorrupt(
        Messages.corruptUnreadable(
          runId,
          rowCalls(Number(row.step)),
          decoded.why,
        ),
        runId,
      );
    for (const c of decoded) if (c.superstep === superstep) records.push(c);
  }
  return records.sort(compareCallKeys);
}

/**
 * Every checkpoint and call record of a run (the port's `history`), in one statement. A row whose
 * `calls` text cannot be read comes back `unreadable` (so `runs verify` reports it), the others as
 * they are.
 */
export async function runHistory(
  engine: Engine,
  n: SqlNames,
  runId: string,
): Promise<HistoryPage> {
  const rows = await engine.all<LogRow>(
    `SELECT step, flow, status, NULL AS superstep, segment, NULL AS seq, sealed, calls AS batch
       FROM ${n.checkpoints} WHERE run_id = $1
     UNION ALL SELECT NULL, NULL, NULL, superstep, segment, seq, sealed, NULL FROM ${n.calls}
       WHERE run_id = $1`,
    [runId],
  );
  const checkpoints: CheckpointRecord[] = [];
  const calls: CallRecord[] = [];
  for (const row of rows) {
    if (row.step === null) {
      calls.push(toCall({ ...row, run_id: runId } as CallRow));
      continue;
    }
    const checkpoint = toCheckpoint({ ...row, run_id: runId } as CheckpointRow);
    const decoded = row.batch === null ? [] : decodeCalls(runId, row.batch);
    if (Array.isArray(decoded)) {
      calls.push(...decoded);
      checkpoints.push(checkpoint);
    } else {
      const why = `${rowCalls(checkpoint.step)}: ${decoded.why}`;
      checkpoints.push({ ...checkpoint, unreadable: why });
    }
  }
  checkpoints.sort((a, b) => a.step - b.step);
  return { checkpoints, calls: calls.sort(compareCallKeys) };
}
