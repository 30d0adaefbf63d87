import { Messages } from '../errors/messages';
import {
  asError,
  ChatModelError,
  DurableSetupError,
  InvalidToolArguments,
  MaxStepsExceeded,
  CheckpointConflict,
  CheckpointNotFound,
  RunAccessDenied,
  ToolFailed,
  ToolTimeout,
} from '../errors';
import { canonicalJson } from '../exec/durable/canonical-json';
import type { RunIdentity } from '../exec/durable/records';
import { Executor } from '../exec/executor';
import type { ToolRegistry } from '../exec/tool.registry';
import { END } from '../flow/call-node';
import { Flow } from '../flow/flow.builder';
import type {
  NodeContext,
  RecoverAllOptions,
  RecoverOptions,
  RecoveryOutcome,
  RunResult,
} from '../flow/flow.interfaces';
import { FlowRunner } from '../flow/runner/flow-runner';
import type { ResolveRequest } from '../flow/runner/resolve';
import {
  chatTools,
  checkMessage,
  checkMessages,
  type ChatMessage,
  type ChatModel,
  type ToolCall,
  type ToolMessage,
} from './chat-model';
import {
  DEFAULT_MAX_STEPS,
  type ToolLoopOptions,
  type ToolLoopPending,
  type ToolLoopResult,
  type ToolLoopRunOptions,
  type ToolLoopState,
} from './tool-loop.interfaces';
import {
  answered,
  contentOf,
  excerpt,
  failed,
  loopResult,
  toolCallsOf,
} from './tool-messages';
import type { StreamEntry } from '../exec/durable/stream-entries';
import type { StreamReadOptions } from '../flow/runner/run-stream';

export { DEFAULT_MAX_STEPS };
export type {
  ToolLoopOptions,
  ToolLoopPending,
  ToolLoopResult,
  ToolLoopRunOptions,
  ToolLoopState,
};

/**
 * A durable LLM tool loop, built on the flow engine: a flow of two nodes, `model` (asks the model,
 * appends its reply) and `tools` (runs every tool call of that reply concurrently through the
 * executor, appends their results), each superstep ending in a checkpoint. So the history is saved
 * after each model reply (its tool calls pinned) and after the tool results; recovery, fencing,
 * approvals and tamper checks are the flow engine's.
 *
 * A model call is not a tool call: a crash while the model answers makes it ask again on recovery
 * (the reply was not saved). A tool call never silently runs twice: finished calls replay, calls in
 * doubt of non-idempotent tools stop recovery with `RecoveryNeedsDecision`.
 * @publicApi
 */
export class ToolLoop {
  readonly flow: Flow<ToolLoopState>;
  readonly runner: FlowRunner;
  /** The `stream` option: messages are published to the run's stream. */
  private readonly streams: boolean;

  constructor(
    readonly model: ChatModel,
    readonly registry: ToolRegistry,
    options: ToolLoopOptions = {},
  ) {
    if (typeof model?.complete !== 'function')
      throw new DurableSetupError(Messages.loopNeedsModel());
    const { name, stream, ...runnerOptions } = options;
    if (stream !== undefined && typeof stream !== 'boolean')
      throw new DurableSetupError(Messages.loopStreamOption(stream));
    this.streams = stream === true;
    this.runner = new FlowRunner(new Executor(registry), runnerOptions);
    // maxSteps (in the state) is the loop's limit, so the per-node visit limit is out of the way.
    this.flow = new Flow<ToolLoopState>(name ?? 'tool-loop', {
      maxVisits: Number.MAX_SAFE_INTEGER,
      kind: 'loop',
    })
      .node('model', (s, ctx) => this.modelNode(s, ctx))
      .node('tools', (s, ctx) => this.toolsNode(s, ctx));
    if (this.streams) {
      // Every reply goes to `tools`, which publishes it once it is saved (the answer too).
      this.flow
        .edge('model', 'tools')
        .route('tools', (s) => (answered(s) ? END : 'model'), ['model', END]);
    } else {
      this.flow
        .route('model', (s) => (toolCallsOf(s).length ? 'tools' : END), [
          'tools',
          END,
        ])
        .edge('tools', 'model');
    }
    this.flow.compile();
  }

  /**
   * Starts a run with `messages` and drives it until the model answers without tool calls (`done`),
   * a tool waits for an approval (`paused`), or it fails.
   *
   * With the id of a run that exists, nothing new is started: `messages` must be the ones that run
   * started with (or empty), else `CheckpointConflict`. Then a paused run resumes with
   * `decision` (without one it is returned as it is); a finished run (done or failed) is returned
   * as it is (so a retried request gets the same answer and calls nothing); a running run — driven
   * elsewhere, or cut short by a crash — is `CheckpointConflict`: recover it with `recover`.
   */
  async run(
    messages: readonly ChatMessage[],
    options: ToolLoopRunOptions = {},
  ): Promise<ToolLoopResult> {
    const given = checkMessages(messages);
    const maxSteps = options.maxSteps ?? DEFAULT_MAX_STEPS;
    if (!Number.isSafeInteger(maxSteps) || maxSteps < 1) {
      throw new TypeError(Messages.loopMaxSteps(options.maxSteps));
    }
    const { runId, ctx, decision } = options;
    if (runId !== undefined) {
      const existing = await this.runner
        .get(this.flow, runId, { ...(ctx && { ctx }) })
        .catch((error: unknown) => {
          if (error instanceof CheckpointNotFound) return undefined;
          // Someone else's ctx with a decision (an approver, giving no messages): only the
          // runner's canResume policy may let them in, and resume asks it.
          if (
            error instanceof RunAccessDenied &&
            decision &&
            ctx &&
            given.length === 0
          )
            return 'resume' as const;
          throw error;
        });
      if (existing === 'resume') {
        return loopResult(
          await this.runner.resume(this.flow, runId, decision!, {
            ctx: ctx!,
            ...(options.rerunInDoubt && { rerunInDoubt: true }),
          }),
        );
      }
      if (existing) return this.continue(existing, given, options);
    }
    if (decision) throw new CheckpointNotFound(runId ?? '(no run id)');
    if (given.length === 0) throw new TypeError(Messages.loopNoMessages());
    const r = await this.runner.run(
      this.flow,
      { messages: given, modelCalls: 0, maxSteps, start: given.length },
      {
        ...(runId !== undefined && { runId }),
        ...(ctx && { ctx }),
        ...(options.wait === false && { wait: false }),
      },
    );
    return loopResult(r);
  }

  /**
   * Goes on with a run after a crash, from its latest checkpoint: a saved reply's tool calls run
   * without asking the model again, finished calls replay, calls in doubt of non-idempotent tools
   * fail closed (`RecoveryNeedsDecision`) unless `rerunInDoubt`. A paused run is returned as it is.
   */
  async recover(
    runId: string,
    options: RecoverOptions = {},
  ): Promise<ToolLoopResult> {
    return loopResult(await this.runner.recover(this.flow, runId, options));
  }

  /**
   * Says what calls in doubt really did, then goes on (see `FlowRunner.resolve`): a call that ran
   * is replayed with the outcome given, one that did not run runs once.
   */
  async resolve(
    runId: string,
    request: ResolveRequest,
    options: { ctx?: RunIdentity } = {},
  ): Promise<ToolLoopResult> {
    return loopResult(
      await this.runner.resolve(this.flow, runId, request, options),
    );
  }

  /**
   * Recovers every unfinished run of this loop (for a worker on startup): run id → result or error.
   * For many runs, `recoverEach` gives the same outcomes one at a time in bounded memory.
   */
  async recoverAll(
    options: RecoverAllOptions = {},
  ): Promise<Map<string, ToolLoopResult | Error>> {
    const out = new Map<string, ToolLoopResult | Error>();
    for await (const [runId, outcome] of this.recoverEach(options))
      out.set(runId, outcome);
    return out;
  }

  /**
   * `recoverAll` as a stream: yields each run's outcome as it settles, holding at most one page of
   * listed runs and `concurrency` recoveries at a time (see `FlowRunner.recoverEach`).
   */
  recoverEach(
    options: RecoverAllOptions = {},
  ): AsyncGenerator<RecoveryOutcome<ToolLoopResult>, void, undefined> {
    return this.results(this.runner.recoverEach(this.flow, options));
  }

  private async *results(
    outcomes: AsyncIterable<RecoveryOutcome<RunResult<ToolLoopState>>>,
  ): AsyncGenerator<RecoveryOutcome<ToolLoopResult>, void, undefined> {
    for await (const [runId, r] of outcomes)
      yield [runId, r instanceof Error ? r : loopResult(r)];
  }

  /**
   * The run's stream (with the `stream` option: its messages as they are saved), each entry once,
   * in order; see `FlowRunner.stream`.
   */
  stream(
    runId: string,
    options: StreamReadOptions = {},
  ): AsyncGenerator<StreamEntry, void, undefined> {
    return this.runner.stream(this.flow, runId, options);
  }

  /** The run's latest saved state, without running anything. */
  async get(
    runId: string,
    options: { ctx?: RunIdentity } = {},
  ): Promise<ToolLoopResult> {
    return loopResult(await this.runner.get(this.flow, runId, options));
  }

  /** Stops lease renewal (for shutdown); see `FlowRunner.close`. */
  close(): void {
    this.runner.close();
  }

  private async continue(
    existing: RunResult<ToolLoopState>,
    given: ChatMessage[],
    options: ToolLoopRunOptions,
  ): Promise<ToolLoopResult> {
    const { runId } = existing;
    const started = existing.state.messages.slice(0, existing.state.start);
    if (given.length && canonicalJson(given) !== canonicalJson(started)) {
      throw new CheckpointConflict(Messages.loopOtherMessages(runId), runId);
    }
    if (options.decision) {
      // resume checks the run is paused (else CheckpointConflict) and seals the decision first.
      const r = await this.runner.resume(this.flow, runId, options.decision, {
        ...(options.ctx && { ctx: options.ctx }),
        ...(options.rerunInDoubt && { rerunInDoubt: true }),
      });
      return loopResult(r);
    }
    if (existing.status === 'running') {
      throw new CheckpointConflict(Messages.loopRunning(runId), runId);
    }
    return loopResult(existing);
  }

  private async modelNode(
    state: ToolLoopState,
    ctx: NodeContext,
  ): Promise<Partial<ToolLoopState>> {
    if (state.modelCalls >= state.maxSteps)
      throw new MaxStepsExceeded(ctx.runId, state.maxSteps);
    const answer = await this.model.complete({
      messages: state.messages,
      tools: chatTools(this.registry),
    });
    let reply: ChatMessage;
    try {
      reply = checkMessage(answer, 'reply');
    } catch (error) {
      throw new ChatModelError(
        Messages.replyNotMessage(asError(error).message),
      );
    }
    if (reply.role !== 'assistant') {
      throw new ChatModelError(Messages.replyRole(reply.role));
    }
    return {
      messages: [...state.messages, reply],
      modelCalls: state.modelCalls + 1,
    };
  }

  private async toolsNode(
    state: ToolLoopState,
    ctx: NodeContext,
  ): Promise<Partial<ToolLoopState> | undefined> {
    const calls = toolCallsOf(state);
    if (this.streams)
      await ctx.publish(state.messages[state.messages.length - 1]!);
    if (!calls.length) return undefined;
    // Every call starts now, in the reply's order (which fixes each one's index in the call log,
    // so a recovery replays each on its own); the results are appended in that order too.
    const settled = await Promise.allSettled(
      calls.map((call) => this.answer(call, ctx)),
    );
    const results: ToolMessage[] = [];
    for (const s of settled) {
      // Not a tool's own failure (a pause for approval, a fenced worker, ...): the engine's.
      if (s.status === 'rejected') throw s.reason;
      results.push(s.value);
    }
    if (this.streams) for (const r of results) void ctx.publish(r);
    return { messages: [...state.messages, ...results] };
  }

  /**
   * One tool call's result message; a tool's failure is a result the model can read. Every call of
   * the reply has its index in the call log at its position in the reply: a call answered without
   * running (bad arguments, a tool this deployment does not have) spends its index, so a recovery
   * on a worker with another set of tools still replays each finished call as itself.
   */
  private answer(call: ToolCall, ctx: NodeContext): Promise<ToolMessage> {
    if (call.invalidArguments !== undefined) {
      ctx.skipCall();
      return Promise.resolve(
        failed(
          call,
          `the arguments are not a JSON object (${excerpt(call.invalidArguments)}). Call "${call.name}" again with a JSON object of arguments.`,
        ),
      );
    }
    if (!this.registry.has(call.name)) {
      ctx.skipCall();
      const names = this.registry.list().map((t) => t.name);
      return Promise.resolve(
        failed(
          call,
          `there is no tool named "${call.name}". The tools are: ${names.join(', ') || '(none)'}.`,
        ),
      );
    }
    return ctx.call(call.name, call.arguments).then(
      (value): ToolMessage => ({
        role: 'tool',
        toolCallId: call.id,
        name: call.name,
        content: contentOf(value),
      }),
      (error: unknown) => {
        // A non-idempotent call that timed out may still be running: it is in doubt, and the
        // model must not be the one to decide to call it again. The run fails closed instead.
        if (
          error instanceof ToolTimeout &&
          !this.registry.get(call.name)?.idempotent
        )
          throw error;
        // Refused by the tool's argument check (nothing ran, nothing logged): the model may retry.
        if (error instanceof InvalidToolArguments)
          return failed(call, error.message);
        if (error instanceof ToolFailed) {
          return failed(
            call,
            error.errorName === 'ToolDenied'
              ? error.message
              : `"${call.name}" failed (${error.errorName}): ${error.message}`,
          );
        }
        throw error;
      },
    );
  }
}
