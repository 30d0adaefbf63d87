import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  Injectable,
  type INestApplication,
  type ModuleMetadata,
} from '@nestjs/common';
import { EventEmitterModule, OnEvent } from '@nestjs/event-emitter';
import {
  MemoryCheckpointStore,
  SQLiteCheckpointStore,
  type CheckpointSavedEvent,
  type RunIdentity,
  type RunRecoveredEvent,
  type RunResult,
} from 'agent-adapter';
import {
  CheckpointStore,
  DurableEvents,
  DurableModule,
  FlowRunner,
  RecoveryOrchestrator,
} from 'agent-adapter/nest';
import { CrashingStore, SimulatedCrash, settle } from 'agent-adapter/testing';
import {
  KEY,
  Ledger,
  TicketsFlow,
  TicketsModule,
  type Order,
} from './fixtures/tickets.fixtures';
import { Apps, CaptureLogger } from './utils';

/**
 * A worker dies inside a tool; a second application boots on the same SQLite file and recovers
 * the run in `onApplicationBootstrap`. Both "processes" share one ledger of what really ran.
 */
describe('bootstrap recovery (e2e, SQLite)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'aa-nest-recovery-'));
  let n = 0;
  const apps = new Apps();
  const stores: CheckpointStore[] = [];
  afterEach(async () => {
    await apps.closeAll();
    while (stores.length) await stores.pop()!.close();
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  type Worker = { workerId: string; leaseMs?: number };

  /**
   * Worker 1 (id "worker-1" unless given): an application whose store "dies" (every later read
   * and write fails, like a killed process) inside `tool`, after the tool's side effect. Returns
   * the run id, the file and the ledger both workers share.
   */
  async function crashIn(
    tool: string,
    { ctx, ...worker }: Partial<Worker> & { ctx?: RunIdentity } = {},
  ): Promise<{ runId: string; path: string; ledger: Ledger }> {
    const ledger = new Ledger();
    const path = join(dir, `runs-${++n}.db`);
    const inner = new SQLiteCheckpointStore(path);
    stores.push(inner);
    const crashing = new CrashingStore(inner);
    ledger.crashIn = { tool, kill: () => crashing.kill(`inside ${tool}`) };
    const app = await apps.boot([
      DurableModule.forRoot({
        store: crashing,
        key: KEY,
        workerId: 'worker-1',
        ...worker,
      }),
      TicketsModule.with(ledger),
    ]);
    const runId = `order-${n}`;
    await expect(
      app
        .get(FlowRunner)
        .start(
          TicketsFlow,
          { show: 'Hamlet', seats: 2 },
          { runId, ...(ctx && { ctx }) },
        ),
    ).rejects.toThrow(SimulatedCrash);
    await settle();
    await apps.closeAll();
    return { runId, path, ledger };
  }

  /**
   * Worker 2: a fresh application on the same file, returned once its boot recovery is over.
   * `events` subscribes before the lifecycle hooks, so it sees what the boot recovery emits;
   * `imports` come ahead of the durable module.
   */
  async function restart(
    path: string,
    ledger: Ledger,
    {
      logger,
      events,
      imports = [],
      providers,
      ...options
    }: Worker & {
      recoverOnBoot?: boolean;
      takeover?: false;
      logger?: CaptureLogger;
      events?: (e: DurableEvents) => void;
      imports?: ModuleMetadata['imports'];
      providers?: ModuleMetadata['providers'];
    },
  ): Promise<INestApplication> {
    const app = await apps.boot(
      [
        ...imports,
        DurableModule.forRoot({
          store: { type: 'sqlite', path },
          key: KEY,
          ...options,
        }),
        TicketsModule.with(ledger),
      ],
      {
        ...(logger && { logger }),
        ...(providers && { providers }),
        beforeInit: (app) => events?.(app.get(DurableEvents)),
      },
    );
    await app.get(RecoveryOrchestrator).waitUntilRecovered();
    return app;
  }

  /** Asserts that some recovery line matches `pattern`. */
  function expectRecoveryLine(logger: CaptureLogger, pattern: string): void {
    expect(logger.of('DurableRecovery')).toEqual(
      expect.arrayContaining([expect.stringMatching(new RegExp(pattern))]),
    );
  }

  it('finishes a run cut short inside an idempotent tool; no finished call runs twice', async () => {
    const { runId, path, ledger } = await crashIn('email_tickets');
    expect(ledger.count('email_tickets')).toBe(1);

    // The restarted worker keeps its id: its own runs are taken back at once.
    const logger = new CaptureLogger();
    const recovered: RunRecoveredEvent[] = [];
    const app = await restart(path, ledger, {
      workerId: 'worker-1',
      logger,
      events: (e) => e.on('run.recovered', (r) => recovered.push(r)),
    });

    const run = await app.get(FlowRunner).get<Order>(runId);
    expect(run).toMatchObject({
      status: 'done',
      state: { note: 'sent Hamlet', receipt: 'receipt for Hamlet' },
    });
    // The ledger: every finished call ran once; only the mail in doubt (idempotent) ran again.
    expect(ledger.count('hold_seats')).toBe(1);
    expect(ledger.count('charge_card')).toBe(1);
    expect(ledger.count('print_receipt')).toBe(1);
    expect(ledger.count('email_tickets')).toBe(2);
    expect(recovered).toHaveLength(1);
    expect(recovered[0]).toMatchObject({
      runId,
      replayed: [{ node: 'send', index: 0, tool: 'print_receipt' }],
      rerun: [{ node: 'send', index: 1, tool: 'email_tickets' }],
    });
    // No state value in any log line (the show's name is the run's state).
    expect(logger.lines.map((l) => l.message).join('\n')).not.toMatch(/Hamlet/);
    // Steps: 0 start, 1 hold, 2 pay, (crash in send), 3 the claim, 4 send again: done.
    expect(logger.of('DurableRecovery')).toEqual(
      expect.arrayContaining([
        `log: Run "${runId}" of flow "tickets" recovered: done at step 4; replayed print_receipt; ran again email_tickets (idempotent).`,
      ]),
    );
  });

  it('logs a run cut short inside a non-idempotent tool as needing a decision, and starts anyway', async () => {
    const { runId, path, ledger } = await crashIn('charge_card');
    const logger = new CaptureLogger();
    // Lease of worker 1 (default 15 s) is live: without force nothing is taken yet.
    const app = await restart(path, ledger, { workerId: 'worker-2', logger });
    // Who holds it, until when (ISO), and that it is looked at again then.
    expect(logger.of('DurableRecovery').join('\n')).toMatch(
      new RegExp(
        `Run "${runId}" of flow "tickets": worker "worker-1" holds its lease until \\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d\\.\\d{3}Z .*; retrying then\\.`,
      ),
    );

    // An operator sweep once the owner is known dead: the card may have been charged, so the
    // run waits for a decision; nothing runs, nothing is written.
    const runner = app.get(FlowRunner);
    const outcomes = await runner.recoverAll(TicketsFlow, { force: true });
    const outcome = outcomes.get(runId);
    expect(outcome).toMatchObject({
      name: 'RecoveryNeedsDecision',
      calls: [['charge_card', expect.any(String)]],
    });
    expect(ledger.count('charge_card')).toBe(1);
    expect(ledger.count('email_tickets')).toBe(0);
    await expect(app.get(CheckpointStore).head(runId)).resolves.toMatchObject({
      status: 'running',
      step: 1,
    });
  });

  it('logs "needs a decision" with the calls on bootstrap (same worker id)', async () => {
    const { runId, path, ledger } = await crashIn('charge_card');
    const logger = new CaptureLogger();
    const app = await restart(path, ledger, { workerId: 'worker-1', logger });
    expectRecoveryLine(
      logger,
      `^warn: Run "${runId}" of flow "tickets" needs a decision: call\\(s\\) in doubt charge_card \\(`,
    );
    expect(logger.of('DurableRecovery')).toContain(
      'log: Bootstrap recovery done: 1 unfinished run(s) in 1 flow(s): 1 need a decision.',
    );
    expect(ledger.count('charge_card')).toBe(1);
    // The application is up and serves new runs.
    ledger.crashIn = undefined;
    const fresh = await app
      .get(FlowRunner)
      .start(TicketsFlow, { show: 'Lear', seats: 1 });
    expect(fresh.status).toBe('done');
  });

  it('with the takeover off, looks again once a crashed worker’s lease expires (one unref’d re-sweep)', async () => {
    const { runId, path, ledger } = await crashIn('email_tickets', {
      workerId: 'worker-dead',
      leaseMs: 400,
    });
    const logger = new CaptureLogger();
    let done!: (r: RunRecoveredEvent) => void;
    const recovered = new Promise<RunRecoveredEvent>((r) => (done = r));
    const app = await restart(path, ledger, {
      workerId: 'worker-2',
      leaseMs: 400,
      takeover: false,
      logger,
      events: (e) => e.on('run.recovered', done),
    });
    const atBoot = logger.of('DurableRecovery').join('\n');
    expect(atBoot).toMatch(
      `Run "${runId}" of flow "tickets": worker "worker-dead" holds its lease until`,
    );
    expect(atBoot).toMatch(
      /1 run\(s\) held by other workers; looking again at/,
    );

    await expect(recovered).resolves.toMatchObject({ runId });
    await expect(app.get(FlowRunner).get(runId)).resolves.toMatchObject<
      Partial<RunResult<Order>>
    >({ status: 'done' });
    expect(ledger.count('charge_card')).toBe(1);
    expect(ledger.count('print_receipt')).toBe(1);
    // One summary for the boot and one, labelled, for the re-sweep (not a second "Bootstrap").
    for (let i = 0; i < 200; i++) {
      if (logger.of('DurableRecovery').some((l) => l.includes('re-sweep')))
        break;
      await new Promise((r) => setTimeout(r, 25));
    }
    expect(
      logger.of('DurableRecovery').filter((l) => / done: /.test(l)),
    ).toEqual([
      'log: Bootstrap recovery done: 1 unfinished run(s) in 1 flow(s): 1 held by another worker.',
      'log: Lease re-sweep (runs held at bootstrap) done: 1 unfinished run(s) in 1 flow(s): 1 recovered.',
    ]);
  });

  it('with the takeover on (the default), a run held at boot is taken over once its lease expires, with no re-sweep', async () => {
    const { runId, path, ledger } = await crashIn('email_tickets', {
      workerId: 'worker-dead',
      leaseMs: 400,
    });
    const logger = new CaptureLogger();
    const app = await restart(path, ledger, {
      workerId: 'worker-2',
      leaseMs: 400,
      logger,
    });
    const booted = Date.now();
    const runner = app.get(FlowRunner);
    for (let i = 0; i < 100; i++) {
      if ((await runner.get(runId)).status === 'done') break;
      await new Promise((r) => setTimeout(r, 25));
    }
    expect((await runner.get(runId)).status).toBe('done');
    expect(Date.now() - booted).toBeLessThan(400 + 2_000);
    expect(ledger.count('charge_card')).toBe(1);
    const lines = logger.of('DurableRecovery');
    expect(lines.join('\n')).toMatch(
      `Run "${runId}" of flow "tickets" recovered: done at step 4`,
    );
    expect(lines.join('\n')).not.toMatch(/re-sweep|looking again at/);
    expect(logger.of('DurableTakeover')).toEqual([
      expect.stringMatching(/^log: Takeover: looking for due runs of 1 flow/),
    ]);
  });

  it('logs a run that acts with a principal as needing its ctx, and recovers it when given', async () => {
    const ctx = { user: 'u1', principal: 'svc-billing' };
    const { runId, path, ledger } = await crashIn('email_tickets', { ctx });
    const logger = new CaptureLogger();
    const app = await restart(path, ledger, { workerId: 'worker-1', logger });
    expectRecoveryLine(
      logger,
      `^warn: Run "${runId}" of flow "tickets" was not recovered: .*principal`,
    );
    await expect(
      app.get(FlowRunner).recover(TicketsFlow, runId, { ctx }),
    ).resolves.toMatchObject({ status: 'done' });
    expect(ledger.count('charge_card')).toBe(1);
  });

  it('logs a lost recovery race as another worker having the run, not as an error', async () => {
    const { runId, path, ledger } = await crashIn('email_tickets', {
      workerId: 'worker-dead',
      leaseMs: 100,
    });
    await new Promise((r) => setTimeout(r, 150)); // the dead worker's lease is over
    // worker-b reads the run's head, then stalls before its claim while worker-a recovers it.
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let stalled!: () => void;
    const reading = new Promise<void>((r) => (stalled = r));
    class StallingStore extends SQLiteCheckpointStore {
      override async latest(id: string) {
        stalled();
        await gate;
        return super.latest(id);
      }
    }
    const slow = new StallingStore(path);
    stores.push(slow);
    // One logger for both apps: Nest's Logger writes to the application booted last.
    const logger = new CaptureLogger();
    const b = await apps.boot(
      [
        DurableModule.forRoot({ store: slow, key: KEY, workerId: 'worker-b' }),
        TicketsModule.with(ledger),
      ],
      { logger },
    );
    await reading;
    const a = await restart(path, ledger, {
      workerId: 'worker-a',
      logger,
    });
    await a.get(RecoveryOrchestrator).waitUntilRecovered();
    release();
    await b.get(RecoveryOrchestrator).waitUntilRecovered();
    // worker-a's recovery, then worker-b's lost race: a log line, not an error.
    expect(logger.of('DurableRecovery')).toEqual([
      `log: Run "${runId}" of flow "tickets" recovered: done at step 4; replayed print_receipt; ran again email_tickets (idempotent).`,
      'log: Bootstrap recovery done: 1 unfinished run(s) in 1 flow(s): 1 recovered.',
      `log: Run "${runId}" of flow "tickets": another worker (worker-a) recovered it first; nothing to do here.`,
      'log: Bootstrap recovery done: 1 unfinished run(s) in 1 flow(s): 1 recovered by another worker first.',
    ]);
    expect(ledger.count('email_tickets')).toBe(2); // the crashed send, and worker-a's
  });

  it('never fails the bootstrap: a store that cannot list its runs is logged', async () => {
    const dead = new CrashingStore(new MemoryCheckpointStore());
    dead.dead = true;
    const logger = new CaptureLogger();
    const app = await apps.boot(
      [
        DurableModule.forRoot({ store: dead, key: KEY }),
        TicketsModule.with(new Ledger()),
      ],
      { logger },
    );
    await app.get(RecoveryOrchestrator).waitUntilRecovered();
    expect(logger.of('DurableRecovery')).toEqual([
      'error: Recovery of flow "tickets" could not list its runs: SimulatedCrash: simulated crash (worker is dead)',
      'log: Bootstrap recovery done: 0 unfinished run(s) in 1 flow(s).',
    ]);
  });

  it('recoverOnBoot: false leaves unfinished runs alone', async () => {
    const { runId, path, ledger } = await crashIn('email_tickets');
    const app = await restart(path, ledger, {
      workerId: 'worker-1',
      recoverOnBoot: false,
    });
    await expect(app.get(CheckpointStore).head(runId)).resolves.toMatchObject({
      status: 'running',
    });
    // The manual sweep does what the boot would have done.
    const summary = await app.get(RecoveryOrchestrator).sweep();
    expect(summary.recovered).toEqual([runId]);
    expect(ledger.count('charge_card')).toBe(1);
  });

  it("@OnEvent listeners (@nestjs/event-emitter) get checkpoint.saved and the boot recovery's run.recovered", async () => {
    const { runId, path, ledger } = await crashIn('email_tickets');
    const app = await restart(path, ledger, {
      workerId: 'worker-1',
      imports: [EventEmitterModule.forRoot()],
      providers: [RunAudit],
    });
    const audit = app.get(RunAudit);
    // Listeners are attached in event-emitter's own bootstrap hook; recovery waited for them.
    expect(audit.recovered).toEqual([
      expect.objectContaining({
        kind: 'flow',
        runId,
        flow: 'tickets',
        rerun: [{ node: 'send', index: 1, tool: 'email_tickets' }],
      }),
    ]);
    expect(audit.saved.map((e) => [e.runId, e.step, e.status])).toEqual([
      [runId, 3, 'running'],
      [runId, 4, 'done'],
    ]);

    const started = await app
      .get(FlowRunner)
      .start<Order>(TicketsFlow, { show: 'Lear', seats: 1 });
    expect(
      audit.saved.filter((e) => e.runId === started.runId).map((e) => e.step),
    ).toEqual([0, 1, 2, 3]);
  });
});

/** An application's listener, written the @nestjs/event-emitter way. */
@Injectable()
class RunAudit {
  readonly saved: CheckpointSavedEvent[] = [];
  readonly recovered: RunRecoveredEvent[] = [];

  @OnEvent('checkpoint.saved')
  onSaved(event: CheckpointSavedEvent): void {
    this.saved.push(event);
  }

  @OnEvent('run.recovered')
  onRecovered(event: RunRecoveredEvent): void {
    this.recovered.push(event);
  }
}
