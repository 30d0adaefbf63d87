import type { CheckpointStore, DataSourceLike } from 'agent-adapter';
import {
  decodeCalls,
  encodeCalls,
} from 'agent-adapter/exec/checkpoints/sql/sql.call-batches';
import type { RawStoreAccess } from 'agent-adapter/testing';

type CallKey = { segment: number; superstep: number; seq: number };

/**
 * Rewrites the sealed text of one call record below the store (`sealed` undefined: deletes it),
 * wherever the SQL store keeps it: its row in the calls table, or the `calls` text of the
 * checkpoint row it was saved with (a row whose records' superstep range holds it, at any step from
 * the superstep on: sql.call-batches.ts).
 */
export async function editSqlCall(
  ds: Pick<DataSourceLike, 'query'>,
  t: { calls: string; checkpoints: string },
  p: (i: number) => string,
  runId: string,
  k: CallKey,
  sealed: string | undefined,
): Promise<void> {
  const where = (o: number) =>
    `run_id = ${p(o + 1)} AND segment = ${p(o + 2)} AND superstep = ${p(o + 3)} AND seq = ${p(o + 4)}`;
  const key = [runId, k.segment, k.superstep, k.seq];
  if (sealed === undefined)
    await ds.query(`DELETE FROM ${t.calls} WHERE ${where(0)}`, key);
  else
    await ds.query(`UPDATE ${t.calls} SET sealed = ${p(1)} WHERE ${where(1)}`, [
      sealed,
      ...key,
    ]);
  const rows = (await ds.query(
    `SELECT step, calls FROM ${t.checkpoints} WHERE run_id = ${p(1)} AND calls IS NOT NULL AND calls_from <= ${p(2)} AND calls_to >= ${p(3)}`,
    [runId, k.superstep, k.superstep],
  )) as Array<{ step: number; calls: string }>;
  for (const row of rows) {
    const records = decodeCalls(runId, row.calls);
    if (!Array.isArray(records)) continue;
    const kept = records.flatMap((r) =>
      r.segment !== k.segment || r.superstep !== k.superstep || r.seq !== k.seq
        ? [r]
        : sealed === undefined
          ? []
          : [{ ...r, sealed }],
    );
    await ds.query(
      `UPDATE ${t.checkpoints} SET calls = ${p(1)} WHERE run_id = ${p(2)} AND step = ${p(3)}`,
      [encodeCalls(kept), runId, row.step],
    );
  }
}

/** Raw row access for the conformance suite's tamper tests, on the SQL store's tables. */
export function sqlRaw(
  ds: DataSourceLike,
  tables: (store: CheckpointStore) => {
    calls: string;
    checkpoints: string;
    runs: string;
  },
  placeholder: (i: number) => string,
): RawStoreAccess {
  const p = placeholder;
  return {
    rewriteCall: (store, runId, k, sealed) =>
      editSqlCall(ds, tables(store), p, runId, k, sealed),
    deleteCall: (store, runId, k) =>
      editSqlCall(ds, tables(store), p, runId, k, undefined),
    rewriteCheckpoint: async (store, runId, step, sealed) => {
      await ds.query(
        `UPDATE ${tables(store).checkpoints} SET sealed = ${p(1)} WHERE run_id = ${p(2)} AND step = ${p(3)}`,
        [sealed, runId, step],
      );
    },
    insertCalls: async (store, runId, records, headCalls) => {
      const t = tables(store);
      for (const r of records) {
        await ds.query(
          `INSERT INTO ${t.calls} (run_id, superstep, segment, seq, sealed) VALUES (${p(1)}, ${p(2)}, ${p(3)}, ${p(4)}, ${p(5)})`,
          [runId, r.superstep, r.segment, r.seq, r.sealed],
        );
      }
      await ds.query(
        `UPDATE ${t.runs} SET calls = ${p(1)} WHERE run_id = ${p(2)}`,
        [headCalls, runId],
      );
    },
    insertCheckpoint: async (store, runId, record, head) => {
      const t = tables(store);
      // In place of the row at its step, keeping the call records that row keeps.
      await ds.query(
        `INSERT INTO ${t.checkpoints} (run_id, step, flow, status, segment, sealed) VALUES (${p(1)}, ${p(2)}, ${p(3)}, ${p(4)}, ${p(5)}, ${p(6)})
         ON CONFLICT (run_id, step) DO UPDATE SET flow = excluded.flow, status = excluded.status, segment = excluded.segment, sealed = excluded.sealed`,
        [
          runId,
          record.step,
          record.flow,
          record.status,
          record.segment,
          record.sealed,
        ],
      );
      await ds.query(
        `UPDATE ${t.runs} SET step = ${p(1)}, status = ${p(2)}, segment = ${p(3)} WHERE run_id = ${p(4)}`,
        [record.step, record.status, head.segment, runId],
      );
    },
    editHead: async (store, runId, columns) => {
      const entries = Object.entries(columns);
      await ds.query(
        `UPDATE ${tables(store).runs} SET ${entries.map(([column], i) => `${column} = ${p(i + 1)}`).join(', ')} WHERE run_id = ${p(entries.length + 1)}`,
        [...entries.map(([, value]) => value), runId],
      );
    },
    deleteHead: async (store, runId) => {
      await ds.query(
        `DELETE FROM ${tables(store).runs} WHERE run_id = ${p(1)}`,
        [runId],
      );
    },
    deleteCheckpoint: async (store, runId, step) => {
      await ds.query(
        `DELETE FROM ${tables(store).checkpoints} WHERE run_id = ${p(1)} AND step = ${p(2)}`,
        [runId, step],
      );
    },
  };
}
