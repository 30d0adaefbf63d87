import { Messages } from '../errors/messages';
import {
  asError,
  ToolDenied,
  ToolFailed,
  ToolTimeout,
  UnsealableValue,
} from '../errors';
import {
  canonical,
  type CanonicalText,
  type Json,
} from './durable/canonical-json';
import type { CallDraft, CallIdentity, CallOutcome } from './durable/records';
import { inTool, outsideCalls, type NodeScope } from './call-context';
import { toolScopeFor } from './idempotency-key';
import { isDelay, type ToolDefinition } from './tool.registry';

/**
 * One tool call's attempt and what becomes of it: the handler run under the tool's timeout, the
 * outcome sealed as a record, the retry policy's wait, the approval policy's answer, and the value
 * or error the node gets back. The executor decides the order; these decide each step.
 */

export type Base = CallIdentity & { argsHash: string };

/**
 * One attempt: the handler, with the tool's timeout if it has one. Never rejects: a handler that
 * throws or rejects is the attempt's failed outcome. Not async: a synchronous handler's outcome
 * comes back as it is, an asynchronous one's with one `then` (this runs on every call).
 */
export function invokeTool(
  definition: ToolDefinition,
  scope: NodeScope,
  identity: CallIdentity,
  argsText: CanonicalText,
): Invoked | Promise<Invoked> {
  const toolScope = toolScopeFor(scope.step, definition.name, identity);
  // The tool gets its own copy of exactly the logged arguments, and runs outside the node's
  // scope: tools it calls itself are plain calls, so replaying it cannot shift call indexes.
  // A handler that throws synchronously fails the attempt like one that rejects.
  const handle = () =>
    inTool(toolScope, () => definition.handler(argsText.value()));
  const ms = definition.timeoutMs;
  // Whatever throws on the way (the handler, a `then` getter, a value that cannot be described)
  // is the attempt's failure, never the call's rejection: the call is always recorded.
  const outcome = (value: unknown): Invoked => {
    try {
      return settleValue(definition, value, ms);
    } catch (error) {
      return failedAttempt(error);
    }
  };
  if (ms !== undefined) {
    return within(new Promise((resolve) => resolve(handle())), ms).then(
      outcome,
      failedAttempt,
    );
  }
  try {
    const returned = handle();
    return isThenable(returned)
      ? Promise.resolve(returned).then(outcome, failedAttempt)
      : outcome(returned);
  } catch (error) {
    return failedAttempt(error);
  }
}

/** What the attempt's value makes of the call: its sealed result, or why it cannot be sealed. */
function settleValue(
  definition: ToolDefinition,
  value: unknown,
  ms: number | undefined,
): Invoked {
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
}

function failedAttempt(error: unknown): Invoked {
  const e = asError(error);
  return {
    sealed: { ok: false, error: { name: e.name, message: e.message } },
    cause: error,
  };
}

export interface Invoked {
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
export function timedOut(definition: ToolDefinition, ms: number): Invoked {
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
export function backoff(
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

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Whether this call needs approval: the tool's flag, or its policy asked with the logged args. */
export function needsApproval(
  definition: ToolDefinition,
  scope: NodeScope,
  identity: CallIdentity,
  argsText: CanonicalText,
): boolean {
  const policy = definition.approval;
  if (typeof policy === 'boolean') return policy;
  const step = scope.step;
  const answer: unknown = outsideCalls(() =>
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
    throw new TypeError(Messages.approvalPolicyAnswer(definition.name, answer));
  }
  return answer;
}

export function deniedOutcome(
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

export function record(
  base: Base,
  outcome: Invoked,
  attempts: number,
): CallDraft {
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

export function deliver(
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
