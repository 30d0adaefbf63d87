import { DurableSetupError } from '../errors';
import { Messages } from '../errors/messages';
import { described } from '../errors/messages/text';
import type { Json } from './durable/canonical-json';
import type { ApprovalTimeoutAction, RunIdentity } from './durable/records';

/** A JSON schema object describing a tool's arguments (for models and operators). */
export type JsonSchema = { [key: string]: Json };

/** Where a call that may need approval is made, for an approval policy. @publicApi */
export interface ApprovalPolicyContext {
  readonly runId: string;
  readonly flow: string;
  readonly node: string;
  /** The call's index among the calls its node made in this superstep. */
  readonly index: number;
  readonly tool: string;
  readonly identity: Readonly<RunIdentity>;
}

/**
 * Decides per call whether it needs approval. It gets a copy of exactly the arguments that are
 * logged and must be deterministic with respect to them (and the context): after a recovery it
 * is asked again and must give the same answer. It must return `true` or `false`.
 * @publicApi
 */
export type ApprovalPolicy<A = unknown> = (
  args: A,
  ctx: ApprovalPolicyContext,
) => boolean;

/**
 * Retries of a call whose tool throws. Every attempt is logged `started` before it runs (with its
 * attempt number and the previous attempt's error); only the final outcome is logged `done`, and
 * it is what a recovery replays. A crash between attempts leaves the call in doubt.
 * @publicApi
 */
export interface RetryPolicy {
  /** Tries in all, the first one included (an integer of at least 1). */
  attempts: number;
  /**
   * Milliseconds to wait before the next try: a number, or a function of the attempt that just
   * failed (1, 2, ...). @default 0
   */
  backoff?: number | ((attempt: number) => number);
}

/**
 * Approval with a deadline: a paused call waits `timeoutMs` for a person, then the clock decides
 * as `onTimeout` says, with the same one-decision-wins compare-and-set as a person (whichever is
 * first wins; the other is refused). @publicApi
 */
export interface ApprovalRule<A = unknown> {
  /** Which calls need approval: all (the default) or those the policy returns `true` for. */
  when?: boolean | ApprovalPolicy<A>;
  /** Milliseconds from the pause to the deadline (a durable time: restarts do not reset it). */
  timeoutMs: number;
  /** `deny`: the node gets `ToolDenied`; `approve`: the call runs; `fail`: the run fails. */
  onTimeout: ApprovalTimeoutAction;
}

/** `A`: the tool's arguments, as its approval policy receives them. @publicApi */
export interface ToolOptions<A = unknown> {
  /**
   * Safe to run twice with the same arguments (or made so with `idempotencyKey()`): a call in
   * doubt after a crash runs again instead of stopping recovery.
   * @default false
   */
  idempotent?: boolean;
  /** Reads only; implies `idempotent`. @default false */
  readOnly?: boolean;
  /**
   * Each call waits for a person's decision, or (a function) the calls it returns `true` for. By
   * default the run pauses (checkpoint `paused`, the call logged `pending`) until
   * `resume(flow, runId, { approved })`; with a synchronous `approvals` port on the runner, the
   * call awaits the port instead. `{ timeoutMs, onTimeout, when? }` adds a deadline to a paused
   * call (not to a synchronous port's, which is awaited in the call).
   * @default false
   */
  approval?: boolean | ApprovalPolicy<A> | ApprovalRule<A>;
  /** Retries when the tool throws (or, for an idempotent tool, times out). @default one attempt */
  retry?: RetryPolicy;
  /**
   * Milliseconds an attempt may take; a slower one fails with `ToolTimeout`. The tool is not
   * stopped: it may still be running. For an idempotent tool the timeout is sealed as the call's
   * error (and may be retried); for any other tool the call is recorded in doubt, so a recovery
   * of the superstep stops for a decision, and it is never retried.
   * @default no limit
   */
  timeoutMs?: number;
  /** Shown to models and operators. */
  description?: string;
  /** JSON schema of the arguments object. */
  parameters?: JsonSchema;
  /**
   * Checks a call's arguments before anything is logged: it throws (`InvalidToolArguments`) to
   * refuse the call, which then writes no record and does not run. It must be synchronous and
   * deterministic with respect to the arguments (a recovery asks again). A tool loop hands the
   * refusal to the model as the call's result. @default no check
   */
  checkArgs?: (args: unknown) => void;
}

export type ToolHandler<A = never, R = unknown> = (args: A) => R | Promise<R>;

export interface ToolDefinition {
  name: string;
  handler: (args: unknown) => unknown;
  idempotent: boolean;
  readOnly: boolean;
  /** `true`, `false`, or the policy deciding per call. */
  approval: boolean | ApprovalPolicy;
  /** A paused call's deadline, and what the clock decides then. */
  approvalDeadline?: Omit<ApprovalRule, 'when'>;
  retry?: { attempts: number; backoff: number | ((attempt: number) => number) };
  timeoutMs?: number;
  description?: string;
  parameters?: JsonSchema;
  checkArgs?: (args: unknown) => void;
}

/** setTimeout's limit: a longer delay fires at once. */
const MAX_DELAY_MS = 2 ** 31 - 1;

/**
 * The tools a run may call, by name. Inside a run a tool only ever runs through the `Executor`,
 * which logs, replays and fences it.
 * @publicApi
 */
export class ToolRegistry {
  private readonly tools = new Map<string, ToolDefinition>();

  // `any` stays inside: each handler declares its own argument type, checked where it is written.
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  register<A = any, R = unknown>(
    name: string,
    handler: ToolHandler<A, R>,
    options: ToolOptions<NoInfer<A>> = {},
  ): this {
    if (typeof name !== 'string' || !/^[A-Za-z0-9_.:-]{1,128}$/.test(name)) {
      throw new DurableSetupError(Messages.toolName(name));
    }
    if (typeof handler !== 'function') {
      throw new DurableSetupError(Messages.toolHandler(name));
    }
    if (this.tools.has(name)) {
      throw new DurableSetupError(Messages.toolTwice(name));
    }
    const checked = checkOptions(name, options as ToolOptions<unknown>);
    const readOnly = checked.readOnly ?? false;
    this.tools.set(name, {
      name,
      handler: handler as (args: unknown) => unknown,
      idempotent: readOnly || (checked.idempotent ?? false),
      readOnly,
      ...approvalOf(checked.approval),
      ...(checked.retry !== undefined && {
        retry: {
          attempts: checked.retry.attempts,
          backoff: checked.retry.backoff ?? 0,
        },
      }),
      ...(checked.timeoutMs !== undefined && { timeoutMs: checked.timeoutMs }),
      ...(checked.description !== undefined && {
        description: checked.description,
      }),
      ...(checked.parameters !== undefined && {
        parameters: checked.parameters,
      }),
      ...(checked.checkArgs !== undefined && { checkArgs: checked.checkArgs }),
    });
    return this;
  }

  get(name: string): ToolDefinition | undefined {
    return this.tools.get(name);
  }

  has(name: string): boolean {
    return this.tools.has(name);
  }

  list(): ToolDefinition[] {
    return [...this.tools.values()];
  }

  /**
   * A registry of some of these tools (the same definitions), e.g. the ones an agent's model may
   * see and call. An unknown name is a `DurableSetupError` listing the known ones.
   */
  only(names: readonly string[]): ToolRegistry {
    const subset = new ToolRegistry();
    for (const name of names) {
      const definition = this.tools.get(name);
      if (!definition) {
        throw new DurableSetupError(
          Messages.toolUnknown(name, [...this.tools.keys()]),
        );
      }
      subset.tools.set(name, definition);
    }
    return subset;
  }
}

/** Refuses a bad option value with a `DurableSetupError` naming the tool and the option. */
function checkOptions(
  tool: string,
  options: ToolOptions<unknown>,
): ToolOptions<unknown> {
  const bad = (option: string, rule: string, value: unknown) =>
    new DurableSetupError(
      Messages.toolOption(tool, option, rule, described(value)),
    );
  if (typeof options !== 'object' || options === null) {
    throw bad('the options', 'an object', options);
  }
  for (const key of ['idempotent', 'readOnly'] as const) {
    const value = options[key];
    if (value !== undefined && typeof value !== 'boolean')
      throw bad(key, 'true or false', value);
  }
  const { approval, retry, timeoutMs, checkArgs } = options;
  if (checkArgs !== undefined && typeof checkArgs !== 'function')
    throw bad('checkArgs', 'a function (args) => void', checkArgs);
  if (
    approval !== undefined &&
    typeof approval !== 'boolean' &&
    typeof approval !== 'function'
  ) {
    if (typeof approval !== 'object' || approval === null)
      throw bad(
        'approval',
        'true, false, a function (args, ctx) => boolean, or { timeoutMs, onTimeout, when? }',
        approval,
      );
    const { when, timeoutMs: wait, onTimeout } = approval;
    if (
      when !== undefined &&
      typeof when !== 'boolean' &&
      typeof when !== 'function'
    )
      throw bad('approval.when', 'true, false or a function', when);
    if (!Number.isInteger(wait) || wait < 1 || wait > MAX_DEADLINE_MS)
      throw bad(
        'approval.timeoutMs',
        `an integer number of milliseconds from 1 to ${MAX_DEADLINE_MS} (a year)`,
        wait,
      );
    if (!TIMEOUT_ACTIONS.includes(onTimeout))
      throw bad('approval.onTimeout', "'deny', 'approve' or 'fail'", onTimeout);
  }
  if (retry !== undefined) {
    if (typeof retry !== 'object' || retry === null)
      throw bad('retry', 'an object { attempts, backoff? }', retry);
    const { attempts, backoff } = retry;
    if (!Number.isInteger(attempts) || attempts < 1 || attempts > 1000)
      throw bad('retry.attempts', 'an integer from 1 to 1000', attempts);
    if (
      backoff !== undefined &&
      typeof backoff !== 'function' &&
      !isDelay(backoff)
    ) {
      throw bad(
        'retry.backoff',
        `a number of milliseconds from 0 to ${MAX_DELAY_MS}, or a function (attempt) => milliseconds`,
        backoff,
      );
    }
  }
  if (timeoutMs !== undefined && (!isDelay(timeoutMs) || timeoutMs === 0)) {
    throw bad(
      'timeoutMs',
      `a number of milliseconds from 1 to ${MAX_DELAY_MS}`,
      timeoutMs,
    );
  }
  return options;
}

/** The longest approval deadline: a year. */
const MAX_DEADLINE_MS = 365 * 24 * 3600_000;
const TIMEOUT_ACTIONS: readonly unknown[] = ['deny', 'approve', 'fail'];

/** A checked `approval` option as the definition holds it: who needs it, and its deadline. */
function approvalOf(
  approval: ToolOptions['approval'],
): Pick<ToolDefinition, 'approval' | 'approvalDeadline'> {
  if (typeof approval !== 'object') return { approval: approval ?? false };
  const { when = true, timeoutMs, onTimeout } = approval;
  return { approval: when, approvalDeadline: { timeoutMs, onTimeout } };
}

/** A delay setTimeout honours: a finite number from 0 to 2^31 - 1. */
export function isDelay(value: unknown): value is number {
  return (
    typeof value === 'number' &&
    Number.isFinite(value) &&
    value >= 0 &&
    value <= MAX_DELAY_MS
  );
}
