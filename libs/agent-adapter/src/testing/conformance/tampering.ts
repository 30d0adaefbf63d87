import {
  CheckpointStoreCorrupt,
  FlowRunner,
  type CheckpointStore,
} from '../../index';
import { inspectRun } from '../../cli/inspect';
import { pruneRuns } from '../../cli/operations';
import { verifyRun } from '../../cli/verify';
import { sealHead } from '../../exec/durable/head-seal';
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

/** What recovery says of a run head whose columns no longer match its seal. */
const HEAD_SEAL = /the run head .*does not match its signature/;

/**
 * Recovers `id` on a worker w2 (rerunning calls in doubt), which must refuse it as
 * CheckpointStoreCorrupt: that error's message.
 */
async function corruptOnRecovery(
  store: CheckpointStore,
  ledger: LedgerEntry[],
  id: string,
): Promise<string> {
  const w2 = new FlowRunner(executorFor(ledger, 'w2'), {
    checkpoints: store,
    checkpointKey: KEY,
  });
  const err = await w2
    .recover(ticketsFlow(), id, { rerunInDoubt: true })
    .catch((e: unknown) => e);
  w2.close();
  instanceOf(err, CheckpointStoreCorrupt);
  return (err as Error).message;
}

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
        // Record 1 gone, a validly signed record 2 in its place (by someone with the key, who
        // seals the head too): a gap.
        const c = calls[0]!;
        await raw.deleteCall(store, id, c);
        const moved = openCall(ring, c);
        const head = (await store.head(id))!;
        await store.recordCall(
          id,
          c.segment,
          [sealCall(ring, { ...moved, seq: 2 })],
          sealHead(ring, {
            ...head,
            calls: head.calls + 1,
            incarnation: moved.incarnation,
          }),
        );
      }
      const before = ledger.length;
      assert.match(
        await corruptOnRecovery(store, ledger, id),
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

    it('call records of the old run copied into the cut superstep (head count raised): CheckpointStoreCorrupt (the head), no replay; inspect reports it, verify names each record', async () => {
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

      // The raised count breaks the head's seal first; the records are named by verify below.
      assert.match(await corruptOnRecovery(store, ledger, id), HEAD_SEAL);
      assert.strictEqual(count(ledger, 'email_tickets'), sent);
      assert.strictEqual((await store.head(id))?.step, head.step);

      const inspection = await inspectRun(store, ring, id);
      assert.strictEqual(inspection.verdict, 'corrupt');
      assert.match(
        inspection.problems.join('\n'),
        /the run head .*does not match its signature/,
      );
      const verified = await verifyRun(store, ring, id);
      assert.strictEqual(
        verified?.problems.filter((p) =>
          /belongs to incarnation/.test(p.detail),
        ).length,
        2,
      );
    });

    it("the old run's final checkpoint copied on top: recovery and inspect refuse it (the head), verify names its incarnation even with the head rewritten", async () => {
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
        // The head moved to the copy's step: its seal no longer holds.
        assert.match(await corruptOnRecovery(store, ledger, id), HEAD_SEAL);
        assert.strictEqual(
          (await inspectRun(store, ring, id)).verdict,
          'corrupt',
        );
      }
    });
  });

  describe('the run head (sealed: its status, step, segment, call count and flow)', () => {
    type HeadEdit = {
      name: string;
      edit: (store: CheckpointStore, id: string) => Promise<void>;
      /** What recovery's error says. */
      says: RegExp;
    };
    /** An edit of one sealed head column that recovery must see through the head's seal. */
    const sealed = (name: string, edit: HeadEdit['edit']): HeadEdit => ({
      name,
      edit,
      says: HEAD_SEAL,
    });
    /** Moves a numeric head column by `by` from what the store holds. */
    const shifted =
      (column: 'step' | 'segment' | 'calls', by: number): HeadEdit['edit'] =>
      async (s, id) =>
        raw.editHead(s, id, { [column]: (await s.head(id))![column] + by });
    const edits: HeadEdit[] = [
      sealed(
        'status set to done (hides the run from the unfinished index)',
        (s, id) => raw.editHead(s, id, { status: 'done' }),
      ),
      sealed('status set to failed', (s, id) =>
        raw.editHead(s, id, { status: 'failed' }),
      ),
      sealed('step lowered', shifted('step', -1)),
      sealed('segment raised', shifted('segment', 1)),
      sealed('call count lowered', shifted('calls', -1)),
      {
        name: 'the newest checkpoint row deleted',
        edit: async (s, id) =>
          raw.deleteCheckpoint(s, id, (await s.head(id))!.step),
        says: /the newest stored checkpoint is (step \d+|missing): checkpoint rows were deleted/,
      },
      {
        name: 'the head deleted',
        edit: (s, id) => raw.deleteHead(s, id),
        says: /stored but the run has no head/,
      },
    ];

    for (const { name, edit, says } of edits) {
      it(`${name}: recovery and get are CheckpointStoreCorrupt (never a conflict), nothing runs, verify reports it, prune keeps it`, async () => {
        const store = await make();
        const ledger: LedgerEntry[] = [];
        const id = uid('head');
        await crashInEmail(store, ledger, id);
        await edit(store, id);
        const before = ledger.length;
        const w2 = new FlowRunner(executorFor(ledger, 'w2'), {
          checkpoints: store,
          checkpointKey: KEY,
        });
        for (const read of [
          () => w2.recover(ticketsFlow(), id, { rerunInDoubt: true }),
          () => w2.get(ticketsFlow(), id),
        ]) {
          const err = await read().catch((e: unknown) => e);
          instanceOf(err, CheckpointStoreCorrupt);
          assert.match((err as Error).message, says);
        }
        // The sweep runs nothing of it and reports it, whether the store lists it as unfinished,
        // (its status column edited) as ended, or (its head deleted) as headless.
        const swept = await w2.recoverAll(ticketsFlow(), {
          rerunInDoubt: true,
          force: true,
        });
        w2.close();
        instanceOf(swept.get(id), CheckpointStoreCorrupt);
        assert.match((swept.get(id) as Error).message, says);
        assert.strictEqual(ledger.length, before);

        {
          const verified = await verifyRun(store, ring, id);
          assert.ok(
            verified?.problems.some(
              (p) => p.where === 'head' || /checkpoint/.test(p.where),
            ),
            `verify reports it: ${JSON.stringify(verified?.problems)}`,
          );
          // Inspect says corrupt, or cannot even read a head and latest checkpoint that fit.
          const inspection = await inspectRun(store, ring, id).catch(
            (e: unknown) => e,
          );
          if (inspection instanceof Error)
            instanceOf(inspection, CheckpointStoreCorrupt);
          else
            assert.strictEqual(
              (inspection as { verdict: string }).verdict,
              'corrupt',
            );
        }
        const pruned = await pruneRuns(store, ring, Date.now() + 86_400_000);
        if (/^status set/.test(name)) {
          equal(
            pruned.corrupt.map((r) => r.runId),
            [id],
          );
        }
        assert.ok(
          (await store.history(id)).checkpoints.length > 0,
          'prune deleted nothing of it',
        );
      });
    }

    it('listHeadless: the runs whose head alone was deleted, and only those, paged; a head-only edit is not one', async () => {
      const store = await make();
      const ledger: LedgerEntry[] = [];
      const ids = [uid('hl-a'), uid('hl-b'), uid('hl-c'), uid('hl-d')];
      for (const id of ids) await crashInEmail(store, ledger, id);
      await raw.deleteHead(store, ids[0]!);
      await raw.deleteHead(store, ids[2]!);
      await raw.editHead(store, ids[3]!, { status: 'done' });
      const found: string[] = [];
      let pages = 0;
      for (let cursor: string | undefined; ; pages++) {
        const page = await store.listHeadless({
          limit: 1,
          ...(cursor !== undefined && { cursor }),
        });
        assert.ok(page.runIds.length <= 1, 'a page holds at most its limit');
        found.push(...page.runIds);
        if (page.next === undefined) break;
        cursor = page.next;
      }
      // The store may hold other tests' headless runs: only this test's are compared.
      equal(
        found.filter((id) => ids.includes(id)).sort(),
        [ids[0], ids[2]].sort(),
      );
      assert.strictEqual(new Set(found).size, found.length, 'no run twice');
      assert.ok(pages >= 1);
    });
  });
}
