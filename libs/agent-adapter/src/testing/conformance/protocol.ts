import {
  CheckpointConflict,
  Executor,
  FlowRunner,
  RecoveryNeedsDecision,
} from '../../index';
import { refundsFlow, refundsRegistry } from '../fixtures/refunds';
import {
  KEY,
  count,
  executorFor,
  ticketsFlow,
  type LedgerEntry,
} from '../fixtures/tickets';
import { assert, equal, instanceOf, matches } from './check';
import { uid, type RawStoreAccess, type SuiteContext } from './context';
import { crashInEmail } from './crash-in-email';
import { describeTampering } from './tampering';

/** The durable protocol run on the store: recovery, approvals, racing recoverers, tampering. */
export function describeDurableProtocol(
  { describe, it, make }: SuiteContext,
  raw: RawStoreAccess | undefined,
): void {
  describe('the durable protocol on this store', () => {
    it('crash inside email_tickets: charge_card is not run again, the call in doubt needs a decision, rerunInDoubt finishes', async () => {
      const store = await make();
      const ledger: LedgerEntry[] = [];
      const id = uid('order');
      await crashInEmail(store, ledger, id);
      const w2 = new FlowRunner(executorFor(ledger, 'w2'), {
        checkpoints: store,
        checkpointKey: KEY,
      });
      const err = await w2.recover(ticketsFlow(), id).catch((e: unknown) => e);
      instanceOf(err, RecoveryNeedsDecision);
      equal((err as RecoveryNeedsDecision).calls, [
        ['email_tickets', 'started, no result recorded'],
      ]);
      const r = await w2.recover(ticketsFlow(), id, { rerunInDoubt: true });
      matches(r, {
        status: 'done',
        state: { note: 'sent Hamlet' },
      });
      assert.strictEqual(count(ledger, 'charge_card'), 1);
      assert.strictEqual(count(ledger, 'email_tickets'), 1);
    });

    it('a run paused for an approval is resumed once: the decision is sealed, the call runs once', async () => {
      const store = await make();
      const ran: string[] = [];
      const registry = refundsRegistry(ran);
      const flow = refundsFlow();
      const runner = () =>
        new FlowRunner(new Executor(registry), {
          checkpoints: store,
          checkpointKey: KEY,
        });
      const id = uid('refund');
      matches(await runner().run(flow, { amount: 4 }, { runId: id }), {
        status: 'paused',
      });
      assert.strictEqual((await store.head(id))?.status, 'paused');
      const both = await Promise.allSettled([
        runner().resume(flow, id, { approved: true }),
        runner().resume(flow, id, { approved: true }),
      ]);
      assert.strictEqual(
        both.filter((r) => r.status === 'fulfilled').length,
        1,
      );
      equal(ran, ['quote', 'refund']); // the quote replayed on resume
      assert.strictEqual((await store.head(id))?.status, 'done');
    });

    it('two recoverers at once: one wins, the loser runs nothing', async () => {
      const store = await make();
      const ledger: LedgerEntry[] = [];
      const id = uid('order');
      await crashInEmail(store, ledger, id);
      const results = await Promise.allSettled(
        ['A', 'B'].map((w) =>
          new FlowRunner(executorFor(ledger, w), {
            checkpoints: store,
            checkpointKey: KEY,
          }).recover(ticketsFlow(), id, { rerunInDoubt: true }),
        ),
      );
      assert.strictEqual(
        results.filter((r) => r.status === 'fulfilled').length,
        1,
      );
      const loser = results[0]!.status === 'rejected' ? 'A' : 'B';
      instanceOf(
        (results.find((r) => r.status === 'rejected') as PromiseRejectedResult)
          .reason,
        CheckpointConflict,
      );
      equal(
        ledger.filter((e) => e.worker === loser),
        [],
      );
    });
    if (raw) describeTampering({ describe, it, make }, raw);
  });
}
