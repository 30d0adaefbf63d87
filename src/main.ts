/**
 * The example worker on the embedded SQLite store (data/runs.db). On start it recovers every
 * unfinished run of the tickets flow, as a worker must after a crash; then it starts one order.
 *
 *   npm start                                  a new order, start to finish
 *   CRASH_IN=email_tickets npm start           the worker dies inside email_tickets (SIGKILL)
 *   npm start                                  recovery: the mail is in doubt, so it asks you
 *   RERUN_IN_DOUBT=1 npm start                 you checked: the mail may go again; the run ends
 *
 * The NestJS version of this app (DurableModule, @Flow/@Node/@Tool) replaces this file when the
 * Nest module lands; the durable behaviour is the same.
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import {
  Executor,
  FlowRunner,
  RecoveryNeedsDecision,
  SQLiteCheckpointStore,
} from 'agent-adapter';
import { ticketsFlow, ticketsRegistry } from './tickets/tickets.flow';

const DEV_KEY = 'development-only-key-change-me-32b';

async function main(): Promise<void> {
  const dataDir = process.env.DATA_DIR ?? 'data';
  mkdirSync(dataDir, { recursive: true });
  const ledger = join(dataDir, 'ledger.log');
  const key = process.env.CHECKPOINT_KEY ?? DEV_KEY;
  if (key === DEV_KEY)
    console.warn(
      '⚠ CHECKPOINT_KEY is not set: using a development key. Set a secret of 32+ bytes in production.',
    );

  const store = new SQLiteCheckpointStore(join(dataDir, 'runs.db'));
  const runner = new FlowRunner(new Executor(ticketsRegistry(ledger)), {
    checkpoints: store,
    checkpointKey: key,
    leaseMs: 2_000,
  });

  // 1. Recover what a crashed worker left behind. Leases of a dead worker expire after leaseMs.
  await new Promise((r) => setTimeout(r, 2_100));
  const recovered = await runner.recoverAll(ticketsFlow, {
    rerunInDoubt: process.env.RERUN_IN_DOUBT === '1',
  });
  for (const [runId, outcome] of recovered) {
    if (outcome instanceof RecoveryNeedsDecision) {
      console.log(
        `run ${runId}: needs a decision, calls in doubt: ${outcome.calls.map(([t, why]) => `${t} (${why})`).join(', ')}`,
      );
      console.log(
        '  check them at their system, then: RERUN_IN_DOUBT=1 npm start',
      );
    } else if (outcome instanceof Error) {
      console.log(
        `run ${runId}: not recovered: ${outcome.name}: ${outcome.message}`,
      );
    } else {
      console.log(
        `run ${runId}: recovered → ${outcome.status} at step ${outcome.step}: ${outcome.state.note}`,
      );
    }
  }
  if (recovered.size > 0 && process.env.NEW_ORDER !== '1') {
    await store.close();
    return;
  }

  // 2. A new order.
  const order = {
    show: process.env.SHOW ?? 'Hamlet',
    seats: Number(process.env.SEATS ?? 2),
  };
  const result = await runner.run(ticketsFlow, order);
  console.log(
    `run ${result.runId}: ${result.status} at step ${result.step}: ${result.state.note}`,
  );
  console.log(`ledger of what really ran: ${ledger}`);
  await store.close();
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
