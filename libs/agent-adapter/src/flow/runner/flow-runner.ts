import { CheckpointConflict, RunQueued } from '../../errors';
import { Messages } from '../../errors/messages';
import type { DurableEvents } from '../../events/durable.events';
import type { CheckpointStore } from '../../exec/checkpoints/checkpoint-store';
import type { KeyRing } from '../../exec/durable/key-ring';
import type { RunIdentity } from '../../exec/durable/records';
import type { Executor } from '../../exec/executor';
import type { Flow } from '../flow.builder';
import type {
  RecoverAllOptions,
  RecoverOptions,
  RecoveryOutcome,
  ResumeDecision,
  ResumeOptions,
  RunOptions,
  RunResult,
} from '../flow.interfaces';
import { checkRunId } from '../run-id';
import {
  integerOption,
  normalizeRunnerOptions,
  type FlowRunnerOptions,
  type RunnerSettings,
} from './flow-runner.options';
import { LeaseKeeper } from './lease-keeper';
import {
  recoverListed,
  sweepUnfinished,
  type SweepPort,
} from './recovery-sweep';
import {
  Takeover,
  type TakeoverOptions,
  type TakeoverSource,
} from './takeover';
import { headProblem, readHeadless } from './run-reader';
import { resultOf } from './run-transitions';
import { SegmentDriver } from './segment-driver';
import { resumeRun } from './waits';
import { continueRun } from './continue-run';
import {
  openRunStream,
  type StreamEntry,
  type StreamReadOptions,
} from './run-stream';
import { Scheduler } from '../schedules/scheduler';
import type { ScheduleInfo } from '../schedules/schedule-record';
import type { ScheduleOptions } from '../schedules/schedule.options';
import {
  enqueueRun,
  queuesOf,
  startFromInput,
  type EnqueueOptions,
  type EnqueueResult,
} from './queues';
import { storeResolution, type ResolveRequest } from './resolve';
import {
  checkOwnRun,
  readLatest,
  readResult,
  startedAlready,
  type RunSources,
} from './run-checks';

/**
 * Runs flows durably: a signed checkpoint after every superstep, every tool call logged before and
 * after it runs, recovery that replays finished calls and fails closed on calls in doubt. The
 * facade: it reads and checks the run (`run-reader`, `run-access`), builds the transition
 * (`run-transitions`) and hands the segment to the driver; leases and sweeps have their own homes.
 * @publicApi
 */
export class FlowRunner {
  readonly store: CheckpointStore;
  readonly events: DurableEvents;
  readonly workerId: string;
  private readonly settings: RunnerSettings;
  private readonly leases: LeaseKeeper;
  private readonly driver: SegmentDriver;
  private readonly sources: RunSources;
  private readonly wakers = new Set<(at?: number) => void>();
  /**
   * Durable schedules declared in this process (`schedule`): pause, resume and list them here. A
   * takeover started after they are declared fires their ticks.
   */
  readonly schedules: Scheduler;

  constructor(
    readonly executor: Executor,
    options: FlowRunnerOptions = {},
  ) {
    this.settings = normalizeRunnerOptions(options);
    this.store = this.settings.store;
    this.events = this.settings.events;
    this.workerId = this.settings.workerId;
    this.leases = new LeaseKeeper(
      this.store,
      this.workerId,
      this.settings.leaseMs,
      this.settings.logger,
    );
    this.driver = new SegmentDriver(
      this.settings,
      executor,
      this.leases,
      (at) => {
        for (const wake of this.wakers) wake(at);
      },
    );
    this.sources = {
      store: this.store,
      ring: this.settings.ring,
      registry: executor.registry,
    };
    this.schedules = new Scheduler(this.store, this.settings.ring, {
      start: (flow, input, options) =>
        this.run(flow, input, { ...options, wait: false }),
      enqueue: (flow, input, options) => this.enqueue(flow, input, options),
    });
  }

  /** The key ring this runner seals and opens records with (operators' tools read with it). */
  get keyRing(): KeyRing {
    return this.settings.ring;
  }

  /** Starts a run and drives it until it ends, pauses, or this worker loses it. */
  async run<S extends object>(
    flow: Flow<S>,
    input: Partial<NoInfer<S>>,
    options: RunOptions = {},
  ): Promise<RunResult<S>> {
    const compiled = flow.compile();
    const cp = await startFromInput(compiled, input, options, this.keyRing);
    const { stored, driving } = this.driver.begin(compiled, cp);
    try {
      await stored;
    } catch (error) {
      await driving.catch(() => undefined); // refused with step 0: it wrote nothing
      // The id is taken: a client retrying a start it never heard back from finds its run.
      if (!(error instanceof CheckpointConflict) || options.runId === undefined)
        throw error;
      return startedAlready(this.sources, compiled, cp, options.ctx);
    }
    if (options.wait !== false) return driving;
    driving.catch((error: unknown) =>
      this.settings.logger.error(
        Messages.backgroundRunStopped(cp.runId),
        error,
      ),
    );
    return resultOf(compiled, cp);
  }

  /**
   * Stores a run (its step 0, input validated) on a queue and returns its id at once: any worker
   * whose takeover has the flow starts it when the queue's limits allow (see `QueueOptions`), in
   * order of priority, then of availability. With a `dedupeKey` an unfinished run holds, nothing
   * is stored and that run's id comes back (`created: false`).
   */
  async enqueue<S extends object>(
    flow: Flow<S>,
    input: Partial<NoInfer<S>>,
    options: EnqueueOptions = {},
  ): Promise<EnqueueResult> {
    const result = await enqueueRun(this.sources, flow, input, options);
    // A takeover of this process looks now rather than at its next tick.
    for (const wake of this.wakers) wake();
    return result;
  }

  /**
   * Declares a durable schedule: a run of `flow` at each tick of the cron `expression` (5 fields,
   * or 6 with seconds first), exactly one per tick however many workers declare it (the tick's
   * run id is derived from the schedule and the tick). Stored once; a takeover started afterwards
   * on any worker that declares it fires it (see `ScheduleOptions` for overlap and catch-up).
   */
  schedule<S extends object>(
    flow: Flow<S>,
    expression: string,
    options: ScheduleOptions<NoInfer<S>> = {},
  ): Promise<ScheduleInfo> {
    return this.schedules.add(flow, expression, options);
  }

  /**
   * Goes on with a run from its latest checkpoint: the superstep that was cut short runs again,
   * finished calls replay, calls in doubt fail closed unless their tool is idempotent or
   * `rerunInDoubt` is set. A sleeping run wakes if its time came; a paused run gets the clock's
   * decision if its approval deadline passed; else either is returned as it is.
   */
  async recover<S extends object>(
    flow: Flow<S>,
    runId: string,
    options: RecoverOptions = {},
  ): Promise<RunResult<S>> {
    checkRunId(runId);
    return this.recoverRun(flow, runId, options, false);
  }

  /** `recover`; with `unlessHeld`, a run whose owner's lease is live is `RunLeaseHeld`, not taken. */
  private async recoverRun<S extends object>(
    flow: Flow<S>,
    runId: string,
    options: RecoverOptions,
    unlessHeld: boolean,
  ): Promise<RunResult<S>> {
    const compiled = flow.compile();
    const read = await readLatest(this.sources, compiled, runId, options.ctx);
    const { head } = read;
    // A queued run starts only through its queue's admission, under its limits.
    if (head.queue?.availableAt !== undefined)
      throw new RunQueued(runId, head.queue.name);
    const held = unlessHeld && this.leases.held(head, Date.now());
    if (held) throw held;
    return continueRun(this.driver, this.sources, compiled, read, {
      ...options,
      maxRecoveryAttempts: this.settings.maxRecoveryAttempts,
    });
  }

  /**
   * Says what calls in doubt really did, as found at their systems (`storeResolution`: checked,
   * sealed, stored with a compare-and-set, announced as `run.decided`), then recovers the run,
   * spending it: a call that ran is replayed with its outcome and never run, one that did not run
   * runs once. Calls left out stay in doubt, and recovery stops on them as before.
   */
  async resolve<S extends object>(
    flow: Flow<S>,
    runId: string,
    request: ResolveRequest,
    options: { ctx?: RunIdentity } = {},
  ): Promise<RunResult<S>> {
    checkRunId(runId);
    const { leaseMs } = this.settings;
    const stored = await storeResolution(
      this.sources,
      runId,
      request,
      { owner: this.workerId, leaseMs },
      (cp) => checkOwnRun(cp, runId, flow.name, options.ctx),
    );
    this.driver.announceDecision(stored);
    return this.recover(flow, runId, options.ctx ? { ctx: options.ctx } : {});
  }

  /**
   * Decides the call a paused run waits for, and goes on. The decision is sealed into the next
   * checkpoint with a compare-and-set (of two resumes at once, one wins; the other gets
   * CheckpointConflict) and only then spent: a crash before that save leaves the run paused, a
   * crash after it is recovered by spending the stored decision. An approved call runs once; a
   * denied one gives the node `ToolDenied`.
   */
  async resume<S extends object>(
    flow: Flow<S>,
    runId: string,
    decision: ResumeDecision,
    options: ResumeOptions = {},
  ): Promise<RunResult<S>> {
    checkRunId(runId);
    const { canResume } = this.settings;
    const on = { driver: this.driver, sources: this.sources, canResume };
    return resumeRun(on, flow.compile(), runId, decision, options);
  }

  /**
   * Recovers every unfinished run of the flow (for a worker on startup): run id → result or error.
   * A run whose owner's lease is still live is not taken (that worker may be healthy): it maps to
   * `RunLeaseHeld`, which says until when; call again after that. Runs this worker id owns but is
   * not driving are taken at once (this process restarted under a stable `workerId`).
   * For many runs, `recoverEach` gives the same outcomes one at a time, in flat memory.
   */
  async recoverAll<S extends object>(
    flow: Flow<S>,
    options: RecoverAllOptions = {},
  ): Promise<Map<string, RunResult<S> | Error>> {
    const out = new Map<string, RunResult<S> | Error>();
    for await (const [runId, outcome] of this.recoverEach(flow, options))
      out.set(runId, outcome);
    return out;
  }

  /**
   * `recoverAll` as a stream: yields each run's outcome (`[runId, result | error]`) as it settles,
   * holding at most one page of listed runs (100) and `concurrency` recoveries at a time. No run is
   * skipped or taken twice; a slow consumer slows the sweep; leaving the loop stops it (recoveries
   * started finish first). Options as in `recoverAll`; docs/flows.md, "Recovering many runs".
   */
  recoverEach<S extends object>(
    flow: Flow<S>,
    options: RecoverAllOptions = {},
  ): AsyncGenerator<RecoveryOutcome<RunResult<S>>, void, undefined> {
    return sweepUnfinished(this.sweepPort(flow), flow.name, options);
  }

  /**
   * Continuous takeover for a fleet: looks for due work every `everyMs` (jittered) and recovers
   * each run of `flows` whose owner's lease expired, within the lease plus one look, with no
   * restart. `stop()` it on shutdown. The Nest module runs one for its flows and tool loops.
   */
  takeOver<States extends readonly object[]>(
    flows: { readonly [K in keyof States]: Flow<States[K]> },
    options: TakeoverOptions = {},
  ): Takeover {
    // Each flow has its own state type; a source only needs the flow itself.
    const sources = (flows as readonly Flow<object>[]).map((flow) =>
      this.takeoverSource(flow, options),
    );
    sources.push(this.schedules.source);
    const { leaseMs, logger } = this.settings;
    const named = queuesOf(this.settings.queues, flows);
    const queues = () => [...named, ...this.schedules.queues];
    const settings = { ...options, leaseMs, queues, owner: this.workerId };
    const takeover = new Takeover(this.store, sources, settings, logger);
    this.wakeOnNewWork(takeover);
    return takeover.start();
  }

  /**
   * Wakes `takeover` (until it stops) whenever this runner enqueues a run, and at the time a run it
   * puts to sleep wakes or a pause it stores reaches its deadline. @internal
   */
  wakeOnNewWork(takeover: Takeover): void {
    const wake = (at?: number) => takeover.wake(at);
    this.wakers.add(wake);
    takeover.onStop(() => this.wakers.delete(wake));
  }

  /** A flow's due runs recovered by this runner (lease checked), for a `Takeover`. @internal */
  takeoverSource<S extends object>(
    flow: Flow<S>,
    options: TakeoverOptions = {},
  ): TakeoverSource {
    const port = this.sweepPort(flow);
    return {
      flow: flow.name,
      recover: (runId) => recoverListed(port, runId, options),
    };
  }

  /** What the sweep and the takeover recover a listed run of `flow` with. */
  private sweepPort<S extends object>(flow: Flow<S>): SweepPort<RunResult<S>> {
    return {
      store: this.store,
      held: (head, now) => this.leases.held(head, now),
      recover: (runId, options, unlessHeld) =>
        this.recoverRun(flow, runId, options, unlessHeld),
      verify: (head) => headProblem(this.settings.ring, head),
      headless: (runId) => readHeadless(this.store, this.settings.ring, runId),
    };
  }

  /**
   * The run's latest state as a result, without running anything. A `running` run that waits for
   * an operator (its worker's lease expired, calls in doubt of tools that are not idempotent) has
   * `needsDecision` with those calls, their arguments and idempotency keys.
   */
  async get<S extends object>(
    flow: Flow<S>,
    runId: string,
    options: { ctx?: RunIdentity } = {},
  ): Promise<RunResult<S>> {
    checkRunId(runId);
    return readResult(
      this.sources,
      flow.compile(),
      runId,
      options.ctx,
      (head, now) => this.leases.held(head, now),
    );
  }

  /**
   * The run's stream (what its nodes and tools published): each entry once, in order, from
   * `options.from`, following the run until it ends, from any process; see `StreamReadOptions`.
   */
  stream<S extends object>(
    flow: Flow<S>,
    runId: string,
    options: StreamReadOptions = {},
  ): AsyncGenerator<StreamEntry, void, undefined> {
    const { sources, settings } = this;
    return openRunStream(sources, settings.streams.bell, flow, runId, options);
  }

  /**
   * Graceful shutdown: the runs driven here stop at their next superstep boundary (stored, lease
   * released: `WorkerDraining`, so another worker takes them at once); waits up to `deadlineMs`
   * (default 10 s) for them, then stops renewing leases. Resolves with the runs still driven then.
   */
  async drain(options: { deadlineMs?: number } = {}): Promise<number> {
    const ms = integerOption('deadlineMs', options.deadlineMs, 10_000, 0);
    return this.leases.drain(ms);
  }

  /** Stops renewing leases (a shutdown without `drain`): runs in flight here expire elsewhere. */
  close(): void {
    this.leases.close();
  }
}
