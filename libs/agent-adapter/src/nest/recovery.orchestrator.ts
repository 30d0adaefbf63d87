import {
  Inject,
  Injectable,
  Logger,
  Optional,
  type BeforeApplicationShutdown,
  type OnApplicationBootstrap,
} from '@nestjs/common';
import {
  asError,
  CheckpointConflict,
  RecoveryNeedsDecision,
  RunAccessDenied,
  RunLeaseHeld,
} from '../errors';
import { DurableEvents } from '../events/durable.events';
import type { RecoveryOutcome, RunResult } from '../flow/flow.interfaces';
import { DurableEventsBridge } from './durable-events.bridge';
import { ToolLoopRunner } from './tool-loop.runner';
import { DurableFlowRunner } from './durable-flow.runner';
import {
  DURABLE_MODULE_EXTRAS,
  DURABLE_RESOLVED_OPTIONS,
  RESWEEP_MARGIN_MS,
  SUMMARY_RUN_IDS,
} from './durable.constants';
import { NestMessages } from './durable.messages';
import type { ResolvedDurableOptions } from './durable.providers';
import type { DurableModuleExtras } from './interfaces/durable-module-options.interface';
import { FlowRegistry } from './flow.registry';
import {
  RecoveredCalls,
  describeCalls,
  type RecoveryOutcomeKind,
  type RecoverySummary,
} from './recovery.log';

import { nestDurableLogger } from './nest-logger';
import { Takeover } from '../flow/runner/takeover';
import { queuesOf } from '../flow/runner/queues';
import { SCHEDULES_FLOW } from '../flow/schedules/schedule-record';

/**
 * Recovers every unfinished run of every discovered flow when the application boots (after every
 * provider, e.g. a TypeORM DataSource, is up), logging one line per run. It never throws: one run
 * that needs a decision does not stop the application from starting. Runs held by a live
 * worker's lease get one more look after the latest lease expires.
 *
 * Recovery runs in the background: `waitUntilRecovered()` resolves when the boot sweep is done.
 * On shutdown (`beforeApplicationShutdown`) it stops the sweeps and the takeover and drains every
 * runner (`FlowRunner.drain`, up to `drainMs`), before `DurableModule` closes a store it created
 * (`onApplicationShutdown`).
 * @publicApi
 */
@Injectable()
export class RecoveryOrchestrator
  implements OnApplicationBootstrap, BeforeApplicationShutdown
{
  private readonly logger = new Logger('DurableRecovery');
  private boot: Promise<void> = Promise.resolve();
  private resweepTimer?: NodeJS.Timeout;
  private takeover?: Takeover;
  /** Aborted on shutdown: the sweep starts no more recoveries. */
  private readonly stop = new AbortController();

  constructor(
    private readonly runner: DurableFlowRunner,
    private readonly flows: FlowRegistry,
    private readonly bridge: DurableEventsBridge,
    private readonly loops: ToolLoopRunner,
    @Inject(DURABLE_RESOLVED_OPTIONS)
    private readonly options: ResolvedDurableOptions,
    @Inject(DURABLE_MODULE_EXTRAS)
    private readonly extras: DurableModuleExtras,
    @Optional() private readonly events?: DurableEvents,
  ) {}

  onApplicationBootstrap(): void {
    // After @OnEvent() listeners are attached, so they see the recoveries; the takeover starts
    // once the boot sweep is done.
    this.boot = this.bridge
      .ready()
      .then(() =>
        this.extras.recoverOnBoot ? this.run('bootstrap') : undefined,
      )
      .then(() => this.declareSchedules())
      .then(() => this.startTakeover())
      // sweep() catches per flow and per run; this is the last line of defence.
      .catch((error: unknown) => this.logger.error(String(error)));
  }

  /**
   * Continuous takeover of every flow's and tool loop's due runs (the module's `takeover`), one
   * log line per run taken over, as the boot sweep logs them.
   */
  private startTakeover(): void {
    const settings = this.options.takeover;
    if (!settings || this.stop.signal.aborted || this.takeover) return;
    const runners = [this.runner.core];
    const sources = [
      ...this.flows
        .all()
        .map(({ flow }) => this.runner.core.takeoverSource(flow)),
      ...this.loops.all().flatMap((loop) => {
        try {
          runners.push(loop.core.runner);
          return [loop.core.runner.takeoverSource(loop.core.flow)];
        } catch (error) {
          // A loop that cannot be built (a tool name that is not registered) was reported by the
          // boot sweep and its callers; the other flows are still taken over.
          this.logger.error(
            NestMessages.sweepFailed(loop.name, asError(error)),
          );
          return [];
        }
      }),
    ];
    // The module's queues and each flow's own (its `@Flow` limits, or none).
    const named = new Map(this.options.queues);
    for (const { flow, queue } of this.flows.all())
      if (queue) named.set(flow.name, queue);
    const flows = this.flows.all().map(({ flow }) => flow);
    const queues = queuesOf(named, flows);
    const { schedules } = this.runner.core;
    this.takeover = new Takeover(
      this.options.store,
      [...sources, schedules.source],
      {
        ...settings,
        queues: () => [...queues, ...schedules.queues],
        owner: this.runner.core.workerId,
        onOutcome: (flow, [runId, outcome]) => {
          // A schedule's fired ticks are runs of their own flows, reported as those.
          if (flow === SCHEDULES_FLOW) return;
          void this.report(flow, runId, outcome as Outcome | Error, {
            retry: false,
          });
        },
      },
      nestDurableLogger('DurableTakeover'),
    );
    // An enqueue through this module's runner wakes the takeover at once; a run put to sleep (or
    // paused with a deadline) by it or a tool loop, at its time.
    for (const runner of runners) runner.wakeOnNewWork(this.takeover);
    this.takeover.start();
    new Logger('DurableTakeover').log(
      NestMessages.takeoverStarted(sources.length, settings.everyMs),
    );
  }

  /** Stores the `@DurableCron` schedules, in the background: a store down must not hold up takeover. */
  private declareSchedules(): void {
    const logger = new Logger('DurableSchedules');
    const firing = this.options.takeover !== false;
    void this.runner.declareSchedules(this.stop.signal, logger, firing);
  }

  /** Resolves when the boot sweep has finished (at once with `recoverOnBoot: false`). Never rejects. */
  waitUntilRecovered(): Promise<void> {
    return this.boot;
  }

  /**
   * Recovers every unfinished run of every discovered flow now (what the boot does), one flow
   * after another with `recoveryConcurrency` runs at a time. With `resweep`, runs held by a live
   * lease get one more look (a single unref'd timer) after the latest of their leases expires.
   */
  sweep(options: { resweep?: boolean } = {}): Promise<RecoverySummary> {
    return this.run('manual', options.resweep);
  }

  private async run(
    kind: 'bootstrap' | 'resweep' | 'manual',
    resweep = kind === 'bootstrap',
  ): Promise<RecoverySummary> {
    const summary: RecoverySummary = {
      recovered: [],
      needsDecision: [],
      held: [],
      elsewhere: [],
      accessDenied: [],
      failed: [],
      counts: {
        recovered: 0,
        needsDecision: 0,
        held: 0,
        elsewhere: 0,
        accessDenied: 0,
        failed: 0,
      },
    };
    let latestLease = 0;
    const flows = this.flows.all();
    const concurrency = this.options.recoveryConcurrency;
    // A shutdown aborts it: the sweeps start no more recoveries, and those in flight finish and
    // are reported (one log line per run) before the sweep returns.
    const signal = this.stop.signal;
    // Flows, then tool loops: each kind of run found by its name in the store. Outcomes are
    // streamed (recoverEach): memory stays flat however many runs there are.
    const sweeps: Sweep[] = [
      ...flows.map(({ flow }) => ({
        name: flow.name,
        recoverEach: () =>
          this.runner.core.recoverEach(flow, { concurrency, signal }),
      })),
      ...this.loops.all().map((loop) => ({
        name: loop.name,
        recoverEach: () => loop.recoverEach({ concurrency, signal }),
      })),
    ];
    this.loops.markSwept();
    // The calls each recovery replayed or ran again, for its log line.
    const calls = new RecoveredCalls(this.events);
    for (const { name, recoverEach } of sweeps) {
      if (this.stop.signal.aborted) break;
      try {
        for await (const [runId, outcome] of recoverEach()) {
          const kind = await this.report(name, runId, outcome, {
            calls,
            retry: resweep,
          });
          summary.counts[kind]++;
          if (summary[kind].length < SUMMARY_RUN_IDS) summary[kind].push(runId);
          if (outcome instanceof RunLeaseHeld)
            latestLease = Math.max(latestLease, outcome.until);
        }
      } catch (error) {
        this.logger.error(NestMessages.sweepFailed(name, asError(error)));
      }
    }
    calls.close();
    const runs = Object.values(summary.counts).reduce((n, c) => n + c, 0);
    // One line per sweep: the bootstrap's, and the re-sweep's labelled as such.
    this.logger.log(
      NestMessages.sweepDone(
        kind,
        flows.length,
        sweeps.length - flows.length,
        runs,
        summary.counts,
      ),
    );
    // With the takeover on, held runs are taken when they fall due; without it, one more look.
    if (
      resweep &&
      summary.counts.held &&
      !this.stop.signal.aborted &&
      !this.options.takeover
    ) {
      this.scheduleResweep(
        latestLease + RESWEEP_MARGIN_MS,
        summary.counts.held,
      );
    }
    return summary;
  }

  async beforeApplicationShutdown(): Promise<void> {
    this.stop.abort();
    if (this.resweepTimer) clearTimeout(this.resweepTimer);
    this.resweepTimer = undefined;
    // No more looks; every run driven here (a request's, a takeover's, a loop's) stops at its next
    // superstep boundary, stored and released, so another worker takes it over at once.
    const deadlineMs = this.options.drainMs;
    const [, ...left] = await Promise.all([
      this.takeover?.stop({ deadlineMs }),
      this.runner.core.drain({ deadlineMs }),
      ...this.loops.drain(deadlineMs),
    ]);
    this.logger.log(
      NestMessages.shutdown(left.reduce<number>((n, l) => n + (l ?? 0), 0)),
    );
  }

  /** The worker holding the run now (the one that won the race), if the store says. */
  private async ownerOf(runId: string): Promise<string | undefined> {
    try {
      return (await this.options.store.head(runId))?.owner;
    } catch {
      return undefined;
    }
  }

  private scheduleResweep(at: number, runs: number): void {
    if (this.resweepTimer) return;
    this.logger.log(NestMessages.resweep(at, runs));
    this.resweepTimer = setTimeout(
      () => {
        this.resweepTimer = undefined;
        void this.run('resweep').catch((error: unknown) =>
          this.logger.error(String(error)),
        );
      },
      Math.max(0, at - Date.now()),
    );
    this.resweepTimer.unref();
  }

  private async report(
    flow: string,
    runId: string,
    outcome: Outcome | Error,
    sweep: { calls?: RecoveredCalls; retry: boolean },
  ): Promise<RecoveryOutcomeKind> {
    const recovered = sweep.calls?.take(runId);
    if (!(outcome instanceof Error)) {
      const calls = recovered && describeCalls(recovered);
      if (outcome.status === 'paused')
        this.logger.warn(
          NestMessages.recoveredPaused(flow, runId, outcome.pending),
        );
      // Waiting for its time, as it should: nothing was recovered, nothing is wrong.
      else if (outcome.status === 'sleeping' && outcome.wakeAt !== undefined)
        this.logger.log(
          NestMessages.recoveredSleeping(flow, runId, outcome.wakeAt),
        );
      else if (outcome.status === 'failed')
        this.logger.warn(
          NestMessages.recoveredFailed(
            flow,
            runId,
            outcome.step,
            outcome.error,
            calls,
          ),
        );
      else
        this.logger.log(
          NestMessages.recovered(
            flow,
            runId,
            outcome.status,
            outcome.step,
            calls,
          ),
        );
      return 'recovered';
    }
    if (outcome instanceof RecoveryNeedsDecision) {
      this.logger.warn(NestMessages.needsDecision(flow, runId, outcome.calls));
      return 'needsDecision';
    }
    if (outcome instanceof RunLeaseHeld) {
      this.logger.log(
        NestMessages.leaseHeld(
          flow,
          runId,
          outcome.owner,
          outcome.until,
          sweep.retry && !this.stop.signal.aborted,
        ),
      );
      return 'held';
    }
    if (outcome instanceof CheckpointConflict) {
      // A lost race: another worker's write (its claim) came first. Not an error: nothing is lost.
      this.logger.log(
        NestMessages.lostRace(flow, runId, await this.ownerOf(runId)),
      );
      return 'elsewhere';
    }
    if (outcome instanceof RunAccessDenied) {
      this.logger.warn(NestMessages.accessDenied(flow, runId, outcome.message));
      return 'accessDenied';
    }
    if (this.stop.signal.aborted)
      this.logger.warn(NestMessages.interrupted(flow, runId));
    else this.logger.error(NestMessages.failed(flow, runId, outcome));
    return 'failed';
  }
}

/** What a recovery gives, for a flow's run or a tool loop's (a loop does not sleep). */
type Outcome = Pick<
  RunResult<object>,
  'status' | 'step' | 'error' | 'pending' | 'wakeAt'
>;

interface Sweep {
  name: string;
  recoverEach: () => AsyncIterable<RecoveryOutcome<Outcome>>;
}
