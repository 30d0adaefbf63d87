/**
 * The SQL store's queues: an enqueue is one head insert that every unique index guards (the run id,
 * and the dedupe key of an unfinished run); an admission counts and admits in one transaction that
 * no other admission of that queue overlaps (Postgres: the queue's row `FOR UPDATE SKIP LOCKED`, so
 * a worker finding it taken skips the queue this look instead of waiting; SQLite: the write lock).
 */
import { CheckpointConflict } from '../../../errors';
import { Messages } from '../../../errors/messages';
import type {
  AdmitQuery,
  CheckpointRecord,
  Enqueued,
  QueuePlacement,
  RunHead,
} from '../checkpoint-store';
import type { Engine, SqlStep } from './sql.engine';
import { HEAD_COLUMNS, toHead, type RunRow } from './sql.rows';
import {
  ADMITTED_SQL,
  ENDED_SQL,
  UNFINISHED_SQL,
  unfinishedSql,
  WAITING_SQL,
} from './sql.schema';

/** Attempts of an enqueue whose dedupe key's run ended between the insert and the read. */
const ATTEMPTS = 5;

export async function enqueueRun(
  engine: Engine,
  checkpoint: CheckpointRecord,
  placement: QueuePlacement,
  head: string | undefined,
): Promise<Enqueued> {
  const { runId } = checkpoint;
  const n = engine.tables;
  for (let attempt = 1; attempt <= ATTEMPTS; attempt++) {
    if (await engine.enqueue(checkpoint, placement, head, Date.now()))
      return { runId, created: true };
    // Nothing inserted: the run id is stored, or an unfinished run holds the dedupe key.
    const [holder] =
      placement.dedupeKey === undefined
        ? []
        : await engine.all<{ run_id: string }>(
            `SELECT run_id FROM ${n.runs} WHERE queue = $1 AND dedupe_key = $2 AND ${UNFINISHED_SQL}`,
            [placement.queue, placement.dedupeKey],
          );
    if (holder) return { runId: holder.run_id, created: false };
    const [stored] = await engine.all<{ step: number }>(
      `SELECT step FROM ${n.runs} WHERE run_id = $1`,
      [runId],
    );
    if (stored)
      throw new CheckpointConflict(
        Messages.conflictStep(runId, 0, Number(stored.step)),
        runId,
      );
    // The key's holder ended in between: the key is free now.
  }
  throw new CheckpointConflict(
    Messages.conflictStep(runId, 0, undefined),
    runId,
  );
}

/**
 * One admission, as steps an engine runs in its transaction: counts the queue's admitted runs,
 * then admits the next waiting ones that fit (per key: a window over the waiting runs of each key,
 * beside the key's admitted count), and returns their heads.
 */
export function* admission(
  engine: Engine,
  query: AdmitQuery,
): Generator<SqlStep, RunHead[], unknown[]> {
  const n = engine.tables;
  const { queue, now, concurrency, perKey, rate } = query;
  const [counts] = (yield {
    sql: `SELECT
        (SELECT count(*) FROM ${n.runs} WHERE queue = $1 AND ${ADMITTED_SQL} AND ${UNFINISHED_SQL}) AS active,
        (SELECT count(*) FROM ${n.runs} WHERE queue = $1 AND ${ADMITTED_SQL} AND admitted_at > $2) AS recent`,
    params: [queue, rate ? Math.floor(now - rate.intervalMs) : now],
  }) as Array<{ active: number | string; recent: number | string }>;
  const room = Math.min(
    query.limit,
    concurrency === undefined ? Infinity : concurrency - Number(counts?.active),
    rate === undefined ? Infinity : rate.limit - Number(counts?.recent),
  );
  if (room <= 0) return [];
  const waiting = `FROM ${n.runs} w WHERE w.queue = $1 AND w.${WAITING_SQL} AND w.available_at <= $2 AND w.status = 'running'`;
  const order = 'priority, available_at, id';
  // Per key: the key's waiting runs numbered in order, beside how many of the key are admitted.
  const picked =
    perKey === undefined
      ? `SELECT run_id ${waiting} ORDER BY ${order} LIMIT $3`
      : `SELECT run_id FROM (
          SELECT w.run_id, w.queue_key, w.priority, w.available_at, w.id,
            row_number() OVER (PARTITION BY w.queue_key ORDER BY w.priority, w.available_at, w.id) AS place
          ${waiting}) c
        WHERE c.queue_key IS NULL OR c.place + (SELECT count(*) FROM ${n.runs} a
          WHERE a.queue = $1 AND a.queue_key = c.queue_key AND a.${ADMITTED_SQL} AND ${unfinishedSql('a.status')}) <= $4
        ORDER BY ${order} LIMIT $3`;
  const ids = (
    (yield {
      sql: picked,
      params: [
        queue,
        Math.floor(now),
        Number.isFinite(room) ? room : query.limit,
        ...(perKey === undefined ? [] : [perKey]),
      ],
    }) as Array<{ run_id: string }>
  ).map((r) => r.run_id);
  if (ids.length === 0) return [];
  const listed =
    engine.dialect === 'postgres'
      ? 'run_id = ANY($2::varchar[])'
      : 'run_id IN (SELECT value FROM json_each($2))';
  const lease = query.leaseExpiresAt;
  const pg = engine.dialect === 'postgres';
  // With a place taken (a concurrency or per-key limit): never before the latest end of the queue's
  // admitted runs (the port's `admit`), read by this statement, so it sees every end the counts did.
  const at =
    concurrency === undefined && perKey === undefined
      ? '$1'
      : `${pg ? 'GREATEST' : 'max'}($1, coalesce((SELECT max(ended_at) FROM ${n.runs}
          WHERE queue = $5 AND ${ENDED_SQL}), $1))`;
  const rows = (yield {
    sql: `UPDATE ${n.runs} SET available_at = NULL, admitted_at = ${at}, owner = $3, lease_expires_at = $4
      WHERE ${listed} RETURNING ${HEAD_COLUMNS}`,
    params: [
      Math.floor(now),
      pg ? ids : JSON.stringify(ids),
      query.owner ?? null,
      lease === undefined ? null : Math.floor(lease),
      ...(at === '$1' ? [] : [queue]),
    ],
  }) as RunRow[];
  // In admission order (RETURNING keeps none).
  const heads = new Map(rows.map((r) => [r.run_id, toHead(r)]));
  return ids.flatMap((id) => heads.get(id) ?? []);
}
