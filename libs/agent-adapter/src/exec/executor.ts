import { createHash } from 'node:crypto';
import {
  FlowError,
  RunPaused,
  ToolDenied,
  ToolFailed,
  ToolTimeout,
  UnsealableValue,
} from '../errors';
import { checkVerdict, type ApprovalPort } from './approvals';
import {
  canonical,
  type CanonicalText,
  type Json,
} from './durable/canonical-json';
import type {
  CallDraft,
  CallIdentity,
  CallOutcome,
  SyncDecision,
} from './durable/records';
import { nodeStorage, toolStorage, type NodeScope } from './call-context';
import { traced, type SpanLike } from '../observability/tracing';
import { deriveIdempotencyKey, toolScopeFor } from './idempotency-key';
import {
  isDelay,
  type ToolDefinition,
  type ToolRegistry,
} from './tool.registry';

type Base = CallIdentity & { argsHash: string };

/**
 * The only way a tool runs inside a run. Each call is logged `started` before it runs and `done`
 * (or `unrecordable`) after; after a recovery a finished call with the same tool and arguments
 * replays its stored outcome instead of running. The tool's policies (approval, retry, timeout)
 * are applied here, each step logged in the same call log.
 * @publicApi
 */
export class Executor {
  constructor(readonly registry: ToolRegistry) {}

  /** Runs (or replays) one call of `tool` made by the node of `scope`. */
  call(scope: NodeScope, tool: string, args: unknown): Promise<unknown> {
    const step = scope.step;
    if (step.closed) {
      const late = Promise.reject(
        new FlowError(
          `Node "${scope.node}" called tool "${tool}" after its superstep ended. Await every ctx.call before the node returns.`,
          step.runId,
        ),
      );
      // Handled here too: an un-awaited late call must not crash the process (unhandled rejection).
      late.catch(() => undefined);
      return late;
    }
    const call = traced(
      'agent-adapter.tool',
      {
        'agent_adapter.run_id': step.runId,
        'agent_adapter.flow': step.flow,
        'agent_adapter.superstep': step.superstep,
        'agent_adapter.node': scope.node,
        'agent_adapter.tool': tool,
      },
      (span) => this.run(scope, tool, args, span),
      (error) => !(error instanceof RunPaused),
    );
    step.inflight.add(call);
    const settled = () => void step.inflight.delete(call);
    void call.then(settled, settled);
    return call;
  }

  private async run(
    scope: NodeScope,
    tool: string,
    args: unknown,
    span?: SpanLike,
  ): Promise<unknown> {
    const step = scope.step;
    const definition = this.registry.get(tool);
    if (!definition) {
      throw new FlowError(
        `Node "${scope.node}" called tool "${tool}", which is not registered. Register it on the ToolRegistry the Executor was given.`,
        step.runId,
      );
    }
    const identity: CallIdentity = {
      node: scope.node,
      index: scope.nextIndex++,
      tool,
    };
    // Encoded once: the hash, the records and every copy handed out come from this text.
    const argsText = canonical(args ?? null, `${tool}(args)`);
    const argsHash = createHash('sha256')
      .update(argsText.text)
      .digest('base64url');

    span?.setAttribute('agent_adapter.call_index', identity.index);
    const prior = step.replay?.lookup(identity);
    if (prior?.kind === 'done' && prior.argsHash === argsHash) {
      step.replayed.push(identity);
      span?.setAttribute('agent_adapter.replayed', true);
      return deliver(tool, step.runId, prior.outcome, true);
    }
    if (prior?.kind === 'done') step.unreplayed.push(identity);
    if (prior?.kind === 'inDoubt') {
      step.rerun.push(identity);
      span?.setAttribute('agent_adapter.rerun', true);
    }

    if (step.log.failure !== undefined) throw step.log.failure;
    const base: Base = { ...identity, argsHash };
    const approval = needsApproval(definition, scope, identity, argsText);
    const decision = approval
      ? step.decisions?.find(
          (d) =>
            d.node === identity.node &&
            d.index === identity.index &&
            d.tool === tool &&
            d.argsHash === argsHash,
        )
      : undefined;
    // A superstep that is pausing for an approval starts nothing more, except a call whose
    // decision is already sealed (it must be spent now, or it would be asked for again).
    if (step.paused && !decision) throw new RunPaused(step.runId, tool);
    if (approval && !decision && step.approvals) {
      return this.approveNow(
        step.approvals,
        definition,
        scope,
        identity,
        base,
        argsText,
      );
    }
    if (approval && !decision) {
      // Nothing ran: the call is logged `pending` (with the checkpoint that pauses the run). A
      // decision covers one call with these exact arguments; changed arguments ask again.
      const args = argsText.value();
      step.log.finished(step.superstep, {
        ...base,
        phase: 'pending',
        args,
        reason: 'awaiting approval',
        at: Date.now(),
      });
      step.paused ??= { ...identity, args, argsHash };
      throw new RunPaused(step.runId, tool);
    }
    if (decision && !decision.approved) {
      // Denied: recorded as the call's outcome, so a recovery gives the node the same answer.
      const denied = deniedOutcome(tool, decision);
      step.log.finished(step.superstep, {
        ...base,
        phase: 'done',
        outcome: denied,
        at: Date.now(),
      });
      return deliver(tool, step.runId, denied, false);
    }
    return this.execute(definition, scope, identity, base, argsText);
  }

  /**
   * Asks a synchronous approval port. `approving` is stored before the port is asked (a crash
   * while it decides leaves the call in doubt); the decision is logged before the tool runs: in
   * the `started` record of an approved call, in the `done` record of a denied one.
   */
  private async approveNow(
    port: ApprovalPort,
    definition: ToolDefinition,
    scope: NodeScope,
    identity: CallIdentity,
    base: Base,
    argsText: CanonicalText,
  ): Promise<unknown> {
    const step = scope.step;
    const tool = definition.name;
    await step.log.started(step.superstep, {
      ...base,
      phase: 'approving',
      args: argsText,
      at: Date.now(),
    });
    let decision: SyncDecision;
    let runArgs = argsText;
    try {
      const request = {
        runId: step.runId,
        flow: step.flow,
        node: identity.node,
        index: identity.index,
        tool,
        args: argsText.value(),
        identity: { ...step.identity },
        requestId: deriveIdempotencyKey(
          step.ring,
          step.idemKid,
          step.runId,
          step.incarnation,
          step.superstep,
          identity,
          'agent-adapter approval request',
        ),
      };
      // Outside the node's scope, like a tool: a decorated tool the port calls stays plain.
      const verdict = checkVerdict(
        tool,
        await nodeStorage.exit(() => port.decide(request)),
      );
      if (verdict.approved && verdict.args !== undefined) {
        runArgs = canonical(verdict.args, `${tool}(approved args)`);
      }
      decision = {
        approved: verdict.approved,
        ...(verdict.by !== undefined && { by: verdict.by }),
        ...(verdict.reason !== undefined && { reason: verdict.reason }),
        ...(runArgs.text !== argsText.text && { edited: true }),
      };
    } catch (error) {
      // The port failed: the tool did not run. Sealed as the call's outcome, like a tool's error.
      const e = error instanceof Error ? error : new Error(String(error));
      const failed: CallOutcome = {
        ok: false,
        error: {
          name: e.name,
          message: `the approval port failed for "${tool}": ${e.message}`,
        },
      };
      step.log.finished(step.superstep, {
        ...base,
        phase: 'done',
        outcome: failed,
        at: Date.now(),
      });
      return deliver(tool, step.runId, failed, false, error);
    }
    if (!decision.approved) {
      const denied = deniedOutcome(tool, decision);
      step.log.finished(step.superstep, {
        ...base,
        phase: 'done',
        outcome: denied,
        decision,
        at: Date.now(),
      });
      return deliver(tool, step.runId, denied, false);
    }
    return this.execute(definition, scope, identity, base, runArgs, decision);
  }

  /**
   * Runs the tool: each attempt logged `started` (stored before it runs), the final outcome
   * logged once. An attempt that threw (or, for an idempotent tool, timed out) is tried again
   * while the tool's retry policy allows; the next `started` carries the error it threw.
   */
  private async execute(
    definition: ToolDefinition,
    scope: NodeScope,
    identity: CallIdentity,
    base: Base,
    argsText: CanonicalText,
    decision?: SyncDecision,
  ): Promise<unknown> {
    const step = scope.step;
    const tries = definition.retry?.attempts ?? 1;
    let previous: { name: string; message: string } | undefined;
    for (let attempt = 1; ; attempt++) {
      await step.log.started(step.superstep, {
        ...base,
        phase: 'started',
        args: argsText,
        ...(decision && attempt === 1 && { decision }),
        ...(previous && { attempt, previous }),
        at: Date.now(),
      });
      let outcome = await this.invoke(definition, scope, identity, argsText);
      if (
        !outcome.sealed.ok &&
        outcome.unrecordable === undefined &&
        attempt < tries
      ) {
        const wait = backoff(definition, attempt, outcome.sealed.error);
        if (typeof wait === 'number') {
          previous = outcome.sealed.error;
          if (wait > 0) await sleep(wait);
          continue;
        }
        outcome = { sealed: wait, cause: outcome.cause };
      }
      step.log.finished(step.superstep, record(base, outcome, attempt));
      return deliver(
        definition.name,
        step.runId,
        outcome.sealed,
        false,
        outcome.cause,
        outcome.value,
      );
    }
  }

  /** One attempt: the handler, with the tool's timeout if it has one. */
  private async invoke(
    definition: ToolDefinition,
    scope: NodeScope,
    identity: CallIdentity,
    argsText: CanonicalText,
  ): Promise<Invoked> {
    const toolScope = toolScopeFor(scope.step, definition.name, identity);
    try {
      // The tool gets its own copy of exactly the logged arguments, and runs outside the node's
      // scope: tools it calls itself are plain calls, so replaying it cannot shift call indexes.
      // A handler that throws synchronously fails the attempt like one that rejects.
      const handle = () =>
        nodeStorage.exit(() =>
          toolStorage.run(toolScope, () =>
            definition.handler(argsText.value()),
          ),
        );
      const ms = definition.timeoutMs;
      let value: unknown;
      if (ms === undefined) {
        // A synchronous handler's value is used as it is: no promise to wrap and await.
        const returned = handle();
        value = isThenable(returned) ? await returned : returned;
      } else {
        value = await within(new Promise((resolve) => resolve(handle())), ms);
      }
      if (value === TIMED_OUT) return timedOut(definition, ms!);
      try {
        // Encoded here, once: the `done` record seals this text, whatever the node does with the
        // value it gets.
        if (value === undefined) return { sealed: { ok: true }, value };
        const text = canonical(value, `${definition.name}(result)`);
        return { sealed: { ok: true, value: value as Json }, value, text };
      } catch (error) {
        const reason =
          error instanceof UnsealableValue ? error.message : String(error);
        return { sealed: { ok: true }, value, unrecordable: reason };
      }
    } catch (error) {
      const e = error instanceof Error ? error : new Error(String(error));
      return {
        sealed: { ok: false, error: { name: e.name, message: e.message } },
        cause: error,
      };
    }
  }
}

interface Invoked {
  sealed: CallOutcome;
  value?: unknown;
  /** The value's canonical text (a successful result that can be sealed). */
  text?: CanonicalText;
  cause?: unknown;
  /**
   * Why the outcome cannot be sealed as the call's result (an unsealable value, or a timeout of a
   * tool that may still be running): the call is recorded `unrecordable`, i.e. in doubt.
   */
  unrecordable?: string;
}

const TIMED_OUT: unique symbol = Symbol('timed out');

function isThenable(v: unknown): v is PromiseLike<unknown> {
  return (
    (typeof v === 'object' || typeof v === 'function') &&
    v !== null &&
    typeof (v as { then?: unknown }).then === 'function'
  );
}

/** The attempt's value, or TIMED_OUT after `ms`. The attempt is not stopped. */
function within<T>(
  work: Promise<T>,
  ms: number,
): Promise<T | typeof TIMED_OUT> {
  // An abandoned attempt that fails later must not be an unhandled rejection.
  work.catch(() => undefined);
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<typeof TIMED_OUT>((resolve) => {
    timer = setTimeout(() => resolve(TIMED_OUT), ms);
  });
  return Promise.race([work, timeout]).finally(() => clearTimeout(timer));
}

/**
 * A timeout: the tool may still be running. An idempotent tool's call seals it as its error (a
 * rerun would be harmless); any other tool's call is in doubt, so it is never retried, and a
 * recovery of the superstep stops for a decision rather than replay an outcome nobody knows.
 */
function timedOut(definition: ToolDefinition, ms: number): Invoked {
  const sealed: CallOutcome = {
    ok: false,
    error: {
      name: 'ToolTimeout',
      message: `"${definition.name}" did not finish within ${ms} ms (timeoutMs); it may still be running`,
    },
  };
  return definition.idempotent
    ? { sealed }
    : {
        sealed,
        unrecordable: `timed out after ${ms} ms; it may still be running`,
      };
}

/**
 * Milliseconds to wait after `attempt` failed, or (a backoff function that threw or returned a
 * bad value) the TypeError that ends the call instead.
 */
function backoff(
  definition: ToolDefinition,
  attempt: number,
  failed: { name: string; message: string },
): number | CallOutcome {
  const policy = definition.retry?.backoff ?? 0;
  let ms: unknown;
  try {
    ms = typeof policy === 'number' ? policy : policy(attempt);
  } catch (error) {
    ms = error instanceof Error ? `an error (${error.message})` : error;
  }
  if (isDelay(ms)) return ms;
  return {
    ok: false,
    error: {
      name: 'TypeError',
      message: `Tool "${definition.name}": retry.backoff(${attempt}) gave ${typeof ms === 'string' || typeof ms === 'number' ? String(ms) : (JSON.stringify(ms) ?? String(ms))}; it must return a number of milliseconds from 0 to 2147483647. Attempt ${attempt} had failed with ${failed.name}: ${failed.message}`,
    },
  };
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Whether this call needs approval: the tool's flag, or its policy asked with the logged args. */
function needsApproval(
  definition: ToolDefinition,
  scope: NodeScope,
  identity: CallIdentity,
  argsText: CanonicalText,
): boolean {
  const policy = definition.approval;
  if (typeof policy === 'boolean') return policy;
  const step = scope.step;
  const answer: unknown = nodeStorage.exit(() =>
    policy(argsText.value(), {
      runId: step.runId,
      flow: step.flow,
      node: identity.node,
      index: identity.index,
      tool: identity.tool,
      identity: { ...step.identity },
    }),
  );
  if (typeof answer !== 'boolean') {
    throw new TypeError(
      `Tool "${definition.name}": the approval policy returned ${answer instanceof Promise ? 'a promise' : (JSON.stringify(answer) ?? String(answer))}; it must return true or false, synchronously.`,
    );
  }
  return answer;
}

function deniedOutcome(
  tool: string,
  decision: { by?: string; reason?: string },
): CallOutcome {
  return {
    ok: false,
    error: {
      name: 'ToolDenied',
      message: `"${tool}" was denied${decision.by ? ` by ${decision.by}` : ''}${decision.reason ? `: ${decision.reason}` : ''}`,
    },
  };
}

function record(base: Base, outcome: Invoked, attempts: number): CallDraft {
  const tried = attempts > 1 ? { attempts } : {};
  return outcome.unrecordable !== undefined
    ? {
        ...base,
        phase: 'unrecordable',
        reason: outcome.unrecordable,
        ...tried,
        at: Date.now(),
      }
    : {
        ...base,
        phase: 'done',
        outcome: outcome.text
          ? { ok: true, value: outcome.text }
          : outcome.sealed,
        ...tried,
        at: Date.now(),
      };
}

const failures: Record<string, typeof ToolFailed> = {
  ToolDenied,
  ToolTimeout,
};

function deliver(
  tool: string,
  runId: string,
  outcome: CallOutcome,
  replayed: boolean,
  cause?: unknown,
  live?: unknown,
): unknown {
  if (!outcome.ok) {
    const Failure = failures[outcome.error.name] ?? ToolFailed;
    throw new Failure(
      tool,
      outcome.error.name,
      outcome.error.message,
      runId,
      replayed,
      cause,
    );
  }
  if (!replayed) return live;
  // A replayed value is a fresh copy each time, so node code cannot change what is stored.
  return outcome.value === undefined
    ? undefined
    : (JSON.parse(JSON.stringify(outcome.value)) as unknown);
}
