import type { CheckpointStore, DataSourceLike } from 'agent-adapter';
import type { RawStoreAccess } from 'agent-adapter/testing';

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
    rewriteCall: async (store, runId, k, sealed) => {
      await ds.query(
        `UPDATE ${tables(store).calls} SET sealed = ${p(1)} WHERE run_id = ${p(2)} AND segment = ${p(3)} AND superstep = ${p(4)} AND seq = ${p(5)}`,
        [sealed, runId, k.segment, k.superstep, k.seq],
      );
    },
    deleteCall: async (store, runId, k) => {
      await ds.query(
        `DELETE FROM ${tables(store).calls} WHERE run_id = ${p(1)} AND segment = ${p(2)} AND superstep = ${p(3)} AND seq = ${p(4)}`,
        [runId, k.segment, k.superstep, k.seq],
      );
    },
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
      await ds.query(
        `DELETE FROM ${t.checkpoints} WHERE run_id = ${p(1)} AND step = ${p(2)}`,
        [runId, record.step],
      );
      await ds.query(
        `INSERT INTO ${t.checkpoints} (run_id, step, flow, status, segment, sealed) VALUES (${p(1)}, ${p(2)}, ${p(3)}, ${p(4)}, ${p(5)}, ${p(6)})`,
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
