/**
 * One conformance suite for every CheckpointStore backend. A backend's e2e spec calls
 * `checkpointStoreConformance(fixture)`; the suite never looks inside a store except through the
 * fixture's optional raw hooks (to tamper with rows like an attacker with database access would).
 */
import {
  CheckpointConflict,
  CheckpointStoreCorrupt,
  Executor,
  Flow,
  FlowRunner,
  ToolRegistry,
  RecoveryNeedsDecision,
  RunLeaseHeld,
  type CallRecord,
  type CheckpointRecord,
  type CheckpointStore,
  type RunStatus,
} from 'agent-adapter';
import { KeyRing } from 'agent-adapter';
import { openCall, sealCall } from 'agent-adapter/exec/durable/records';
import { Messages } from 'agent-adapter/errors/messages';
import { inspectRun } from 'agent-adapter/cli/inspect';
import { verifyRun } from 'agent-adapter/cli/verify';
import { CrashingStore, SimulatedCrash, settle } from '../utils/crashing-store';
import { tamperFuzz } from './tamper.fuzz';
import {
  KEY,
  count,
  executorFor,
  ticketsFlow,
  type LedgerEntry,
} from '../utils/tickets';

export interface StoreFixture {
  name: string;
  /** A fresh, empty store in its own namespace (schema, table prefix, key prefix or file). */
  make(): Promise<CheckpointStore>;
  /** Raw access for tamper tests: rewrite the sealed text of one stored row, or delete a call row. */
  raw?: {
    rewriteCall(
      store: CheckpointStore,
      runId: string,
      key: { segment: number; superstep: number; seq: number },
      sealed: string,
    ): Promise<void>;
    deleteCall(
      store: CheckpointStore,
      runId: string,
      key: { segment: number; superstep: number; seq: number },
    ): Promise<void>;
    rewriteCheckpoint(
      store: CheckpointStore,
      runId: string,
      step: number,
      sealed: string,
    ): Promise<void>;
    /**
     * Copies call records in under their own columns (segment, superstep, seq; index entries
     * too) and sets the head's call count to `headCalls`, hiding the copy from the count check.
     */
    insertCalls(
      store: CheckpointStore,
      runId: string,
      records: CallRecord[],
      headCalls: number,
    ): Promise<void>;
    /**
     * Copies a checkpoint row in under its own columns (replacing the row at its step) and moves
     * the head to it: its step and status, and `head.segment`.
     */
    insertCheckpoint(
      store: CheckpointStore,
      runId: string,
      record: CheckpointRecord,
      head: { segment: number },
    ): Promise<void>;
  };
}

const ring = KeyRing.from(KEY);
let n = 0;
const uid = (p = 'run') => `${p}-${Date.now().toString(36)}-${++n}`;

function cp(
  runId: string,
  step: number,
  over: Partial<CheckpointRecord> = {},
): CheckpointRecord {
  return {
    runId,
    step,
    flow: 'f',
    status: 'running',
    segment: 1,
    sealed: `cp-${runId}-${step}-ünï©ødé`,
    ...over,
  };
}

function call(
  runId: string,
  seq: number,
  over: Partial<CallRecord> = {},
): CallRecord {
  return {
    runId,
    segment: 1,
    seq,
    superstep: 0,
    sealed: `call-${runId}-${seq}`,
    ...over,
  };
}

export function checkpointStoreConformance(fixture: StoreFixture): void {
  describe(`CheckpointStore conformance: ${fixture.name}`, () => {
    const opened: CheckpointStore[] = [];
    const make = async () => {
      const s = await fixture.make();
      opened.push(s);
      return s;
    };
    afterAll(async () => {
      await Promise.all(opened.map((s) => s.close()));
    });

    describe('compare-and-set save', () => {
      it('step 0 creates a run; latest and head return what was saved', async () => {
        const store = await make();
        const id = uid();
        expect(await store.latest(id)).toBeUndefined();
        expect(await store.head(id)).toBeUndefined();
        const big = cp(id, 0, { sealed: 'x'.repeat(200_000) + '€' });
        await store.save(big, { owner: 'w1', leaseExpiresAt: 1_000 });
        expect(await store.latest(id)).toEqual(big);
        expect(await store.head(id)).toMatchObject({
          runId: id,
          flow: 'f',
          step: 0,
          status: 'running',
          segment: 1,
          owner: 'w1',
          leaseExpiresAt: 1_000,
        });
      });

      it('step 0 of an existing run, a repeated step, a skipped step, a step of no run: CheckpointConflict', async () => {
        const store = await make();
        const id = uid();
        await store.save(cp(id, 0));
        await expect(store.save(cp(id, 0))).rejects.toBeInstanceOf(
          CheckpointConflict,
        );
        await expect(store.save(cp(id, 2))).rejects.toBeInstanceOf(
          CheckpointConflict,
        );
        await store.save(cp(id, 1));
        await expect(store.save(cp(id, 1))).rejects.toBeInstanceOf(
          CheckpointConflict,
        );
        await expect(store.save(cp(uid(), 1))).rejects.toBeInstanceOf(
          CheckpointConflict,
        );
        expect((await store.latest(id))?.step).toBe(1);
        expect(
          (await store.history(id)).checkpoints.map((c) => c.step),
        ).toEqual([0, 1]);
      });

      it('concurrent savers of one step: exactly one wins', async () => {
        const store = await make();
        const id = uid();
        await store.save(cp(id, 0));
        const results = await Promise.allSettled(
          Array.from({ length: 12 }, (_, i) =>
            store.save(cp(id, 1, { segment: 2, sealed: `claim-${i}` })),
          ),
        );
        const won = results.filter((r) => r.status === 'fulfilled');
        expect(won).toHaveLength(1);
        for (const r of results)
          if (r.status === 'rejected')
            expect(r.reason).toBeInstanceOf(CheckpointConflict);
        const latest = await store.latest(id);
        expect((await store.head(id))?.segment).toBe(latest?.segment);
      });

      it('concurrent creators of one run id: exactly one wins', async () => {
        const store = await make();
        const id = uid();
        const results = await Promise.allSettled(
          Array.from({ length: 8 }, () => store.save(cp(id, 0))),
        );
        expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
      });

      it('a checkpoint keeps the segment or claims the next one; a stale or foreign segment is refused', async () => {
        const store = await make();
        const id = uid();
        await store.save(cp(id, 0, { segment: 500 }));
        await store.save(cp(id, 1, { segment: 500 }));
        await expect(
          store.save(cp(id, 2, { segment: 1 })),
        ).rejects.toBeInstanceOf(CheckpointConflict);
        await expect(
          store.save(cp(id, 2, { segment: 502 })),
        ).rejects.toBeInstanceOf(CheckpointConflict);
        await store.save(cp(id, 2, { segment: 501 }));
        await expect(
          store.save(cp(id, 3, { segment: 500 })),
        ).rejects.toBeInstanceOf(CheckpointConflict);
        expect((await store.head(id))?.segment).toBe(501);
      });

      it('a run that ended takes no further checkpoint, and every store says it ended (a stale segment too)', async () => {
        const store = await make();
        const id = uid();
        await store.save(cp(id, 0));
        await store.save(cp(id, 1, { status: 'done' }));
        await expect(store.save(cp(id, 2))).rejects.toThrow(
          new CheckpointConflict(Messages.ended(id, 'done'), id),
        );
        // A worker of a segment cut off long ago learns the run's end, not only that it was fenced.
        await expect(store.save(cp(id, 2, { segment: 99 }))).rejects.toThrow(
          Messages.ended(id, 'done'),
        );
      });

      it('calls saved with a checkpoint are written atomically with it, and not at all when it conflicts', async () => {
        const store = await make();
        const id = uid();
        await store.save(cp(id, 0));
        await store.recordCall(id, 1, [call(id, 1)]);
        await store.save(cp(id, 1), { calls: [call(id, 2)] });
        await expect(
          store.save(cp(id, 1), { calls: [call(id, 3)] }),
        ).rejects.toBeInstanceOf(CheckpointConflict);
        expect((await store.calls(id, 0)).map((c) => c.seq)).toEqual([1, 2]);
      });

      it('head.calls counts call records; a save expecting another count conflicts (a claim racing a live worker)', async () => {
        const store = await make();
        const id = uid();
        await store.save(cp(id, 0));
        expect((await store.head(id))?.calls).toBe(0);
        await store.recordCall(id, 1, [call(id, 1), call(id, 2)]);
        await store.save(cp(id, 1), { calls: [call(id, 3)] });
        expect((await store.head(id))?.calls).toBe(3);
        await store.recordCall(id, 1, [call(id, 1, { superstep: 1 })]);
        await expect(
          store.save(cp(id, 2, { segment: 2 }), { expectCalls: 3 }),
        ).rejects.toBeInstanceOf(CheckpointConflict);
        await store.save(cp(id, 2, { segment: 2 }), { expectCalls: 4 });
        expect((await store.head(id))?.segment).toBe(2);
      });
    });

    describe('fenced call log', () => {
      it('appends in order and reads one superstep, every segment, by (segment, seq)', async () => {
        const store = await make();
        const id = uid();
        await store.save(cp(id, 0));
        await store.recordCall(id, 1, [call(id, 1), call(id, 2)]);
        await store.recordCall(id, 1, [call(id, 3)]);
        await store.save(cp(id, 1), { calls: [call(id, 1, { superstep: 1 })] });
        await store.save(cp(id, 2, { segment: 2 }));
        await store.recordCall(id, 2, [call(id, 1, { segment: 2 })]);
        expect(
          (await store.calls(id, 0)).map((c) => [c.segment, c.seq, c.sealed]),
        ).toEqual([
          [1, 1, `call-${id}-1`],
          [1, 2, `call-${id}-2`],
          [1, 3, `call-${id}-3`],
          [2, 1, `call-${id}-1`],
        ]);
        expect(await store.calls(id, 1)).toEqual([
          call(id, 1, { superstep: 1 }),
        ]);
        expect(await store.calls(id, 5)).toEqual([]);
        expect(await store.calls(uid(), 0)).toEqual([]);
      });

      it('a cut-off segment is refused, and nothing of its batch is written', async () => {
        const store = await make();
        const id = uid();
        await store.save(cp(id, 0));
        await store.save(cp(id, 1, { segment: 2 })); // a recoverer claimed
        await expect(
          store.recordCall(id, 1, [call(id, 1)]),
        ).rejects.toBeInstanceOf(CheckpointConflict);
        expect(await store.calls(id, 0)).toEqual([]);
      });

      it('a save carrying calls of a cut-off segment is refused whole', async () => {
        const store = await make();
        const id = uid();
        await store.save(cp(id, 0));
        await store.save(cp(id, 1, { segment: 2 }));
        await expect(
          store.save(cp(id, 2, { segment: 2 }), {
            calls: [call(id, 1, { segment: 1 })],
          }),
        ).rejects.toBeInstanceOf(CheckpointConflict);
        expect((await store.latest(id))?.step).toBe(1);
        expect(await store.calls(id, 0)).toEqual([]);
      });

      it('a duplicate (segment, superstep, seq) is refused and the whole batch is not written', async () => {
        const store = await make();
        const id = uid();
        await store.save(cp(id, 0));
        await store.recordCall(id, 1, [call(id, 1)]);
        await expect(
          store.recordCall(id, 1, [
            call(id, 2),
            call(id, 1, { sealed: 'again' }),
          ]),
        ).rejects.toBeInstanceOf(CheckpointConflict);
        expect((await store.calls(id, 0)).map((c) => c.sealed)).toEqual([
          `call-${id}-1`,
        ]);
      });

      it("a save carries records of its superstep and the next (a callsFirst node's started record)", async () => {
        const store = await make();
        const id = uid();
        await store.save(cp(id, 0));
        await store.recordCall(id, 1, [call(id, 1)]);
        await store.save(cp(id, 1), {
          calls: [call(id, 2), call(id, 1, { superstep: 1 })],
        });
        expect((await store.calls(id, 0)).map((c) => c.seq)).toEqual([1, 2]);
        expect((await store.calls(id, 1)).map((c) => c.seq)).toEqual([1]);
        expect((await store.head(id))?.calls).toBe(3);
      });

      it('batches of thousands of records: written whole, or refused whole for a duplicate at the end', async () => {
        const store = await make();
        const id = uid();
        await store.save(cp(id, 0));
        const batch = (from: number, count: number, superstep = 0) =>
          Array.from({ length: count }, (_, i) =>
            call(id, from + i, { superstep }),
          );
        await store.recordCall(id, 1, batch(1, 2500));
        await store.save(cp(id, 1), { calls: batch(1, 1200, 1) });
        expect(await store.calls(id, 0)).toHaveLength(2500);
        expect((await store.calls(id, 1)).map((c) => c.seq)).toEqual(
          batch(1, 1200).map((c) => c.seq),
        );
        // Its last record is already stored: nothing of the batch is written.
        await expect(
          store.recordCall(id, 1, [
            ...batch(1201, 1500, 1),
            call(id, 1200, { superstep: 1 }),
          ]),
        ).rejects.toBeInstanceOf(CheckpointConflict);
        expect(await store.calls(id, 1)).toHaveLength(1200);
        expect((await store.head(id))?.calls).toBe(3700);
      });

      it('no call is recorded for an unknown, paused or ended run', async () => {
        const store = await make();
        await expect(
          store.recordCall(uid(), 1, [call('x', 1)]),
        ).rejects.toBeInstanceOf(CheckpointConflict);
        for (const status of ['paused', 'done', 'failed'] as RunStatus[]) {
          const id = uid();
          await store.save(cp(id, 0));
          await store.save(cp(id, 1, { status }));
          await expect(
            store.recordCall(id, 1, [call(id, 1)]),
          ).rejects.toBeInstanceOf(CheckpointConflict);
        }
      });
    });

    describe('listing, leases, delete', () => {
      it("listUnfinished: the flow's running and paused runs, by run id, paged", async () => {
        const store = await make();
        const flow = uid('flow');
        const ids = ['a', 'b', 'c', 'd', 'e'].map((x) => `${x}-${uid()}`);
        for (const [i, id] of ids.entries()) {
          await store.save(cp(id, 0, { flow }));
          if (i === 1) await store.save(cp(id, 1, { flow, status: 'paused' }));
          if (i === 2) await store.save(cp(id, 1, { flow, status: 'done' }));
          if (i === 3) await store.save(cp(id, 1, { flow, status: 'failed' }));
        }
        await store.save(cp(uid(), 0, { flow: `${flow}-other` }));
        const all = await store.listUnfinished(flow);
        expect(all.map((h) => h.runId)).toEqual([ids[0], ids[1], ids[4]]);
        expect(all.map((h) => h.status)).toEqual([
          'running',
          'paused',
          'running',
        ]);
        const page1 = await store.listUnfinished(flow, { limit: 2 });
        const page2 = await store.listUnfinished(flow, {
          limit: 2,
          after: page1[1]!.runId,
        });
        expect([...page1, ...page2].map((h) => h.runId)).toEqual(
          all.map((h) => h.runId),
        );
      });

      it('leases: listUnfinished can skip live leases; renewLeases renews the listed runs an owner still holds, at once', async () => {
        const store = await make();
        const flow = uid('flow');
        const [a, b, c, d, e] = [
          uid('a'),
          uid('b'),
          uid('c'),
          uid('d'),
          uid('e'),
        ];
        await store.save(cp(a, 0, { flow }), {
          owner: 'w1',
          leaseExpiresAt: 1_000,
        });
        await store.save(cp(b, 0, { flow }), {
          owner: 'w1',
          leaseExpiresAt: 5_000,
        });
        await store.save(cp(c, 0, { flow }), {
          owner: 'w2',
          leaseExpiresAt: 9_000,
        });
        await store.save(cp(d, 0, { flow }), {
          owner: 'w1',
          leaseExpiresAt: 1_000,
        });
        await store.save(cp(d, 1, { flow, status: 'done' }), {
          owner: 'w1',
          leaseExpiresAt: 1_000,
        });
        // e: w1 holds it but is no longer driving it (not in the list): its lease must run out.
        await store.save(cp(e, 0, { flow }), {
          owner: 'w1',
          leaseExpiresAt: 1_000,
        });
        const expired = async (before: number) =>
          (await store.listUnfinished(flow, { leaseExpiredBefore: before }))
            .map((h) => h.runId)
            .sort();
        expect(await expired(2_000)).toEqual([a, e].sort());
        expect(await expired(10_000)).toEqual([a, b, c, e].sort());
        expect(await store.renewLeases('w1', 20_000, [a, b, c, d])).toBe(2);
        expect(await expired(10_000)).toEqual([c, e].sort());
        expect(await store.renewLeases('w1', 30_000, [])).toBe(0);
        expect((await store.head(d))?.leaseExpiresAt).toBe(1_000);
        expect((await store.head(c))?.owner).toBe('w2');
      });

      it('delete removes a run with its checkpoints and calls; the id can start again', async () => {
        const store = await make();
        const id = uid();
        await store.save(cp(id, 0));
        await store.recordCall(id, 1, [call(id, 1)]);
        expect(await store.delete(id)).toBe(true);
        expect(await store.delete(id)).toBe(false);
        expect(await store.latest(id)).toBeUndefined();
        expect(await store.calls(id, 0)).toEqual([]);
        expect(await store.history(id)).toEqual({ checkpoints: [], calls: [] });
        await store.save(cp(id, 0));
        expect((await store.latest(id))?.step).toBe(0);
      });

      it('list: newest first, filtered by flow and status, paged without gaps or repeats', async () => {
        const store = await make();
        const flow = uid('flow');
        const ids: string[] = [];
        for (let i = 0; i < 7; i++) {
          const id = uid(`l${i}`);
          ids.push(id);
          await store.save(cp(id, 0, { flow }));
          if (i % 3 === 0)
            await store.save(cp(id, 1, { flow, status: 'done' }));
        }
        await store.save(cp(uid(), 0, { flow: `${flow}-x` }));
        const seen: string[] = [];
        let before: string | undefined;
        do {
          const page = await store.list({
            flow,
            limit: 3,
            ...(before !== undefined && { before }),
          });
          expect(page.runs.length).toBeLessThanOrEqual(3);
          seen.push(...page.runs.map((r) => r.runId));
          before = page.next;
        } while (before !== undefined);
        expect(seen).toEqual([...ids].reverse());
        const done = await store.list({ flow, status: 'done' });
        expect(done.runs.map((r) => r.runId)).toEqual([ids[6], ids[3], ids[0]]);
        expect(done.next).toBeUndefined();
      });

      it('history: every checkpoint by step and every call by (segment, superstep, seq)', async () => {
        const store = await make();
        const id = uid();
        await store.save(cp(id, 0));
        await store.recordCall(id, 1, [call(id, 1), call(id, 2)]);
        await store.save(cp(id, 1), { calls: [call(id, 3)] });
        await store.recordCall(id, 1, [call(id, 1, { superstep: 1 })]);
        const h = await store.history(id);
        expect(h.checkpoints.map((c) => c.step)).toEqual([0, 1]);
        expect(h.calls.map((c) => [c.segment, c.superstep, c.seq])).toEqual([
          [1, 0, 1],
          [1, 0, 2],
          [1, 0, 3],
          [1, 1, 1],
        ]);
      });

      it('two runners of one worker id (a flow runner and tool loops in one process) each keep their own runs leased', async () => {
        const store = await make();
        let release!: () => void;
        const gate = new Promise<void>((resolve) => (release = resolve));
        // A superstep far longer than the lease: only renewal keeps the run owned.
        const flow = new Flow<{ n: number }>(uid('slow'))
          .node('wait', async () => {
            await gate;
            return { n: 1 };
          })
          .end('wait');
        const options = {
          checkpoints: store,
          checkpointKey: KEY,
          workerId: 'w1',
          leaseMs: 300,
        };
        const a = new FlowRunner(new Executor(new ToolRegistry()), options);
        const b = new FlowRunner(new Executor(new ToolRegistry()), options);
        const runs = [
          a.run(flow, { n: 0 }, { runId: uid('a') }),
          b.run(flow, { n: 0 }, { runId: uid('b') }),
        ];
        const other = new FlowRunner(new Executor(new ToolRegistry()), {
          ...options,
          workerId: 'w2',
        });
        try {
          for (let look = 0; look < 4; look++) {
            await new Promise((r) => setTimeout(r, 250));
            const seen = await other.recoverAll(flow);
            expect(seen.size).toBe(2);
            for (const outcome of seen.values())
              expect(outcome).toBeInstanceOf(RunLeaseHeld);
          }
        } finally {
          release();
        }
        for (const r of await Promise.all(runs))
          expect(r).toMatchObject({ status: 'done', state: { n: 1 } });
        a.close();
        b.close();
        other.close();
      });

      it("tenants: two stores in their own namespaces never see each other's runs", async () => {
        const one = await make();
        const two = await make();
        const id = uid();
        await one.save(cp(id, 0, { flow: 'shared-flow' }));
        expect(await two.latest(id)).toBeUndefined();
        expect(await two.listUnfinished('shared-flow')).toEqual([]);
        expect(
          (await two.list()).runs.find((r) => r.runId === id),
        ).toBeUndefined();
        await two.save(cp(id, 0, { flow: 'shared-flow', sealed: 'theirs' }));
        expect((await one.latest(id))?.sealed).toBe(cp(id, 0).sealed);
      });
    });

    describe('the durable protocol on this store', () => {
      async function crashInEmail(
        store: CheckpointStore,
        ledger: LedgerEntry[],
        runId: string,
      ) {
        const dying = new CrashingStore(store);
        const w1 = new FlowRunner(
          executorFor(ledger, 'w1', {
            onTool: (t) => (t === 'email_tickets' ? dying.kill() : undefined),
          }),
          { checkpoints: dying, checkpointKey: KEY },
        );
        await expect(
          w1.run(ticketsFlow(), { show: 'Hamlet', seats: 2 }, { runId }),
        ).rejects.toBeInstanceOf(SimulatedCrash);
        await settle();
      }

      it('crash inside email_tickets: charge_card is not run again, the call in doubt needs a decision, rerunInDoubt finishes', async () => {
        const store = await make();
        const ledger: LedgerEntry[] = [];
        const id = uid('order');
        await crashInEmail(store, ledger, id);
        const w2 = new FlowRunner(executorFor(ledger, 'w2'), {
          checkpoints: store,
          checkpointKey: KEY,
        });
        const err = await w2
          .recover(ticketsFlow(), id)
          .catch((e: unknown) => e);
        expect(err).toBeInstanceOf(RecoveryNeedsDecision);
        expect((err as RecoveryNeedsDecision).calls).toEqual([
          ['email_tickets', 'started, no result recorded'],
        ]);
        const r = await w2.recover(ticketsFlow(), id, { rerunInDoubt: true });
        expect(r).toMatchObject({
          status: 'done',
          state: { note: 'sent Hamlet' },
        });
        expect(count(ledger, 'charge_card')).toBe(1);
        expect(count(ledger, 'email_tickets')).toBe(1);
      });

      it('a run paused for an approval is resumed once: the decision is sealed, the call runs once', async () => {
        const store = await make();
        const ran: string[] = [];
        const registry = new ToolRegistry().register(
          'refund',
          (a: { amount: number }) => {
            ran.push('refund');
            return `refunded ${a.amount}`;
          },
          { approval: true },
        );
        const flow = new Flow<{ amount: number; note?: string }>('refunds')
          .node('r', async (s, ctx) => ({
            note: await ctx.call<string>('refund', { amount: s.amount }),
          }))
          .end('r');
        const runner = () =>
          new FlowRunner(new Executor(registry), {
            checkpoints: store,
            checkpointKey: KEY,
          });
        const id = uid('refund');
        expect(
          await runner().run(flow, { amount: 4 }, { runId: id }),
        ).toMatchObject({ status: 'paused' });
        expect((await store.head(id))?.status).toBe('paused');
        const both = await Promise.allSettled([
          runner().resume(flow, id, { approved: true }),
          runner().resume(flow, id, { approved: true }),
        ]);
        expect(both.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
        expect(ran).toEqual(['refund']);
        expect((await store.head(id))?.status).toBe('done');
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
        expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
        const loser = results[0]!.status === 'rejected' ? 'A' : 'B';
        expect(
          (
            results.find(
              (r) => r.status === 'rejected',
            ) as PromiseRejectedResult
          ).reason,
        ).toBeInstanceOf(CheckpointConflict);
        expect(ledger.filter((e) => e.worker === loser)).toEqual([]);
      });

      if (fixture.raw) {
        const raw = fixture.raw;
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
            expect(err).toBeInstanceOf(CheckpointStoreCorrupt);
            expect((err as Error).message).toMatch(
              tamper === 'gap' ? /gap/ : /signature/,
            );
            expect(ledger).toHaveLength(before);
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
            await expect(
              old.run(ticketsFlow(), input, { runId: id }),
            ).resolves.toMatchObject({ status: 'done' });
            old.close();
            const oldRows = await store.history(id);
            expect(await store.delete(id)).toBe(true);
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
            expect(copied.map((c) => openCall(ring, c).phase)).toEqual([
              'started',
              'done',
            ]);
            const head = (await store.head(id))!;
            await raw.insertCalls(
              store,
              id,
              copied,
              head.calls + copied.length,
            );
            const sent = count(ledger, 'email_tickets');

            const w2 = recoverer(store, ledger);
            const err = await w2
              .recover(ticketsFlow(), id, { rerunInDoubt: true })
              .catch((e: unknown) => e);
            w2.close();
            expect(err).toBeInstanceOf(CheckpointStoreCorrupt);
            expect((err as Error).message).toMatch(
              new RegExp(
                `call record ${copied[0]!.segment}/1 \\(superstep 2\\) belongs to incarnation \\d+ of this run id, the run is incarnation \\d+`,
              ),
            );
            expect(count(ledger, 'email_tickets')).toBe(sent);
            expect((await store.head(id))?.step).toBe(head.step);

            const inspection = await inspectRun(store, ring, id);
            expect(inspection.verdict).toBe('corrupt');
            expect(inspection.problems.join('\n')).toMatch(
              /belongs to incarnation/,
            );
            const verified = await verifyRun(store, ring, id);
            expect(
              verified?.problems.filter((p) =>
                /belongs to incarnation/.test(p.detail),
              ),
            ).toHaveLength(2);
          });

          it("the old run's final checkpoint copied on top: recovery and inspect refuse it (the head's segment), verify names its incarnation even with the head rewritten", async () => {
            for (const headToo of [false, true]) {
              const store = await make();
              const ledger: LedgerEntry[] = [];
              const { id, oldRows } = await reborn(store, ledger);
              const final = oldRows.checkpoints.at(-1)!;
              const head = (await store.head(id))!;
              expect([final.status, final.step]).toEqual([
                'done',
                head.step + 1,
              ]);
              await raw.insertCheckpoint(store, id, final, {
                segment: headToo ? final.segment : head.segment,
              });
              const verified = await verifyRun(store, ring, id);
              expect(verified?.problems).toContainEqual({
                where: `checkpoint step ${final.step}`,
                detail: expect.stringMatching(
                  /checkpoint step \d+ belongs to incarnation \d+ of this run id/,
                ) as unknown,
              });
              if (headToo) continue; // a head rewritten to match: only the history tells
              const w2 = recoverer(store, ledger);
              const err = await w2
                .recover(ticketsFlow(), id, { rerunInDoubt: true })
                .catch((e: unknown) => e);
              w2.close();
              expect(err).toBeInstanceOf(CheckpointStoreCorrupt);
              // The head's segment differs from the checkpoint's (a store whose latest takes its
              // columns from the head finds the seal broken instead).
              expect((err as Error).message).toMatch(
                new RegExp(
                  `checkpoint step ${final.step} (is of segment \\d+, the run's head says segment|\\(signature mismatch\\))`,
                ),
              );
              expect((await inspectRun(store, ring, id)).verdict).toBe(
                'corrupt',
              );
            }
          });
        });

        tamperFuzz(make, raw);
      }
    });
  });
}
