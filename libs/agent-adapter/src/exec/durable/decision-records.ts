import type { StoreFailover } from '../checkpoints/checkpoint-store';
import type { Json } from './canonical-json';

/**
 * What calls and decisions are, as sealed into records and checkpoints (records.ts seals them):
 * a leaf, so the replay book and the runner's decisions can use them without the sealing code.
 */

/** What identifies a call across workers and recoveries: where it was made, and to which tool. */
export interface CallIdentity {
  node: string;
  /** The call's index among the calls its node made in this superstep. */
  index: number;
  tool: string;
}

/** The outcome of a finished tool call, as sealed into its `done` record. */
export type CallOutcome =
  | { ok: true; value?: Json }
  | { ok: false; error: { name: string; message: string } };

/** A call that waits for an approval. @publicApi */
export interface PendingApproval {
  node: string;
  index: number;
  tool: string;
  args: Json;
  /** SHA-256 of the canonical arguments: a decision only covers these arguments. */
  argsHash: string;
  /** The tool's approval deadline (epoch ms): then the clock decides, as `onTimeout` says. */
  deadline?: number;
  onTimeout?: ApprovalTimeoutAction;
}

/**
 * What the clock decides for a call whose approval deadline passed: deny it (the node gets
 * `ToolDenied`), approve it (it runs), or fail the run (`ApprovalTimedOut`). @publicApi
 */
export type ApprovalTimeoutAction = 'deny' | 'approve' | 'fail';

/** An approval decision, as sealed into the checkpoint that resumes the run. @publicApi */
export interface ApprovalDecision extends Omit<
  PendingApproval,
  'args' | 'deadline' | 'onTimeout'
> {
  approved: boolean;
  by?: string;
  reason?: string;
  /** When it was decided (epoch ms). */
  at?: number;
  /** Decided by the clock: the approval's deadline passed (`onTimeout`), no person decided. */
  timedOut?: true;
}

/**
 * A recovery that ran calls in doubt again (`rerunInDoubt`), sealed into its claim: the calls of
 * tools that are not idempotent it decided to run again, who and why. @publicApi
 */
export interface RerunDecision {
  calls: CallIdentity[];
  at: number;
  by?: string;
  reason?: string;
}

/** An operator's cancel, sealed into the checkpoint that ends the run. @publicApi */
export interface CancelDecision {
  by: string;
  reason?: string;
  at: number;
}

/**
 * A decision a synchronous approval port gave, sealed into the call's next record. (A type, not
 * an interface: it must be assignable to `Json`.)
 */
export type SyncDecision = {
  approved: boolean;
  by?: string;
  reason?: string;
  /** The approver changed the arguments: the `started` record holds the ones that ran. */
  edited?: true;
};

/**
 * The store was restored from a backup, or a Redis failover may have lost the run's last writes
 * (`runs restored`), sealed into the run's checkpoints until it ends: every call not recorded `done`
 * in the restored rows may have run after the backup was taken (or in the lost writes), so a call of
 * a tool that is not idempotent is not run without an operator's decision.
 * @publicApi
 */
export interface RestoreMark {
  at: number;
  by?: string;
  reason?: string;
  /**
   * The run was marked after a Redis failover (`runs restored --failover`): the replication history
   * its last writes may be lost with, and the promoted master's (`FailoverNeedsDecision`). `planned`:
   * the operator says it was a coordinated `CLUSTER FAILOVER` (no FORCE, no TAKEOVER), which loses
   * nothing: the mark records that decision and holds no call back.
   */
  failover?: StoreFailover & { planned?: true };
}

/**
 * What an operator (or code) found a call in doubt really did, sealed into the checkpoint that
 * stores the finding (`reason: 'resolve'`) and kept until the call's superstep closes. It names the
 * record it resolves (the call's last record, which left it in doubt): a later record of the call
 * (it ran again) supersedes it. @publicApi
 */
export interface Resolution extends CallIdentity {
  argsHash: string;
  segment: number;
  seq: number;
  /** `true`: it ran, replay `outcome` and never run it; `false`: it did not run, run it once. */
  ran: boolean;
  /** What it returned or threw, when it ran. */
  outcome?: CallOutcome;
  by?: string;
  reason?: string;
  at: number;
  /** The step of the checkpoint that sealed it. */
  step: number;
}
