import type { RunStatus } from '../exec/checkpoints/checkpoint-store';
import type {
  PendingApproval,
  RunIdentity,
  SealedError,
} from '../exec/durable/records';
import type { NeedsDecision, ResumeDecision } from '../flow/flow.interfaces';
import type { FlowRunnerOptions } from '../flow/runner/flow-runner.options';
import type { AssistantMessage, ChatMessage } from './chat-model';

/** How many model calls a run may make when `maxSteps` is not given. */
export const DEFAULT_MAX_STEPS = 10;

/** What a tool loop's checkpoints hold (its flow state). */
export interface ToolLoopState {
  /** The whole history: the messages the run started with, then every reply and tool result. */
  messages: ChatMessage[];
  /** Model calls made so far in the run, recoveries included. */
  modelCalls: number;
  /** The run's limit on model calls, fixed when it starts. */
  maxSteps: number;
  /** How many of `messages` the run started with. */
  start: number;
}

/**
 * Where a tool loop's runs are kept: the runner's options (store, keys, events, worker id, lease,
 * approvals, resume policy, dead letters), checked by the runner, plus the loop's name.
 * @publicApi
 */
export interface ToolLoopOptions extends FlowRunnerOptions {
  /**
   * The name the loop's runs are stored under (the flow name of their checkpoints): `recoverAll`
   * finds unfinished runs by it. Give each kind of agent its own.
   * @default 'tool-loop'
   */
  name?: string;
  /**
   * Publish each message the run adds to its history to the run's stream (read with `stream`):
   * the model's replies, once saved (so never one a crash makes the model replace), and the tools'
   * results, in the reply's order. It costs a superstep more per run (the last reply is published
   * by one of its own) and a write per superstep.
   * @default false
   */
  stream?: boolean;
}

/** @publicApi */
export interface ToolLoopRunOptions {
  /**
   * The run's id; 128 random bits when omitted. With the id of a run that exists, that run is
   * continued instead of a new one started (see `ToolLoop.run`).
   */
  runId?: string;
  /** Who the run acts for; sealed into every checkpoint. */
  ctx?: RunIdentity;
  /**
   * Model calls the whole run may make, recoveries included; one more fails the run with
   * `MaxStepsExceeded`. Fixed when the run starts.
   * @default 10
   */
  maxSteps?: number;
  /**
   * `false` (a new run): resolve as soon as it is stored (`running`, step 0) and drive it on in the
   * background here; follow it with `stream` or read it with `get` (see `RunOptions.wait`).
   * @default true
   */
  wait?: boolean;
  /** The decision for the call a paused run waits for: resumes it. */
  decision?: ResumeDecision;
  /** With `decision`: run calls in doubt of the paused superstep again (after checking them). */
  rerunInDoubt?: boolean;
}

/** A paused loop: the call that waits for a decision. @publicApi */
export interface ToolLoopPending extends PendingApproval {
  /** The model's id of the waiting call. */
  toolCallId?: string;
}

/** @publicApi */
export interface ToolLoopResult {
  runId: string;
  status: RunStatus;
  step: number;
  /** The whole history, the run's first messages included. */
  messages: ChatMessage[];
  /** The model's final answer (a `done` run). */
  reply?: AssistantMessage;
  /** Model calls the run made (checkpointed ones; a call cut short by a crash is not counted). */
  modelCalls: number;
  maxSteps: number;
  /** Why the run failed. */
  error?: SealedError;
  /** A paused run: the call that waits for a decision. */
  pending?: ToolLoopPending;
  /**
   * A `running` run stuck on calls in doubt (its worker's lease expired): the calls, for an
   * operator to resolve or rerun (see `RunResult.needsDecision`; a loop's calls are `tools#<i>`).
   */
  needsDecision?: NeedsDecision;
}
