/**
 * The spec's "Approvals", "Calls in doubt" and "The tool loop" sections (shared/spec/durable-runs.md),
 * sentence by sentence: each `it` quotes the sentence it proves. The whole suite runs unchanged on
 * the memory store and on Postgres (SQLCheckpointStore, a schema of its own).
 *
 * Two workers are two views of one store; a worker "dies" at a chosen write or inside a tool
 * (CrashingStore, agent-adapter/testing) and can do nothing after that, like a killed process. What really
 * ran is an external ledger (`ran`, in this process). The tool loop talks to a real local
 * chat-completions server (test/utils/chat-server.ts) that counts how often the model was asked.
 * Real SIGKILLed processes prove the same on persistent stores in test/crash/.
 */
import {
  CheckpointConflict,
  CheckpointStoreCorrupt,
  DurableEvents,
  Executor,
  Flow,
  FlowRunner,
  MemoryCheckpointStore,
  OpenAIChatModel,
  RecoveryNeedsDecision,
  SQLCheckpointStore,
  ToolLoop,
  ToolRegistry,
  idempotencyKey,
  recoverToolLoop,
  runToolLoop,
  type ApprovalPort,
  type CheckpointRecord,
  type CheckpointSavedEvent,
  type CheckpointStore,
  type ChatMessage,
  type RecoverOptions,
  type ResumeDecision,
  type RunRecoveredEvent,
  type ToolLoopOptions,
  type ToolLoopRunOptions,
} from 'agent-adapter';
import { DataSource } from 'typeorm';
import {
  ChatServer,
  callTools,
  say,
  toolResults,
  type ReceivedRequest,
} from '../utils/chat-server';
import {
  CrashingStore,
  SimulatedCrash,
  unverifiedBody as bodyOf,
  decodeCall as decode,
  settle,
  type CrashPredicate,
  type CrashWrite as Write,
} from 'agent-adapter/testing';
import { refundsFlow } from 'agent-adapter/testing/fixtures';
import { DATABASE_URL, describeWithService, suiteId } from '../utils/services';

const KEY = 'use-a-secret-from-your-vault-32b';

interface Backend {
  name: string;
  /** A fresh store (one run's world); `view()` is another worker's connection to it. */
  fresh(): Promise<{ store: CheckpointStore; view(): CheckpointStore }>;
}

/** Why the checkpoint a write saves was written ('start', 'superstep', 'pause', 'resume', 'claim'). */
const reasonOf = (w: Write) =>
  w.kind === 'save' ? String(bodyOf(w.checkpoint.sealed).reason) : undefined;

/** Dies `moment` the save of the checkpoint written for `reason`. */
const atSave =
  (reason: string, moment: 'before' | 'after'): CrashPredicate =>
  (w, m) =>
    m === moment && reasonOf(w) === reason;

/** Dies after the checkpoint of `step` reached the store. */
const afterStep =
  (step: number): CrashPredicate =>
  (w, m) =>
    w.kind === 'save' && m === 'after' && w.checkpoint.step === step;

/** Dies once a call record of `phase` reached the store (before the superstep's checkpoint). */
const resultStored =
  (phase: string): CrashPredicate =>
  (w, m) =>
    m === 'after' &&
    w.kind === 'recordCall' &&
    w.calls.some((c) => c.phase === phase);

/** Awaits work on a worker that must die (SimulatedCrash), then lets its last writes land. */
async function dies(work: Promise<unknown>): Promise<void> {
  await expect(work).rejects.toBeInstanceOf(SimulatedCrash);
  await settle();
}

/** Expects a recovery refused with RecoveryNeedsDecision naming exactly these (tool, why) pairs. */
function expectNeedsDecision(err: unknown, calls: unknown[]): void {
  expect(err).toBeInstanceOf(RecoveryNeedsDecision);
  expect((err as RecoveryNeedsDecision).calls).toEqual(calls);
}

/** `[tool, phase]` of every call record of a run, in order. */
async function phases(store: CheckpointStore, runId: string) {
  const { calls } = await store.history(runId);
  return calls.map((c) => {
    const d = decode(c);
    return [d.tool, d.phase];
  });
}

function specSuite(backend: Backend): void {
  /** What really ran: `tool:worker:key` (the first 6 characters of its idempotency key). */
  let ran: string[];
  beforeEach(() => {
    ran = [];
  });

  // ---------------------------------------------------------------------------------------------
  // A refund flow (the shared fixture): `quote` (no approval), then `refund`, which needs approval.
  const refundFlow = refundsFlow;

  function refundWorker(
    name: string,
    store: CheckpointStore,
    options: {
      inRefund?: () => void;
      approvals?: ApprovalPort;
      refundIdempotent?: boolean;
      events?: DurableEvents;
    } = {},
  ) {
    const registry = new ToolRegistry()
      .register('quote', (a: { amount: number }) => {
        ran.push(`quote:${name}:${idempotencyKey().slice(0, 6)}`);
        return `quote ${a.amount}`;
      })
      .register(
        'refund',
        (a: { amount: number }) => {
          options.inRefund?.();
          ran.push(`refund:${name}:${idempotencyKey().slice(0, 6)}`);
          return `refunded ${a.amount}`;
        },
        { approval: true, idempotent: options.refundIdempotent ?? false },
      );
    return new FlowRunner(new Executor(registry), {
      checkpoints: store,
      checkpointKey: KEY,
      ...(options.approvals && { approvals: options.approvals }),
      ...(options.events && { events: options.events }),
    });
  }

  /** Runs a refund to its pause on worker A (who may die at `crashAt`); returns the store. */
  async function pausedRefund(runId: string, crashAt?: CrashPredicate) {
    const { store, view } = await backend.fresh();
    const a = new CrashingStore(store, crashAt);
    const paused = await refundWorker('A', a)
      .run(refundFlow(), { amount: 30 }, { runId })
      .catch((e: unknown) => e);
    return { store, view, a, paused };
  }

  /** The tool runs of `tool`, as `worker:key`. */
  const runsOf = (tool: string) =>
    ran
      .filter((r) => r.startsWith(`${tool}:`))
      .map((r) => r.slice(tool.length + 1));

  /** Worker B resumes the paused `runId` and dies `moment` the save of the resume checkpoint. */
  const resumeDiesOnB = (
    view: () => CheckpointStore,
    runId: string,
    moment: 'before' | 'after',
    decision: ResumeDecision,
  ) =>
    dies(
      refundWorker(
        'B',
        new CrashingStore(view(), atSave('resume', moment)),
      ).resume(refundFlow(), runId, decision),
    );

  describe('Approvals', () => {
    it('"A run that was paused for an approval is not crashed: its checkpoint says paused, and recover gives it back as a paused result."', async () => {
      const { store, view, paused } = await pausedRefund('ap-1');
      expect(paused).toMatchObject({
        status: 'paused',
        step: 1,
        pending: { node: 'decide', tool: 'refund', args: { amount: 30 } },
      });
      expect(bodyOf((await store.latest('ap-1'))!.sealed)).toMatchObject({
        reason: 'pause',
        pending: { tool: 'refund' },
      });
      expect((await store.latest('ap-1'))!.status).toBe('paused');
      expect(await phases(store, 'ap-1')).toEqual([
        ['quote', 'started'],
        ['quote', 'done'],
        ['refund', 'pending'],
      ]);
      const b = refundWorker('B', view());
      await expect(b.recover(refundFlow(), 'ap-1')).resolves.toMatchObject({
        status: 'paused',
        pending: { tool: 'refund' },
      });
      const all = await b.recoverAll(refundFlow(), { force: true });
      expect(all.get('ap-1')).toMatchObject({ status: 'paused' });
      expect((await store.head('ap-1'))!.step).toBe(1); // recovery wrote nothing
      expect(ran.map((r) => r.split(':')[0])).toEqual(['quote']); // the refund never ran
    });

    it('"Resume it as usual." — pause, the worker dies, another worker resumes: the approved call runs once, the finished call replays', async () => {
      const { view, paused } = await pausedRefund(
        'ap-2',
        atSave('pause', 'after'),
      );
      expect(paused).toBeInstanceOf(SimulatedCrash); // died right after saving the pause
      await settle();
      const b = refundWorker('B', view());
      const r = await b.resume(refundFlow(), 'ap-2', {
        approved: true,
        by: 'alice',
      });
      expect(r).toMatchObject({
        status: 'done',
        state: { quote: 'quote 30', note: 'refunded 30' },
      });
      expect(runsOf('quote')).toEqual([expect.stringMatching(/^A:/)]); // replayed, not rerun
      expect(runsOf('refund')).toEqual([expect.stringMatching(/^B:/)]);
    });

    it('"With a store, resume checks that the checkpoint is the run\'s latest one" — a resume that reads an older checkpoint than the head is refused, nothing written', async () => {
      const { store, view } = await pausedRefund('ap-3');
      const stale = (await store.latest('ap-3'))!; // the paused checkpoint
      await refundWorker('A', view()).resume(refundFlow(), 'ap-3', {
        approved: true,
      });
      // Worker B's reads lag (a replica, a cache): it sees the paused checkpoint, the head moved on.
      class Lagging extends CrashingStore {
        override latest(): Promise<CheckpointRecord> {
          return Promise.resolve(stale);
        }
      }
      const head = await store.head('ap-3');
      const err = await refundWorker('B', new Lagging(view()))
        .resume(refundFlow(), 'ap-3', { approved: true })
        .catch((e: unknown) => e);
      // The sealed head is ahead of the checkpoint read: refused as a missing checkpoint (which
      // is what a lagging replica looks like), never resumed from the stale one.
      expect(err).toBeInstanceOf(CheckpointStoreCorrupt);
      expect((err as Error).message).toMatch(/replica that lags behind/);
      expect(await store.head('ap-3')).toEqual(head);
      expect(runsOf('refund')).toHaveLength(1);
    });

    it('"stores the decision with the next checkpoint (one resume wins that step)" — two resumes at once: one wins, the other is CheckpointConflict; the call runs once', async () => {
      const { store, view } = await pausedRefund('ap-4');
      const [x, y] = await Promise.allSettled([
        refundWorker('B', view()).resume(refundFlow(), 'ap-4', {
          approved: true,
          by: 'bob',
        }),
        refundWorker('C', view()).resume(refundFlow(), 'ap-4', {
          approved: true,
          by: 'carol',
        }),
      ]);
      const settled = [x, y];
      const won = settled.filter((s) => s.status === 'fulfilled');
      const lost = settled.filter((s) => s.status === 'rejected');
      expect(won).toHaveLength(1);
      expect(lost).toHaveLength(1);
      expect((lost[0] as PromiseRejectedResult).reason).toBeInstanceOf(
        CheckpointConflict,
      );
      expect(runsOf('refund')).toHaveLength(1);
      // The decision is sealed into the checkpoint after the pause (step 2), before the call ran.
      const { checkpoints } = await store.history('ap-4');
      const resumed = bodyOf(checkpoints.find((c) => c.step === 2)!.sealed);
      expect(resumed).toMatchObject({
        reason: 'resume',
        decisions: [{ tool: 'refund', approved: true }],
      });
      const by = (resumed.decisions as Array<{ by: string }>)[0]!.by;
      expect(runsOf('refund')[0]!.startsWith(by === 'bob' ? 'B:' : 'C:')).toBe(
        true,
      );
    });

    it('"and only then spends it. A crash before that save leaves the run paused and resumable"', async () => {
      const { store, view } = await pausedRefund('ap-5');
      await resumeDiesOnB(view, 'ap-5', 'before', { approved: true });
      expect(runsOf('refund')).toEqual([]); // not spent before the save
      expect((await store.latest('ap-5'))!.status).toBe('paused');
      const r = await refundWorker('C', view()).resume(refundFlow(), 'ap-5', {
        approved: true,
      });
      expect(r.status).toBe('done');
      expect(runsOf('refund')).toEqual([expect.stringMatching(/^C:/)]);
    });

    it('"a crash after it is recovered by spending the stored decision then" — once: a second resume or recover is refused', async () => {
      const { store, view } = await pausedRefund('ap-6');
      await resumeDiesOnB(view, 'ap-6', 'after', {
        approved: true,
        by: 'alice',
      });
      expect(runsOf('refund')).toEqual([]); // died before spending it
      expect((await store.latest('ap-6'))!.status).toBe('running');
      const events = new DurableEvents();
      const recovered: RunRecoveredEvent[] = [];
      events.on('run.recovered', (e) => recovered.push(e));
      const c = refundWorker('C', view(), { events });
      const r = await c.recover(refundFlow(), 'ap-6'); // no decision given: the stored one
      expect(r).toMatchObject({
        status: 'done',
        state: { note: 'refunded 30' },
      });
      expect(runsOf('refund')).toEqual([expect.stringMatching(/^C:/)]);
      expect(recovered).toMatchObject([
        { kind: 'flow', replayed: [{ tool: 'quote' }], rerun: [] },
      ]);
      await expect(
        c.resume(refundFlow(), 'ap-6', { approved: true }),
      ).rejects.toBeInstanceOf(CheckpointConflict);
      await expect(c.recover(refundFlow(), 'ap-6')).rejects.toBeInstanceOf(
        CheckpointConflict,
      );
      expect(runsOf('refund')).toHaveLength(1);
    });

    it('a deny: the node gets ToolDenied, the tool never runs, and a crash after the denial is stored recovers to the same denial', async () => {
      const { store, view } = await pausedRefund('ap-7');
      await resumeDiesOnB(view, 'ap-7', 'after', {
        approved: false,
        by: 'bob',
        reason: 'over the limit',
      });
      const r = await refundWorker('C', view()).recover(refundFlow(), 'ap-7');
      expect(r).toMatchObject({
        status: 'done',
        state: {
          note: 'not refunded: "refund" was denied by bob: over the limit',
        },
      });
      expect(runsOf('refund')).toEqual([]);
      // The denial is the call's sealed outcome.
      const { calls } = await store.history('ap-7');
      const denied = calls
        .map((c) => bodyOf(c.sealed))
        .find((b) => b.tool === 'refund' && b.phase === 'done');
      expect(denied).toMatchObject({
        outcome: { ok: false, error: { name: 'ToolDenied' } },
      });
    });

    it('a crash inside the approved call (after the decision was spent): the call is in doubt like any started call', async () => {
      const { view } = await pausedRefund('ap-8');
      const dying = new CrashingStore(view());
      await dies(
        refundWorker('B', dying, {
          inRefund: () => dying.kill('inside refund'),
        }).resume(refundFlow(), 'ap-8', { approved: true }),
      );
      const err = await refundWorker('C', view())
        .recover(refundFlow(), 'ap-8')
        .catch((e: unknown) => e);
      expectNeedsDecision(err, [['refund', 'started, no result recorded']]);
      const r = await refundWorker('C', view()).recover(refundFlow(), 'ap-8', {
        rerunInDoubt: true,
      });
      expect(r.status).toBe('done');
      expect(runsOf('refund')).toEqual([expect.stringMatching(/^C:/)]);
    });
  });

  // ---------------------------------------------------------------------------------------------
  describe('Calls in doubt', () => {
    /** A flow of one node calling `tool` with {n: 1}; the tool is `fn` on the registry. */
    function oneCall(
      store: CheckpointStore,
      name: string,
      tool: (a: { n: number }) => unknown,
      options: Parameters<ToolRegistry['register']>[2] = {},
    ) {
      const registry = new ToolRegistry().register(
        'act',
        (a: { n: number }) => {
          const v = tool(a);
          ran.push(`act:${name}:${idempotencyKey().slice(0, 6)}`);
          return v;
        },
        options,
      );
      const flow = new Flow<{ n: number; note?: string }>('doubt')
        .node('go', async (s, ctx) => {
          await ctx.call('act', { n: s.n });
          await settle(); // the call's result is flushed on its own, before the checkpoint
          return { note: 'acted' };
        })
        .end('go');
      const runner = new FlowRunner(new Executor(registry), {
        checkpoints: store,
        checkpointKey: KEY,
      });
      return { flow, runner };
    }

    /** Worker A runs the one-call flow as `runId` and dies (inside the tool, or at a write of `store`). */
    async function oneCallDies(
      store: CheckpointStore,
      runId: string,
      tool: (a: { n: number }) => unknown,
      options: Parameters<ToolRegistry['register']>[2] = {},
    ) {
      const w = oneCall(store, 'A', tool, options);
      await dies(w.runner.run(w.flow, { n: 1 }, { runId }));
    }

    it('"A call logged started with no result may or may not have run. Recovery fails closed:" a tool with idempotent=True runs again', async () => {
      const { store, view } = await backend.fresh();
      const a = new CrashingStore(store);
      await oneCallDies(a, 'cd-1', () => a.kill('inside act'), {
        idempotent: true,
      });
      expect(await phases(store, 'cd-1')).toEqual([['act', 'started']]);
      const b = oneCall(view(), 'B', () => 'ok', { idempotent: true });
      const r = await b.runner.recover(b.flow, 'cd-1'); // no decision needed
      expect(r).toMatchObject({ status: 'done', state: { note: 'acted' } });
      expect(runsOf('act')).toEqual([expect.stringMatching(/^B:/)]);
    });

    it('"anything else: RecoveryNeedsDecision, with .calls as (tool, why) pairs" — before anything is written', async () => {
      const { store, view } = await backend.fresh();
      const a = new CrashingStore(store);
      await oneCallDies(a, 'cd-2', () => a.kill('inside act'));
      const head = await store.head('cd-2');
      const b = oneCall(view(), 'B', () => 'ok');
      const err = await b.runner
        .recover(b.flow, 'cd-2')
        .catch((e: unknown) => e);
      expectNeedsDecision(err, [['act', 'started, no result recorded']]);
      expect(await store.head('cd-2')).toEqual(head);
      expect(ran).toEqual([]);
      const all = await b.runner.recoverAll(b.flow, { force: true });
      expect(all.get('cd-2')).toBeInstanceOf(RecoveryNeedsDecision);
    });

    it('"Check those calls at their system (was the mail sent? the card charged?). Then recover with rerun_in_doubt=True" — the rerun gets the same idempotency key', async () => {
      const { store, view } = await backend.fresh();
      const a = new CrashingStore(store);
      let keyA = '';
      await oneCallDies(a, 'cd-3', () => {
        keyA = idempotencyKey();
        a.kill('inside act');
      });
      let keyB = '';
      const b = oneCall(view(), 'B', () => {
        keyB = idempotencyKey();
        return 'ok';
      });
      const r = await b.runner.recover(b.flow, 'cd-3', { rerunInDoubt: true });
      expect(r.status).toBe('done');
      expect(keyB).toBe(keyA);
      expect(runsOf('act')).toHaveLength(1);
    });

    it('"A call whose result could not be stored (an unsealable value) counts as in doubt too."', async () => {
      const { store, view } = await backend.fresh();
      // The call ran and returned a Date (not JSON); the worker dies once that is recorded.
      const a = new CrashingStore(store, resultStored('unrecordable'));
      await oneCallDies(a, 'cd-4', () => new Date(0));
      expect(await phases(store, 'cd-4')).toEqual([
        ['act', 'started'],
        ['act', 'unrecordable'],
      ]);
      const b = oneCall(view(), 'B', () => 'ok');
      const err = await b.runner
        .recover(b.flow, 'cd-4')
        .catch((e: unknown) => e);
      expectNeedsDecision(err, [
        [
          'act',
          expect.stringMatching(/^ran, but its result could not be recorded/),
        ],
      ]);
      expect(runsOf('act')).toEqual([expect.stringMatching(/^A:/)]);
    });

    it('"A crash while a call waits on a synchronous approval port also leaves it in doubt."', async () => {
      const { store, view } = await backend.fresh();
      const a = new CrashingStore(store);
      const asked: string[] = [];
      const dyingPort: ApprovalPort = {
        decide: (req) => {
          asked.push(`A:${req.requestId}`);
          return a.kill('while the port waits');
        },
      };
      await dies(
        refundWorker('A', a, { approvals: dyingPort }).run(
          refundFlow(),
          { amount: 30 },
          { runId: 'cd-5' },
        ),
      );
      expect(await phases(store, 'cd-5')).toEqual([
        ['quote', 'started'],
        ['quote', 'done'],
        ['refund', 'approving'],
      ]);
      const port: ApprovalPort = {
        decide: (req) => {
          asked.push(`B:${req.requestId}`);
          return { approved: true, by: 'cli' };
        },
      };
      const err = await refundWorker('B', view(), { approvals: port })
        .recover(refundFlow(), 'cd-5')
        .catch((e: unknown) => e);
      expectNeedsDecision(err, [
        [
          'refund',
          'was waiting for a synchronous approval, no decision recorded',
        ],
      ]);
      expect(asked).toHaveLength(1); // the port was not asked again before the decision
      const r = await refundWorker('B', view(), { approvals: port }).recover(
        refundFlow(),
        'cd-5',
        { rerunInDoubt: true },
      );
      expect(r).toMatchObject({
        status: 'done',
        state: { note: 'refunded 30' },
      });
      // Asked again, with the same request id; the refund ran once; the quote replayed.
      expect(asked.map((x) => x.slice(2))).toEqual([
        asked[0]!.slice(2),
        asked[0]!.slice(2),
      ]);
      expect(runsOf('refund')).toEqual([expect.stringMatching(/^B:/)]);
      expect(runsOf('quote')).toEqual([expect.stringMatching(/^A:/)]);
    });

    it('a crash while the sync port waits, tool idempotent: it is asked again without a decision', async () => {
      const { store, view } = await backend.fresh();
      const a = new CrashingStore(store);
      await dies(
        refundWorker('A', a, {
          refundIdempotent: true,
          approvals: { decide: () => a.kill('while the port waits') },
        }).run(refundFlow(), { amount: 30 }, { runId: 'cd-6' }),
      );
      const r = await refundWorker('B', view(), {
        refundIdempotent: true,
        approvals: { decide: () => ({ approved: true }) },
      }).recover(refundFlow(), 'cd-6');
      expect(r.status).toBe('done');
      expect(runsOf('refund')).toEqual([expect.stringMatching(/^B:/)]);
    });

    it('retries with their log records: each attempt logged `started`, the final outcome once; after a crash it replays, the tool does not run again', async () => {
      const { store, view } = await backend.fresh();
      let tries = 0;
      // The call succeeds on its third attempt; the worker dies once that is recorded.
      const flaky = new CrashingStore(store, resultStored('done'));
      await oneCallDies(
        flaky,
        'cd-7',
        () => {
          if (++tries < 3) throw new Error(`flaky ${tries}`);
          return 'ok';
        },
        { retry: { attempts: 3, backoff: 0 } },
      );
      const { calls } = await store.history('cd-7');
      expect(
        calls.map((c) => {
          const b = bodyOf(c.sealed);
          return [
            b.phase,
            b.attempt ?? null,
            (b.previous as { message?: string })?.message ?? null,
            b.attempts ?? null,
          ];
        }),
      ).toEqual([
        ['started', null, null, null],
        ['started', 2, 'flaky 1', null],
        ['started', 3, 'flaky 2', null],
        ['done', null, null, 3],
      ]);
      const b = oneCall(view(), 'B', () => {
        throw new Error('must not run again');
      });
      const r = await b.runner.recover(b.flow, 'cd-7');
      expect(r).toMatchObject({ status: 'done', state: { note: 'acted' } });
      expect(runsOf('act')).toEqual([expect.stringMatching(/^A:/)]);
    });
  });

  // ---------------------------------------------------------------------------------------------
  describe('The tool loop', () => {
    let server: ChatServer;
    let model: OpenAIChatModel;
    beforeEach(async () => {
      server = await ChatServer.start();
      model = new OpenAIChatModel({
        baseUrl: server.baseUrl,
        model: 'test-model',
        maxRetries: 0,
      });
    });
    afterEach(() => server.close());

    const HELLO: ChatMessage[] = [
      { role: 'user', content: 'Two seats for Hamlet.' },
    ];
    const summarize = (request: ReceivedRequest) =>
      say(`results: ${JSON.stringify(toolResults(request))}`);
    /** The model asks for hold_seats (idempotent) and charge_card (not), then sums up. */
    const scriptTwoTools = () =>
      server.script(
        callTools([
          { name: 'hold_seats', arguments: { seats: 2 }, id: 'h' },
          { name: 'charge_card', arguments: { amount: 90 }, id: 'c' },
        ]),
        summarize,
      );

    function tickets(
      name: string,
      hooks: {
        inHold?: () => void | Promise<void>;
        inCharge?: () => void | Promise<void>;
      } = {},
    ) {
      return new ToolRegistry()
        .register(
          'hold_seats',
          async (a: { seats: number }) => {
            await hooks.inHold?.();
            ran.push(`hold_seats:${name}:${idempotencyKey().slice(0, 6)}`);
            return `held ${a.seats}`;
          },
          { idempotent: true },
        )
        .register('charge_card', async (a: { amount: number }) => {
          await hooks.inCharge?.();
          ran.push(`charge_card:${name}:${idempotencyKey().slice(0, 6)}`);
          return `charged ${a.amount}`;
        })
        .register(
          'refund',
          (a: { amount: number }) => {
            ran.push(`refund:${name}:${idempotencyKey().slice(0, 6)}`);
            return `refunded ${a.amount}`;
          },
          { approval: true },
        );
    }

    /** Worker A runs the loop on HELLO and dies where its store or one of its tools makes it. */
    const loopDies = (
      registry: ToolRegistry,
      options: ToolLoopOptions & ToolLoopRunOptions,
    ) =>
      dies(
        runToolLoop(model, registry, HELLO, { checkpointKey: KEY, ...options }),
      );

    /** Worker A runs scriptTwoTools' loop as `runId` and dies once the checkpoint of `step` is saved. */
    const twoToolsDieAfterStep = (
      store: CheckpointStore,
      runId: string,
      step: number,
    ) => {
      scriptTwoTools();
      return loopDies(tickets('A'), {
        runId,
        checkpoints: new CrashingStore(store, afterStep(step)),
      });
    };

    /** A worker recovers the loop `runId`. */
    const recoverLoop = (
      registry: ToolRegistry,
      runId: string,
      options: ToolLoopOptions & RecoverOptions,
    ) =>
      recoverToolLoop(model, registry, runId, {
        checkpointKey: KEY,
        ...options,
      });

    /** Worker A's tools for scriptTwoTools: hold_seats dies (on `a`) once charge_card's result is stored. */
    function holdDiesAfterCharge(a: CrashingStore) {
      let charged!: () => void;
      const chargeDone = new Promise<void>((r) => (charged = r));
      return tickets('A', {
        inHold: async () => {
          await chargeDone;
          await settle();
          a.kill('inside hold_seats');
        },
        inCharge: () => {
          setImmediate(charged);
        },
      });
    }

    it('"The history is saved after each model reply (so its tool calls are pinned)" — a crash after the reply: recovery runs its tool calls without asking the model again', async () => {
      const { view, store } = await backend.fresh();
      await twoToolsDieAfterStep(store, 'tl-1', 1); // step 1: the model's reply
      expect(server.requests).toHaveLength(1);
      expect(ran).toEqual([]);
      const r = await recoverLoop(tickets('B'), 'tl-1', {
        checkpoints: view(),
      });
      expect(r).toMatchObject({ status: 'done', modelCalls: 2 });
      expect(server.requests).toHaveLength(2); // one more: the answer to the results, not the reply again
      expect(toolResults(server.requests[1]!)).toEqual({
        h: 'held 2',
        c: 'charged 90',
      });
      expect(runsOf('hold_seats')).toEqual([expect.stringMatching(/^B:/)]);
      expect(runsOf('charge_card')).toEqual([expect.stringMatching(/^B:/)]);
    });

    it('"and after the tool results." — a crash after the results are saved: no tool runs again, the model is asked once for its answer', async () => {
      const { view, store } = await backend.fresh();
      await twoToolsDieAfterStep(store, 'tl-2', 2); // step 2: the tool results
      expect(server.requests).toHaveLength(1);
      const saved = bodyOf((await store.latest('tl-2'))!.sealed).state as {
        messages: ChatMessage[];
      };
      expect(saved.messages.map((m) => m.role)).toEqual([
        'user',
        'assistant',
        'tool',
        'tool',
      ]);
      const r = await recoverLoop(tickets('B'), 'tl-2', {
        checkpoints: view(),
      });
      expect(r).toMatchObject({ status: 'done', modelCalls: 2 });
      expect(r.reply?.content).toBe('results: {"h":"held 2","c":"charged 90"}');
      expect(server.requests).toHaveLength(2);
      expect(ran.every((x) => x.includes(':A:'))).toBe(true); // nothing ran on B
      expect(ran).toHaveLength(2);
    });

    it('a crash inside a tool the model called: finished tools replay, the idempotent one in doubt runs again, the model is not asked again for its reply', async () => {
      const { view, store } = await backend.fresh();
      scriptTwoTools();
      const a = new CrashingStore(store);
      await loopDies(holdDiesAfterCharge(a), { runId: 'tl-3', checkpoints: a });
      expect(await phases(store, 'tl-3')).toEqual(
        expect.arrayContaining([
          ['charge_card', 'done'],
          ['hold_seats', 'started'],
        ]),
      );
      const r = await recoverLoop(tickets('B'), 'tl-3', {
        checkpoints: view(),
      });
      expect(r.status).toBe('done');
      expect(server.requests).toHaveLength(2);
      expect(runsOf('charge_card')).toEqual([expect.stringMatching(/^A:/)]); // replayed
      expect(runsOf('hold_seats')).toEqual([expect.stringMatching(/^B:/)]); // in doubt, idempotent
    });

    it('a crash inside a non-idempotent tool the model called: RecoveryNeedsDecision, nothing asked or run; rerunInDoubt finishes with the same key', async () => {
      const { view, store } = await backend.fresh();
      scriptTwoTools();
      const a = new CrashingStore(store);
      let keyA = '';
      await loopDies(
        tickets('A', {
          inCharge: () => {
            keyA = idempotencyKey();
            a.kill('inside charge_card');
          },
        }),
        { runId: 'tl-4', checkpoints: a },
      );
      const head = await store.head('tl-4');
      const err = await recoverLoop(tickets('B'), 'tl-4', {
        checkpoints: view(),
      }).catch((e: unknown) => e);
      expectNeedsDecision(err, [
        ['charge_card', 'started, no result recorded'],
      ]);
      expect(await store.head('tl-4')).toEqual(head);
      expect(server.requests).toHaveLength(1);
      let keyB = '';
      const r = await recoverLoop(
        tickets('B', { inCharge: () => void (keyB = idempotencyKey()) }),
        'tl-4',
        { checkpoints: view(), rerunInDoubt: true },
      );
      expect(r.status).toBe('done');
      expect(keyB).toBe(keyA);
      expect(runsOf('charge_card')).toEqual([expect.stringMatching(/^B:/)]);
      expect(server.requests).toHaveLength(2);
    });

    it('"max_steps counts the model calls of the whole run." — across a recovery', async () => {
      const { view, store } = await backend.fresh();
      const again = () =>
        callTools([{ name: 'hold_seats', arguments: { seats: 1 }, id: 'h' }]);
      server.script(again(), again(), again());
      await loopDies(tickets('A'), {
        runId: 'tl-5',
        maxSteps: 2,
        checkpoints: new CrashingStore(store, afterStep(3)), // after the 2nd reply
      });
      expect(server.requests).toHaveLength(2);
      // maxSteps is fixed when the run starts: the recoverer cannot raise it.
      const r = await recoverLoop(tickets('B'), 'tl-5', {
        checkpoints: view(),
      });
      expect(server.requests).toHaveLength(2);
      expect(r).toMatchObject({
        status: 'failed',
        modelCalls: 2,
        maxSteps: 2,
        error: { name: 'MaxStepsExceeded' },
      });
      expect(runsOf('hold_seats')).toEqual([
        expect.stringMatching(/^A:/),
        expect.stringMatching(/^B:/),
      ]);
    });

    it('"A loop paused for an approval resumes through run_tool_loop with the same run_id." — on another worker, after the first one died', async () => {
      const { view, store } = await backend.fresh();
      server.script(
        callTools([
          { name: 'hold_seats', arguments: { seats: 2 }, id: 'h' },
          { name: 'refund', arguments: { amount: 40 }, id: 'rf' },
        ]),
        summarize,
      );
      await loopDies(tickets('A'), {
        runId: 'tl-6',
        checkpoints: new CrashingStore(store, atSave('pause', 'after')),
      });
      const options = {
        checkpoints: view(),
        checkpointKey: KEY,
        runId: 'tl-6',
      };
      // recover gives a paused loop back as it is.
      await expect(
        recoverToolLoop(model, tickets('B'), 'tl-6', options),
      ).resolves.toMatchObject({
        status: 'paused',
        pending: { tool: 'refund', toolCallId: 'rf' },
      });
      const r = await runToolLoop(model, tickets('B'), HELLO, {
        ...options,
        decision: { approved: true, by: 'alice' },
      });
      expect(r.status).toBe('done');
      expect(toolResults(server.requests[1]!)).toEqual({
        h: 'held 2',
        rf: 'refunded 40',
      });
      expect(runsOf('hold_seats')).toEqual([expect.stringMatching(/^A:/)]);
      expect(runsOf('refund')).toEqual([expect.stringMatching(/^B:/)]);
      expect(server.requests).toHaveLength(2);
    });

    it('a loop whose synchronous approval port was waiting at the crash: the call is in doubt; rerunInDoubt asks again and finishes', async () => {
      const { view, store } = await backend.fresh();
      server.script(
        callTools([{ name: 'refund', arguments: { amount: 40 }, id: 'rf' }]),
        summarize,
      );
      const a = new CrashingStore(store);
      await dies(
        new ToolLoop(model, tickets('A'), {
          checkpoints: a,
          checkpointKey: KEY,
          approvals: { decide: () => a.kill('while the port waits') },
        }).run(HELLO, { runId: 'tl-7' }),
      );
      const loop = new ToolLoop(model, tickets('B'), {
        checkpoints: view(),
        checkpointKey: KEY,
        approvals: { decide: () => ({ approved: true, by: 'cli' }) },
      });
      const err = await loop.recover('tl-7').catch((e: unknown) => e);
      expectNeedsDecision(err, [
        [
          'refund',
          'was waiting for a synchronous approval, no decision recorded',
        ],
      ]);
      const r = await loop.recover('tl-7', { rerunInDoubt: true });
      expect(r.status).toBe('done');
      expect(runsOf('refund')).toEqual([expect.stringMatching(/^B:/)]);
      expect(server.requests).toHaveLength(2);
      loop.close();
    });

    it('events: checkpoint.saved says kind "loop" and the stage; run.recovered says kind "loop" with what replayed', async () => {
      const { view, store } = await backend.fresh();
      scriptTwoTools();
      const a = new CrashingStore(store);
      const savedA: CheckpointSavedEvent[] = [];
      const eventsA = new DurableEvents();
      eventsA.on('checkpoint.saved', (e) => savedA.push(e));
      await loopDies(holdDiesAfterCharge(a), {
        runId: 'tl-8',
        checkpoints: a,
        events: eventsA,
      });
      expect(savedA.map((e) => [e.kind, e.step, e.stage])).toEqual([
        ['loop', 0, 'start'],
        ['loop', 1, 'model'],
      ]);
      const events = new DurableEvents();
      const saved: CheckpointSavedEvent[] = [];
      const recovered: RunRecoveredEvent[] = [];
      events.on('checkpoint.saved', (e) => saved.push(e));
      events.on('run.recovered', (e) => recovered.push(e));
      await recoverLoop(tickets('B'), 'tl-8', { checkpoints: view(), events });
      expect(saved.map((e) => [e.kind, e.step, e.status, e.stage])).toEqual([
        ['loop', 2, 'running', 'claim'],
        ['loop', 3, 'running', 'tools'],
        ['loop', 4, 'done', 'model'],
      ]);
      expect(recovered).toMatchObject([
        {
          kind: 'loop',
          runId: 'tl-8',
          step: 3,
          replayed: [{ node: 'tools', tool: 'charge_card' }],
          rerun: [{ node: 'tools', tool: 'hold_seats' }],
        },
      ]);
    });
  });
}

describe('Spec sentences on MemoryCheckpointStore', () => {
  specSuite({
    name: 'memory',
    fresh: () => {
      const store = new MemoryCheckpointStore();
      return Promise.resolve({ store, view: () => store });
    },
  });
});

describeWithService(
  'postgres',
  'Spec sentences on Postgres (SQLCheckpointStore)',
  () => {
    const ds = new DataSource({
      type: 'postgres',
      url: DATABASE_URL,
      poolSize: 6,
    });
    const schemas: string[] = [];
    beforeAll(async () => {
      await ds.initialize();
    });
    afterAll(async () => {
      for (const s of schemas)
        await ds.query(`DROP SCHEMA IF EXISTS "${s}" CASCADE`);
      await ds.destroy();
    });
    specSuite({
      name: 'postgres',
      fresh: async () => {
        const schema = suiteId('aa_spec');
        schemas.push(schema);
        const store = new SQLCheckpointStore(ds, { schema });
        await store.head('warm-up'); // creates the tables before two workers race to
        return {
          store,
          // Another worker's store object on the same tables (the pool is shared: one process).
          view: () => new SQLCheckpointStore(ds, { schema }),
        };
      },
    });
  },
);
