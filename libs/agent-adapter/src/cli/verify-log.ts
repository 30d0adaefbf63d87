import { CheckpointConflict, CheckpointStoreCorrupt } from '../errors';
import type {
  CheckpointStore,
  HistoryPage,
  RunHead,
} from '../exec/checkpoints/checkpoint-store';
import { assertLogCount } from '../flow/runner/run-reader';
import type { KeyRing } from '../exec/durable/key-ring';
import { openCheckpoint, type Checkpoint } from '../exec/durable/records';

/** One thing wrong with a run's stored rows. */
export interface Problem {
  /** The row or rule: `checkpoint step 3`, `call 2/1/4` (segment/superstep/seq), `head`, ... */
  where: string;
  detail: string;
}

/**
 * Recovery's count check (`assertLogCount`) on the superstep the latest checkpoint opened, read as
 * recovery reads it (`store.calls`, through the store's call index): an index that lost entries of
 * records the run still holds is reported, as recovery would refuse the run. `moved`: the run moved
 * while it was read.
 */
export async function checkCutSuperstep(
  store: CheckpointStore,
  ring: KeyRing,
  head: RunHead,
  history: HistoryPage,
): Promise<Problem | 'moved' | undefined> {
  const record = history.checkpoints.find((c) => c.step === head.step);
  let cp: Checkpoint;
  try {
    if (!record) return undefined; // reported by verifyHistory
    cp = openCheckpoint(ring, record);
  } catch {
    return undefined; // reported by verifyHistory
  }
  const calls = await store.calls(head.runId, cp.superstep);
  try {
    await assertLogCount(store, head, cp.logBefore + calls.length);
    return undefined;
  } catch (error) {
    if (error instanceof CheckpointConflict) return 'moved';
    if (!(error instanceof CheckpointStoreCorrupt)) throw error;
    return {
      where: `call log of superstep ${cp.superstep}`,
      detail: error.message,
    };
  }
}
