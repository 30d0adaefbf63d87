import { Inject, Injectable, type Logger } from '@nestjs/common';
import { CheckpointNotFound, FlowError } from '../errors';
import { DurableEvents } from '../events/durable.events';
import type { CheckpointStore } from '../exec/checkpoints/checkpoint-store';
import type { RunIdentity } from '../exec/durable/records';
import { Executor } from '../exec/executor';
import type { Flow as CoreFlow } from '../flow/flow.builder';
import type {
  RecoverAllOptions,
  RecoverOptions,
  RecoveryOutcome,
  ResumeDecision,
  ResumeOptions,
  RunOptions,
  RunResult,
} from '../flow/flow.interfaces';
import { FlowRunner as CoreFlowRunner } from '../flow/runner/flow-runner';
import type { ResolveRequest } from '../flow/runner/resolve';
import type { EnqueueOptions, EnqueueResult } from '../flow/runner/queues';
import type { Scheduler } from '../flow/schedules/scheduler';
import { checkRunId } from '../flow/run-id';
import { DURABLE_RESOLVED_OPTIONS } from './durable.constants';
import { NestMessages } from './durable.messages';
import type { ResolvedDurableOptions } from './durable.providers';
import { FlowRegistry, type FlowRef } from './flow.registry';
import type { StreamEntry } from '../exec/durable/stream-entries';
import type { StreamReadOptions } from '../flow/runner/run-stream';

/**
 * Runs the application's `@Flow()` classes durably. Exported from 'agent-adapter/nest' as
 * `FlowRunner`: inject it by type (`constructor(private readonly runner: FlowRunner)`).
 * It is the framework-free `FlowRunner` (available as `.core`) over the module's store, key,
 * executor and events, taking flows by class or name.
 * @publicApi
 */
@Injectable()
export class DurableFlowRunner {
  /** The framework-free runner doing the work. */
  readonly core: CoreFlowRunner;

  constructor(
    @Inject(DURABLE_RESOLVED_OPTIONS) options: ResolvedDurableOptions,
    executor: Executor,
    events: DurableEvents,
    private readonly flows: FlowRegistry,
  ) {
    this.core = new CoreFlowRunner(executor, { ...options.runner, events });
  }

  /** The store runs are kept in. */
  get store(): CheckpointStore {
    return this.core.store;
  }

  /** This worker's id in run leases. */
  get workerId(): string {
    return this.core.workerId;
  }

  /**
   * Starts a run and drives it until it ends, pauses, or this worker loses it. The input is
   * validated by the flow's state class first (`InvalidFlowState`, every violation named;
   * nothing is stored).
   */
  start<S extends object = Record<string, unknown>>(
    flow: FlowRef,
    input: Partial<S>,
    options: RunOptions = {},
  ): Promise<RunResult<S>> {
    return this.core.run(this.flow<S>(flow), input, options);
  }

  /**
   * Stores a run on a queue and returns its id at once (see the core `FlowRunner.enqueue`): a
   * worker's takeover starts it under the queue's limits. The input is validated first
   * (`InvalidFlowState`; nothing is stored). With a `dedupeKey` an unfinished run holds, that
   * run's id comes back (`created: false`).
   */
  enqueue<S extends object = Record<string, unknown>>(
    flow: FlowRef,
    input: Partial<S>,
    options: EnqueueOptions = {},
  ): Promise<EnqueueResult> {
    return this.core.enqueue(this.flow<S>(flow), input, options);
  }

  /** Goes on with a run from its latest checkpoint (see the core `FlowRunner.recover`). */
  recover<S extends object = Record<string, unknown>>(
    flow: FlowRef,
    runId: string,
    options: RecoverOptions = {},
  ): Promise<RunResult<S>> {
    return this.core.recover(this.flow<S>(flow), runId, options);
  }

  /**
   * Says what calls in doubt really did, then recovers the run (see the core `FlowRunner.resolve`):
   * a call that ran is replayed with the outcome given and never run, one that did not run runs once.
   */
  resolve<S extends object = Record<string, unknown>>(
    flow: FlowRef,
    runId: string,
    request: ResolveRequest,
    options: { ctx?: RunIdentity } = {},
  ): Promise<RunResult<S>> {
    return this.core.resolve(this.flow<S>(flow), runId, request, options);
  }

  /**
   * Decides the call a paused run waits for, and goes on (see the core `FlowRunner.resume`): of
   * two resumes at once one wins, the other gets `CheckpointConflict`.
   */
  resume<S extends object = Record<string, unknown>>(
    flow: FlowRef,
    runId: string,
    decision: ResumeDecision,
    options: ResumeOptions = {},
  ): Promise<RunResult<S>> {
    return this.core.resume(this.flow<S>(flow), runId, decision, options);
  }

  /** Recovers every unfinished run of the flow: run id → result or error (never throws per run). */
  recoverAll<S extends object = Record<string, unknown>>(
    flow: FlowRef,
    options: RecoverAllOptions = {},
  ): Promise<Map<string, RunResult<S> | Error>> {
    return this.core.recoverAll(this.flow<S>(flow), options);
  }

  /**
   * Recovers every unfinished run of the flow, yielding `[runId, result | error]` as each settles,
   * in memory that does not grow with the number of runs (see the core `FlowRunner.recoverEach`).
   */
  recoverEach<S extends object = Record<string, unknown>>(
    flow: FlowRef,
    options: RecoverAllOptions = {},
  ): AsyncGenerator<RecoveryOutcome<RunResult<S>>, void, undefined> {
    return this.core.recoverEach(this.flow<S>(flow), options);
  }

  /**
   * A run's latest state, whatever its flow (found from the run's stored head). With `flow`, a
   * run of another flow (or of a tool loop) on the same store is `CheckpointNotFound`, as an
   * unknown id: `GET /orders/:id` given a support conversation's id is a 404, not a 500.
   */
  async get<S extends object = Record<string, unknown>>(
    runId: string,
    options: { ctx?: RunIdentity; flow?: FlowRef } = {},
  ): Promise<RunResult<S>> {
    checkRunId(runId);
    const expected =
      options.flow === undefined ? undefined : this.flow(options.flow).name;
    const head = await this.core.store.head(runId);
    if (!head || (expected !== undefined && head.flow !== expected))
      throw new CheckpointNotFound(runId);
    const found = this.flows.get(head.flow);
    if (!found)
      throw new FlowError(
        NestMessages.runOfUnknownFlow(runId, head.flow),
        runId,
      );
    return this.core.get(
      found.flow as unknown as CoreFlow<S>,
      runId,
      options.ctx === undefined ? {} : { ctx: options.ctx },
    );
  }

  /**
   * The run's stream (what its nodes and tools published), each entry once, in order, following
   * the run until it ends; see the core `FlowRunner.stream`, and `streamEvents` for an `@Sse()`
   * route.
   */
  stream(
    flow: FlowRef,
    runId: string,
    options: StreamReadOptions = {},
  ): AsyncGenerator<StreamEntry, void, undefined> {
    return this.core.stream(this.flow(flow), runId, options);
  }

  /** The core `Flow` built from a `@Flow()` class (or found by name). */
  flow<S extends object = Record<string, unknown>>(ref: FlowRef): CoreFlow<S> {
    const found = this.flows.get(ref);
    if (!found) {
      const label =
        typeof ref === 'string' ? `Flow "${ref}"` : `Class ${ref.name}`;
      throw new FlowError(NestMessages.unknownFlow(label, this.flows.names()));
    }
    return found.flow as unknown as CoreFlow<S>;
  }

  /** Names of every discovered flow. */
  flowNames(): string[] {
    return this.flows.names();
  }

  /**
   * Durable schedules: every stored one (`list()`, with its next tick), `pause(name)` and
   * `resume(name)` on every worker at once. `@DurableCron` declares them.
   */
  get schedules(): Scheduler {
    return this.core.schedules;
  }

  /**
   * Stores every `@DurableCron` schedule (the module does it at bootstrap, before its takeover
   * starts). A store that fails is asked again every 5 s until it works or `signal` aborts; until
   * then this worker fires none of them. @internal
   */
  async declareSchedules(
    signal: AbortSignal,
    logger: Pick<Logger, 'error' | 'warn'>,
    firing: boolean,
  ): Promise<void> {
    const declared = this.flows
      .all()
      .flatMap(({ flow, schedules }) =>
        (schedules ?? []).map((s) => ({ flow, ...s })),
      );
    const names = declared
      .map((d) => `"${d.options.name ?? d.flow.name}"`)
      .join(', ');
    if (declared.length > 0 && !firing)
      logger.warn(NestMessages.cronWithoutTakeover(names));
    while (declared.length > 0 && !signal.aborted) {
      try {
        for (const { flow, expression, options } of declared)
          await this.core.schedule(flow, expression, options);
        return;
      } catch (error) {
        logger.error(NestMessages.cronDeclareFailed(names, String(error)));
        await new Promise((resolve) => setTimeout(resolve, 5_000).unref());
      }
    }
  }

  /** Stops renewing leases (called on shutdown): runs in flight here become recoverable elsewhere. */
  close(): void {
    this.core.close();
  }
}
