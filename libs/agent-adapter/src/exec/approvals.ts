import type { Json } from './durable/canonical-json';
import type { RunIdentity } from './durable/records';
import { Messages } from '../errors/messages';

/** What a synchronous approval port is asked: one call, exactly as it would run. @publicApi */
export interface ApprovalRequest {
  readonly runId: string;
  readonly flow: string;
  readonly node: string;
  /** The call's index among the calls its node made in this superstep. */
  readonly index: number;
  readonly tool: string;
  /** A copy of the logged arguments. */
  readonly args: Json;
  readonly identity: Readonly<RunIdentity>;
  /**
   * The same for this call on every worker and after every recovery (and unlike the tool's
   * `idempotencyKey()`): an approval system can use it to recognise a request asked again.
   */
  readonly requestId: string;
}

/** A synchronous approval port's answer. @publicApi */
export interface ApprovalVerdict {
  approved: boolean;
  /** Who decided (sealed into the call log). */
  by?: string;
  reason?: string;
  /**
   * Approved with changed arguments: the tool runs with these (JSON data) and they are logged.
   * The call still replays by the arguments the node gave.
   */
  args?: unknown;
}

/**
 * An in-process approver awaited inside the call (for CLIs and tests), given to the runner as
 * `approvals`. Without one, a call that needs approval pauses the run until `resume`.
 *
 * The call is logged `approving` before the port is asked, and the decision is logged before the
 * tool runs. A crash while the port is deciding leaves the call in doubt: a recovery stops with
 * `RecoveryNeedsDecision` unless the tool is idempotent or `rerunInDoubt` is set (then the port is
 * asked again). A port that throws (or answers something that is not a verdict) fails the call
 * with that error, sealed: the tool did not run.
 * @publicApi
 */
export interface ApprovalPort {
  decide(request: ApprovalRequest): ApprovalVerdict | Promise<ApprovalVerdict>;
}

/** Checks what a port answered; throws a TypeError naming the tool if it is not a verdict. */
export function checkVerdict(tool: string, verdict: unknown): ApprovalVerdict {
  const v = verdict as Partial<ApprovalVerdict> | null | undefined;
  const fail = (problem: string) =>
    new TypeError(Messages.approvalVerdict(tool, problem));
  if (typeof v !== 'object' || v === null)
    throw fail(Messages.verdictNotObject());
  if (typeof v.approved !== 'boolean') throw fail(Messages.verdictApproved());
  for (const key of ['by', 'reason'] as const) {
    if (v[key] !== undefined && typeof v[key] !== 'string')
      throw fail(Messages.verdictField(key));
  }
  return v as ApprovalVerdict;
}
