import {
  CheckpointStoreCorrupt,
  FlowRunner,
  type CheckpointStore,
} from '../../index';
import { inspectRun } from '../../cli/inspect';
import { verifyRun } from '../../cli/verify';
import { openCall, sealCall } from '../../exec/durable/records';
import {
  KEY,
  count,
  executorFor,
  ticketsFlow,
  type LedgerEntry,
} from '../fixtures/tickets';
import { assert, equal, instanceOf, matches } from './check';
import { ring, uid, type RawStoreAccess, type SuiteContext } from './context';
import { crashInEmail } from './crash-in-email';

/**
 * Rows edited below the store's compare-and-set (an attacker with database access, a bad restore,
 * a buggy migration): recovery refuses them as CheckpointStoreCorrupt and runs nothing, and the
 * CLI's inspect and verify report them.
 */
export function describeTampering(
  { describe, it, make }: SuiteContext,
  raw: RawStoreAccess,
): void {
  it('a tampered call record, a tampered checkpoint and a missing record are CheckpointStoreCorrupt, and nothing runs', async () => {
    for (const tamper of ['call', 'checkpoint', 'gap'] as const) {
      const store = await make();
      const ledger: LedgerEntry[] = [];
      const id = uid('order');
      await crashInEmail(store, ledger, id);
      const calls = await store.calls(id, 2);
      if (tamper === 'call') {
        const c = calls[0]!;
        await raw.rewriteCall(
          store,
          id,
          c,
          c.sealed.replace('Hamlet', 'Hamlex'),
        );
      } else if (tamper === 'checkpoint') {
        const latest = (await store.latest(id))!;
        await raw.rewriteCheckpoint(
          store,
          id,
          latest.step,
          latest.sealed.replace('"seats":2', '"seats":3'),
        );
      } else {
        // Record 1 gone, a validly signed record 2 in its place: a gap.
        const c = calls[0]!;
        await raw.deleteCall(store, id, c);
        const moved = openCall(ring, c);
        await store.recordCall(id, c.segment, [
          sealCall(ring, { ...moved, seq: 2 }),
        ]);
      }
      const before = ledger.length;
      const w2 = new FlowRunner(executorFor(ledger, 'w2'), {
        checkpoints: store,
        checkpointKey: KEY,
      });
      const err = await w2
        .recover(ticketsFlow(), id, { rerunInDoubt: true })
        .catch((e: unknown) => e);
      instanceOf(err, CheckpointStoreCorrupt);
      assert.match(
        (err as Error).message,
        tamper === 'gap' ? /gap/ : /signature/,
      );
      assert.strictEqual(ledger.length, before);
    }
  });

  describe('a run id used again (records of an earlier incarnation)', () => {
    const input = { show: 'Hamlet', seats: 2 };
    /**
     * Run `id` to the end (the old run), keep its rows, delete it, then start the id again
     * and cut the new run short inside email_tickets (its superstep 2).
     */
    async function reborn(store: CheckpointStore, ledger: LedgerEntry[]) {
      const id = uid('reborn');
      const old = new FlowRunner(executorFor(ledger, 'old'), {
        checkpoints: store,
        checkpointKey: KEY,
      });
      matches(await old.run(ticketsFlow(), input, { runId: id }), {
        status: 'done',
      });
      old.close();
      const oldRows = await store.history(id);
      assert.strictEqual(await store.delete(id), true);
      await crashInEmail(store, ledger, id);
      return { id, oldRows };
    }

    const recoverer = (store: CheckpointStore, ledger: LedgerEntry[]) =>
      new FlowRunner(executorFor(ledger, 'w2'), {
        checkpoints: store,
        checkpointKey: KEY,
      });

    it('call records of the old run copied into the cut superstep (head count raised): CheckpointStoreCorrupt naming the record, no replay; inspect and verify report it', async () => {
      const store = await make();
      const ledger: LedgerEntry[] = [];
      const { id, oldRows } = await reborn(store, ledger);
      const copied = oldRows.calls.filter((c) => c.superstep === 2);
      equal(
        copied.map((c) => openCall(ring, c).phase),
        ['started', 'done'],
      );
      const head = (await store.head(id))!;
      await raw.insertCalls(store, id, copied, head.calls + copied.length);
      const sent = count(ledger, 'email_tickets');

      const w2 = recoverer(store, ledger);
      const err = await w2
        .recover(ticketsFlow(), id, { rerunInDoubt: true })
        .catch((e: unknown) => e);
      w2.close();
      instanceOf(err, CheckpointStoreCorrupt);
      assert.match(
        (err as Error).message,
        new RegExp(
          `call record ${copied[0]!.segment}/1 \\(superstep 2\\) belongs to incarnation \\d+ of this run id, the run is incarnation \\d+`,
        ),
      );
      assert.strictEqual(count(ledger, 'email_tickets'), sent);
      assert.strictEqual((await store.head(id))?.step, head.step);

      const inspection = await inspectRun(store, ring, id);
      assert.strictEqual(inspection.verdict, 'corrupt');
      assert.match(inspection.problems.join('\n'), /belongs to incarnation/);
      const verified = await verifyRun(store, ring, id);
      assert.strictEqual(
        verified?.problems.filter((p) =>
          /belongs to incarnation/.test(p.detail),
        ).length,
        2,
      );
    });

    it("the old run's final checkpoint copied on top: recovery and inspect refuse it (the head's segment), verify names its incarnation even with the head rewritten", async () => {
      for (const headToo of [false, true]) {
        const store = await make();
        const ledger: LedgerEntry[] = [];
        const { id, oldRows } = await reborn(store, ledger);
        const final = oldRows.checkpoints.at(-1)!;
        const head = (await store.head(id))!;
        equal([final.status, final.step], ['done', head.step + 1]);
        await raw.insertCheckpoint(store, id, final, {
          segment: headToo ? final.segment : head.segment,
        });
        const verified = await verifyRun(store, ring, id);
        assert.ok(
          verified?.problems.some(
            (p) =>
              p.where === `checkpoint step ${final.step}` &&
              /checkpoint step \d+ belongs to incarnation \d+ of this run id/.test(
                p.detail,
              ),
          ),
          `verify names the copied checkpoint: ${JSON.stringify(verified?.problems)}`,
        );
        if (headToo) continue; // a head rewritten to match: only the history tells
        const w2 = recoverer(store, ledger);
        const err = await w2
          .recover(ticketsFlow(), id, { rerunInDoubt: true })
          .catch((e: unknown) => e);
        w2.close();
        instanceOf(err, CheckpointStoreCorrupt);
        // The head's segment differs from the checkpoint's (a store whose latest takes its
        // columns from the head finds the seal broken instead).
        assert.match(
          (err as Error).message,
          new RegExp(
            `checkpoint step ${final.step} (is of segment \\d+, the run's head says segment|\\(signature mismatch\\))`,
          ),
        );
        assert.strictEqual(
          (await inspectRun(store, ring, id)).verdict,
          'corrupt',
        );
      }
    });
  });
}
