import type { CheckpointStore, DataSourceLike } from 'agent-adapter';
import type { StoreFixture } from './checkpoint-store.conformance';

/** Raw row access for the conformance suite's tamper tests, on the SQL store's tables. */
export function sqlRaw(
  ds: DataSourceLike,
  tables: (store: CheckpointStore) => { calls: string; checkpoints: string },
  placeholder: (i: number) => string,
): NonNullable<StoreFixture['raw']> {
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
  };
}
