/**
 * Real SIGKILLs for approvals and the tool loop (issue 5's "Done when"): worker processes
 * (worker.ts, approval-* and loop-* modes) on a persistent store, killed with SIGKILL at chosen
 * points: right after a checkpoint is stored (HANG_AFTER_SAVE: the worker says `SAVED <what>` and
 * blocks), inside a tool (HANG_IN: `READY <tool>` once its `begin` ledger line is on disk), or while
 * a synchronous approval port waits. Another process goes on. The ledger file (fsync'd by the
 * tools) is the truth about what ran; for the loop, a chat-completions server in this process
 * counts how often the model was asked.
 *
 * SQLite (a file) and Postgres run in `npm test`; Redis and the extra loop and deny variants run
 * with `npm run crash` (CRASH_FULL=1).
 */
import { appendFileSync } from 'node:fs';
import {
  CheckpointConflict,
  DurableError,
  Executor,
  FlowRunner,
  OpenAIChatModel,
  RecoveryNeedsDecision,
  ToolLoop,
  ToolRegistry,
  idempotencyKey,
  type ApprovalPort,
} from 'agent-adapter';
import { ChatServer, callTools, say, toolResults } from '../utils/chat-server';
import { killAll } from '../utils/child-process';
import { describeWithService } from '../utils/services';
import { KEY } from 'agent-adapter/testing/fixtures';
import { refundsFlow } from 'agent-adapter/testing/fixtures';
import { keysOf, sandboxes, trail, type Sandbox } from './harness';
import { openStore, serviceOf, type StoreKind } from './stores';
import type { LedgerLine, Outcome } from './worker';

const FULL = process.env.CRASH_FULL === '1';
const KINDS: StoreKind[] = FULL
  ? ['sqlite', 'postgres', 'redis']
  : ['sqlite', 'postgres'];
const full = FULL ? it : it.skip;

const done = (note: string, more: Partial<Outcome> = {}) => ({
  status: 'done',
  runId: expect.any(String) as string,
  step: expect.any(Number) as number,
  note,
  ...more,
});

const needsDecision = (tool: string, why: string) => ({
  error: 'RecoveryNeedsDecision',
  message: expect.any(String) as string,
  calls: [[tool, why]],
});

function suite(kind: StoreKind): void {
  const boxes = sandboxes(kind, 'crash_al');
  afterAll(async () => {
    await killAll();
    await boxes.cleanup();
  });

  /** A refund run paused for approval by a worker that exited normally. */
  async function paused(t: Sandbox) {
    // Run here, in the test process (it saves a process start): the quote appends to the ledger
    // as a worker's tool would; the refund must not run before a decision.
    const opened = await openStore(kind, t.env);
    try {
      const registry = new ToolRegistry()
        .register('quote', (a: { amount: number }) => {
          const line: LedgerLine = {
            tool: 'quote',
            pid: process.pid,
            key: idempotencyKey(),
            phase: 'begin',
          };
          appendFileSync(t.ledgerFile, `${JSON.stringify(line)}\n`);
          appendFileSync(
            t.ledgerFile,
            `${JSON.stringify({ ...line, phase: 'end' })}\n`,
          );
          return `quote ${a.amount}`;
        })
        .register(
          'refund',
          () => {
            throw new Error('refund ran before a decision');
          },
          { approval: true },
        );
      const r = await new FlowRunner(new Executor(registry), {
        checkpoints: opened.store,
        checkpointKey: KEY,
      }).run(refundsFlow(), { amount: 30 }, { runId: t.runId });
      expect(r).toMatchObject({
        status: 'paused',
        pending: { tool: 'refund' },
      });
      return { pid: process.pid };
    } finally {
      await opened.close();
    }
  }

  /** What the store says about the run, read here (another process) with the same key. */
  async function stored(t: Sandbox) {
    const opened = await openStore(kind, t.env);
    try {
      const runner = new FlowRunner(new Executor(new ToolRegistry()), {
        checkpoints: opened.store,
        checkpointKey: KEY,
      });
      const r = await runner.get(refundsFlow(), t.runId);
      // Spent once: a run that ended takes no decision any more.
      const again = await runner
        .resume(refundsFlow(), t.runId, { approved: true })
        .catch((e: unknown) => e);
      return { r, again };
    } finally {
      await opened.close();
    }
  }

  /**
   * A recovery attempt made here, in the test process (another process than the killed worker),
   * that must stop before running anything: every tool, the port and the model fail the test if
   * asked. Tools carry the workers' flags (idempotency decides what is in doubt).
   */
  async function recoverHere(
    t: Sandbox,
    what: 'refunds' | 'loop',
  ): Promise<Outcome> {
    const never = (name: string) => () => {
      throw new Error(`${name} ran during a recovery that must stop first`);
    };
    const opened = await openStore(kind, t.env);
    try {
      const options = { checkpoints: opened.store, checkpointKey: KEY };
      let error: unknown;
      if (what === 'refunds') {
        const port: ApprovalPort = { decide: never('the approval port') };
        const registry = new ToolRegistry()
          .register('quote', never('quote'))
          .register('refund', never('refund'), { approval: true });
        const runner = new FlowRunner(new Executor(registry), {
          ...options,
          approvals: port,
        });
        error = await runner.recover(refundsFlow(), t.runId).catch((e) => e);
      } else {
        const registry = new ToolRegistry()
          .register('hold_seats', never('hold_seats'), { idempotent: true })
          .register('charge_card', never('charge_card'));
        const model = new OpenAIChatModel({
          baseUrl: 'http://127.0.0.1:9/v1', // asking the model fails the recovery loudly
          model: 'test-model',
          maxRetries: 0,
        });
        const loop = new ToolLoop(model, registry, {
          ...options,
          name: 'support',
        });
        error = await loop.recover(t.runId).catch((e) => e);
        loop.close();
      }
      if (!(error instanceof DurableError)) throw error;
      return {
        error: error.name,
        message: error.message,
        ...(error instanceof RecoveryNeedsDecision && { calls: error.calls }),
      };
    } finally {
      await opened.close();
    }
  }

  describe('approvals', () => {
    it('a worker killed right after it paused for an approval: another process resumes, the approved refund runs once, the quote is not run again', async () => {
      const t = boxes.fresh();
      const w1 = t.start(['approval-run', '--run-id', t.runId], {
        HANG_AFTER_SAVE: 'pause',
      });
      await w1.waitForLine(/^SAVED pause$/);
      expect((await w1.kill()).signal).toBe('SIGKILL');
      const names = { [w1.pid]: 'w1' };
      expect(trail(t.ledger(), 'refund', names)).toEqual([]);

      const w2 = await t
        .start([
          'approval-resume',
          '--run-id',
          t.runId,
          '--decision',
          'approve',
        ])
        .report();
      expect(w2.outcome).toEqual(done('refunded 30'));
      names[w2.pid] = 'w2';
      const ledger = t.ledger();
      expect(trail(ledger, 'quote', names)).toEqual(['begin:w1', 'end:w1']);
      expect(trail(ledger, 'refund', names)).toEqual(['begin:w2', 'end:w2']);
      const { r, again } = await stored(t);
      expect(r.status).toBe('done');
      expect(again).toBeInstanceOf(CheckpointConflict);
    });

    it('killed right after the decision was stored, before the refund ran: a recoverer spends the stored decision, once', async () => {
      const t = boxes.fresh();
      const w1 = await paused(t);
      const w2 = t.start(
        ['approval-resume', '--run-id', t.runId, '--decision', 'approve'],
        { HANG_AFTER_SAVE: 'resume' },
      );
      await w2.waitForLine(/^SAVED resume$/);
      expect((await w2.kill()).signal).toBe('SIGKILL');
      expect(trail(t.ledger(), 'refund', {})).toEqual([]); // not spent before the kill

      // No decision given: the one sealed into the checkpoint is spent.
      const w3 = await t
        .start(['approval-recover', '--run-id', t.runId])
        .report();
      expect(w3.outcome).toEqual(done('refunded 30'));
      const names = { [w1.pid]: 'w1', [w2.pid]: 'w2', [w3.pid]: 'w3' };
      const ledger = t.ledger();
      expect(trail(ledger, 'quote', names)).toEqual(['begin:w1', 'end:w1']);
      expect(trail(ledger, 'refund', names)).toEqual(['begin:w3', 'end:w3']);
      const { again } = await stored(t);
      expect(again).toBeInstanceOf(CheckpointConflict);
    });

    it('killed inside the approved refund: the call is in doubt (not idempotent), recovery needs a decision and runs nothing; rerunInDoubt runs it again with the same key', async () => {
      const t = boxes.fresh();
      const w1 = await paused(t);
      const w2 = t.start(
        ['approval-resume', '--run-id', t.runId, '--decision', 'approve'],
        { HANG_IN: 'refund' },
      );
      await w2.waitForLine(/^READY refund$/);
      expect((await w2.kill()).signal).toBe('SIGKILL');
      const crashed = t.ledger();

      expect(await recoverHere(t, 'refunds')).toEqual(
        needsDecision('refund', 'started, no result recorded'),
      );
      expect(t.ledger()).toEqual(crashed);

      const w4 = await t
        .start(['approval-recover', '--run-id', t.runId, '--rerun-in-doubt'])
        .report();
      expect(w4.outcome).toEqual(done('refunded 30'));
      const names = { [w1.pid]: 'w1', [w2.pid]: 'w2', [w4.pid]: 'w4' };
      const ledger = t.ledger();
      expect(trail(ledger, 'quote', names)).toEqual(['begin:w1', 'end:w1']);
      expect(trail(ledger, 'refund', names)).toEqual([
        'begin:w2',
        'begin:w4',
        'end:w4',
      ]);
      expect(keysOf(ledger, 'refund').size).toBe(1);
    });

    it('a synchronous approval port: killed while the port waits, recovery reports the call in doubt and asks nobody; rerunInDoubt asks the port again and the refund runs once', async () => {
      const t = boxes.fresh();
      const w1 = t.start([
        'approval-run',
        '--run-id',
        t.runId,
        '--sync-port',
        'hang',
      ]);
      await w1.waitForLine(/^READY port$/);
      expect((await w1.kill()).signal).toBe('SIGKILL');
      const crashed = t.ledger();
      expect(crashed.map((l) => `${l.tool}:${l.phase}`)).toEqual([
        'quote:begin',
        'quote:end',
      ]);

      expect(await recoverHere(t, 'refunds')).toEqual(
        needsDecision(
          'refund',
          'was waiting for a synchronous approval, no decision recorded',
        ),
      );
      expect(t.ledger()).toEqual(crashed); // the port was not asked, nothing ran

      const w3 = await t
        .start([
          'approval-recover',
          '--run-id',
          t.runId,
          '--rerun-in-doubt',
          '--sync-port',
          'approve',
        ])
        .report();
      expect(w3.outcome).toEqual(done('refunded 30'));
      const names = { [w1.pid]: 'w1', [w3.pid]: 'w3' };
      const ledger = t.ledger();
      expect(trail(ledger, 'quote', names)).toEqual(['begin:w1', 'end:w1']);
      expect(trail(ledger, 'port', names)).toEqual(['end:w3']);
      expect(trail(ledger, 'refund', names)).toEqual(['begin:w3', 'end:w3']);
    });

    full(
      'a deny stored right before the kill: the recoverer spends the denial, the refund never runs',
      async () => {
        const t = boxes.fresh();
        await paused(t);
        const w2 = t.start(
          ['approval-resume', '--run-id', t.runId, '--decision', 'deny'],
          { HANG_AFTER_SAVE: 'resume' },
        );
        await w2.waitForLine(/^SAVED resume$/);
        await w2.kill();
        const w3 = await t
          .start(['approval-recover', '--run-id', t.runId])
          .report();
        expect(w3.outcome).toEqual(
          done(`not refunded: "refund" was denied by pid ${w2.pid}`),
        );
        expect(trail(t.ledger(), 'refund', {})).toEqual([]);
      },
    );
  });

  describe('the tool loop', () => {
    let server: ChatServer;
    beforeEach(async () => {
      server = await ChatServer.start();
      // The model asks for hold_seats (idempotent) and charge_card at once, then sums up.
      server.script(
        callTools([
          { name: 'hold_seats', arguments: { seats: 2 }, id: 'h' },
          { name: 'charge_card', arguments: { amount: 90 }, id: 'c' },
        ]),
        (request) => say(`results: ${JSON.stringify(toolResults(request))}`),
      );
    });
    afterEach(() => server.close());

    const SUMMARY = 'results: {"h":"held 2","c":"charged 90"}';

    it('killed inside charge_card after hold_seats finished: recovery does not ask the model again, charge_card needs a decision; rerunInDoubt finishes, hold_seats replays', async () => {
      const t = boxes.fresh();
      const chat = { CHAT_URL: server.baseUrl };
      const w1 = t.start(['loop-run', '--run-id', t.runId], {
        ...chat,
        HANG_IN: 'charge_card',
        READY_AFTER: 'hold_seats:done',
      });
      await w1.waitForLine(/^READY charge_card$/);
      expect((await w1.kill()).signal).toBe('SIGKILL');
      expect(server.requests).toHaveLength(1);
      const crashed = t.ledger();

      expect(await recoverHere(t, 'loop')).toEqual(
        needsDecision('charge_card', 'started, no result recorded'),
      );
      expect(t.ledger()).toEqual(crashed);
      expect(server.requests).toHaveLength(1);

      const w3 = await t
        .start(['loop-recover', '--run-id', t.runId, '--rerun-in-doubt'], chat)
        .report();
      expect(w3.outcome).toEqual(done(SUMMARY, { modelCalls: 2 }));
      // Asked once more, for the answer to the results: the saved reply was not asked for again.
      expect(server.requests).toHaveLength(2);
      expect(toolResults(server.requests[1]!)).toEqual({
        h: 'held 2',
        c: 'charged 90',
      });
      const names = { [w1.pid]: 'w1', [w3.pid]: 'w3' };
      const ledger = t.ledger();
      expect(trail(ledger, 'hold_seats', names)).toEqual([
        'begin:w1',
        'end:w1',
      ]);
      expect(trail(ledger, 'charge_card', names)).toEqual([
        'begin:w1',
        'begin:w3',
        'end:w3',
      ]);
      expect(keysOf(ledger, 'charge_card').size).toBe(1);
    });

    full(
      'killed right after the model reply was saved: recovery runs its tool calls without asking the model again',
      async () => {
        const t = boxes.fresh();
        const chat = { CHAT_URL: server.baseUrl };
        const w1 = t.start(['loop-run', '--run-id', t.runId], {
          ...chat,
          HANG_AFTER_SAVE: 'step=1',
        });
        await w1.waitForLine(/^SAVED step=1$/);
        await w1.kill();
        expect(t.ledger()).toEqual([]);
        const w2 = await t
          .start(['loop-recover', '--run-id', t.runId], chat)
          .report();
        expect(w2.outcome).toEqual(done(SUMMARY, { modelCalls: 2 }));
        expect(server.requests).toHaveLength(2);
        const names = { [w2.pid]: 'w2' };
        expect(trail(t.ledger(), 'hold_seats', names)).toEqual([
          'begin:w2',
          'end:w2',
        ]);
        expect(trail(t.ledger(), 'charge_card', names)).toEqual([
          'begin:w2',
          'end:w2',
        ]);
      },
    );

    full(
      'killed right after the tool results were saved: no tool runs again, the model is asked once for its answer',
      async () => {
        const t = boxes.fresh();
        const chat = { CHAT_URL: server.baseUrl };
        const w1 = t.start(['loop-run', '--run-id', t.runId], {
          ...chat,
          HANG_AFTER_SAVE: 'step=2',
        });
        await w1.waitForLine(/^SAVED step=2$/);
        await w1.kill();
        const crashed = t.ledger();
        expect(crashed).toHaveLength(4);
        const w2 = await t
          .start(['loop-recover', '--run-id', t.runId], chat)
          .report();
        expect(w2.outcome).toEqual(done(SUMMARY, { modelCalls: 2 }));
        expect(server.requests).toHaveLength(2);
        expect(t.ledger()).toEqual(crashed);
      },
    );
  });
}

for (const kind of KINDS) {
  const title = `SIGKILL: approvals and the tool loop (${kind})`;
  const service = serviceOf(kind);
  if (service) describeWithService(service, title, () => suite(kind));
  else describe(title, () => suite(kind));
}
