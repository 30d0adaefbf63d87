import { FlowRunner, type CheckpointStore } from '../../index';
import { CrashingStore, SimulatedCrash, settle } from '../crashing-store';
import {
  KEY,
  executorFor,
  ticketsFlow,
  type LedgerEntry,
} from '../fixtures/tickets';
import { rejectsWith } from './check';

/**
 * Runs the tickets flow as `runId` on a worker that dies inside email_tickets (its superstep 2):
 * hold_seats and charge_card are done, email_tickets is in doubt.
 */
export async function crashInEmail(
  store: CheckpointStore,
  ledger: LedgerEntry[],
  runId: string,
): Promise<void> {
  const dying = new CrashingStore(store);
  const w1 = new FlowRunner(
    executorFor(ledger, 'w1', {
      onTool: (t) => (t === 'email_tickets' ? dying.kill() : undefined),
    }),
    { checkpoints: dying, checkpointKey: KEY },
  );
  await rejectsWith(
    w1.run(ticketsFlow(), { show: 'Hamlet', seats: 2 }, { runId }),
    SimulatedCrash,
  );
  await settle();
}
