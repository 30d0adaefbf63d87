import type {
  RunStatus,
  StoreFailover,
} from '../exec/checkpoints/checkpoint-store';
import type { Json } from '../exec/durable/canonical-json';
import type {
  PendingApproval,
  RunIdentity,
  SealedError,
} from '../exec/durable/records';

/** What a node gets besides the state. @publicApi */
export interface NodeContext {
  readonly runId: string;
  readonly flow: string;
  readonly node: string;
  /** Completed supersteps before this one. */
  readonly superstep: number;
  readonly identity: Readonly<RunIdentity>;
  /** Calls a registered tool through the executor: logged, replayed after a crash, fenced. */
  call<R = unknown>(tool: string, args?: unknown): Promise<R>;
  /**
   * Spends the next call index without calling anything. A call's index in its node is part of
   * its identity: a node that decides at run time not to make a call it would otherwise make
   * (e.g. a model's tool call for a tool that is gone) spends its index, so its later calls keep
   * theirs and replay after a recovery.
   */
  skipCall(): void;
  /**
   * Sleeps durably for `ms`: the run checkpoints as `sleeping` with its wake time and this worker
   * lets it go; any worker with a takeover wakes it on time, after any number of restarts (at once
   * if the time passed while none was up). The node runs again from its start on waking, its calls
   * replaying and this sleep returning at once (it is logged like a call, with its wake time): so
   * give the same `ms` each time, as a call's arguments. Until then it rejects with `RunSleeping`;
   * let that end the node (whatever the node does with it, the run sleeps).
   */
  sleep(ms: number): Promise<void>;
  /** `sleep` until a time (a `Date` or epoch ms); a time already past returns at once. */
  sleepUntil(at: Date | number): Promise<void>;
  /**
   * Publishes an entry (plain JSON: progress, a partial answer, an event) to the run's stream,
   * which clients read from any worker with `FlowRunner.stream`. Resolves once it is stored; the
   * superstep waits for its entries before its checkpoint, so awaiting is optional. Exactly once
   * per place: the node's n-th entry in this superstep is stored once, however often the
   * superstep runs (again after a crash, a pause or a sleep), so publish the same entries in the
   * same order each time, as a node makes its calls. What a client read is never taken back.
   */
  publish(data: Json): Promise<void>;
}

/** A node: reads the state, returns the keys it changes (or nothing). @publicApi */
export type NodeFn<S> = (
  state: S,
  ctx: NodeContext,
) => Partial<S> | void | undefined | Promise<Partial<S> | void | undefined>;

/** Combines the value a key has with an update to it (for keys parallel nodes both write). @publicApi */
export type Reducer<V> = (current: V | undefined, update: V) => V;

/**
 * Picks the next node(s) from the state: each must be one of the route's declared targets (END
 * too, when declared). Nothing, or an empty list, ends the branch. @publicApi
 */
export type RouteFn<S> = (
  state: S,
) => string | readonly string[] | null | undefined;

/** A class (with class-validator decorators) describing a flow's state. @publicApi */
export type StateClass<S> = new () => S;

/** @publicApi */
export interface FlowOptions<S> {
  /**
   * Validates the input and gives nodes a typed instance. Without it the state is a plain object.
   * Needs `class-validator` and `class-transformer`: `new Flow()` throws `DriverNotInstalledError`
   * when either is missing.
   */
  state?: StateClass<S>;
  /**
   * How many times one node may run in one run; a node about to run more often ends the run
   * `failed` (it catches a loop that never exits).
   * @default 25
   */
  maxVisits?: number;
  /**
   * What the run's checkpoints and events call it: `'loop'` for a tool loop built on the engine
   * (its `checkpoint.saved` events then carry `kind: 'loop'` and the `stage` that was saved).
   * @default 'flow'
   */
  kind?: 'flow' | 'loop';
}

/** Options of `Flow.node`. @publicApi */
export interface FlowNodeOptions {
  /** How many times this node may run in one run. @default the flow's maxVisits */
  maxVisits?: number;
  /**
   * The node does no I/O of its own before its first tool call: until then it only computes from
   * the state (the call's arguments). Its code may then start before the previous superstep's
   * checkpoint is stored, and the checkpoint goes out with its first call's `started` record: one
   * store round trip per superstep instead of two. No tool runs before both are stored; a crash or
   * a fenced worker there runs nothing twice. `Call(...)` nodes are this kind. Leave it off for a
   * node that calls a model or another service itself before its first tool call: that request
   * would go out before the checkpoint is stored. @default false
   */
  callsFirst?: boolean;
}

/** @publicApi */
export interface RunOptions {
  /** The run's id; 128 random bits when omitted. A run id is the only key a shared store has. */
  runId?: string;
  /** Who the run acts for; sealed into every checkpoint. */
  ctx?: RunIdentity;
  /**
   * `false`: resolve as soon as step 0 is stored (the result says `running`, step 0) and drive the
   * run on in the background on this worker; its outcome is read with `get`, and an error that
   * stops it is logged. A crash meanwhile leaves it to recovery, as always.
   * @default true: resolve when the run ends, pauses, or this worker loses it
   */
  wait?: boolean;
}

/** @publicApi */
export interface RecoverOptions {
  /** The run's identity; refused if it is anyone else's. Needed when the run has a principal. */
  ctx?: RunIdentity;
  /** Run calls in doubt again even when their tool is not idempotent (after checking them). */
  rerunInDoubt?: boolean;
  /** Who decided to rerun the calls in doubt (sealed with the decision in the claim). */
  by?: string;
  /** Why (sealed with the decision in the claim). */
  reason?: string;
}

/** For `recoverAll` and `recoverEach`. @publicApi */
export interface RecoverAllOptions {
  rerunInDoubt?: boolean;
  /** Also claim runs whose owner's lease has not expired (the owner may be alive). @default false */
  force?: boolean;
  /**
   * After the unfinished runs, check the seals of the heads of the flow's ended runs, and look for
   * runs whose checkpoints are stored without a head (`CheckpointStore.listHeadless`); report each
   * as `CheckpointStoreCorrupt` (a run hidden by an edit of its status column, or by deleting its
   * head). One read per page of 100 ended runs and one walk of the run ids: prune finished runs,
   * or pass `false` to skip. @default true
   */
  auditEnded?: boolean;
  /** Runs recovered at the same time. @default 4 */
  concurrency?: number;
  /** The identity to recover a run with (runs that have a principal need it). */
  ctxFor?: (runId: string) => RunIdentity | undefined;
  /**
   * Stops the sweep starting runs once aborted (a shutdown): the recoveries already started finish
   * and their outcomes are still reported, then the sweep ends. @default none
   */
  signal?: AbortSignal;
}

/**
 * One run's outcome in a recovery sweep (`recoverEach`): its id, and its result or why it was not
 * recovered (`RunLeaseHeld`, `RecoveryNeedsDecision`, `RunAccessDenied`, any other error). The
 * entries of `recoverAll`'s map have this shape. @publicApi
 */
export type RecoveryOutcome<R> = readonly [runId: string, outcome: R | Error];

/** @publicApi */
export interface RunResult<S> {
  runId: string;
  status: RunStatus;
  step: number;
  state: S;
  /** Why the run failed. */
  error?: SealedError;
  /** A paused run: the call that waits for a decision (and its deadline, if it has one). */
  pending?: PendingApproval;
  /** A sleeping run: when it wakes (epoch ms, sealed). */
  wakeAt?: number;
  /**
   * Set by `get` on a `running` run that is not in progress but stuck: its worker's lease has
   * expired and its cut superstep has calls in doubt of tools that are not idempotent, or a Redis
   * failover may have lost its last writes, so recovery stops (or stopped) with
   * `RecoveryNeedsDecision` until an operator decides. Absent for a run
   * whose worker is alive, even mid-call.
   */
  needsDecision?: NeedsDecision;
}

/** A run that waits for an operator's decision on its calls in doubt. @publicApi */
export interface NeedsDecision {
  /** The calls to check at their system (was the card charged? the mail sent?). */
  calls: InDoubtCall[];
  /** The worker that held the run (the head's owner). */
  owner?: string;
  /** When that worker's lease expired (epoch ms). */
  leaseExpiresAt?: number;
  /**
   * A Redis failover may have lost the run's last writes (`FailoverNeedsDecision`): calls it may
   * have lost are not among `calls` (which may be empty). Mark it restored first
   * (`runs restored --failover`): each such call is then in doubt, for a decision of its own.
   */
  failover?: StoreFailover;
}

/**
 * A tool call that may or may not have run, with what an operator needs to check it at its
 * system. @publicApi
 */
export interface InDoubtCall {
  /** `node#index`: the call's name in the run's superstep. */
  callId: string;
  node: string;
  /** The call's index among its node's calls in the superstep. */
  index: number;
  tool: string;
  superstep: number;
  /** The segment and sequence number of its last record. */
  segment: number;
  seq: number;
  /** Why recovery counts it in doubt (the words `RecoveryNeedsDecision` uses). */
  why: string;
  /** A retried call: the attempt that started last. */
  attempt?: number;
  /** The arguments the tool got. */
  args?: Json;
  /**
   * The value the tool got from `idempotencyKey()`: search the payment or mail provider by it.
   * Absent when the key ring does not hold the run's key id.
   */
  idempotencyKey?: string;
  /** When the call started (epoch ms, its `started` record). */
  startedAt: number;
  /** When its last record was written (epoch ms). */
  at: number;
}

/**
 * A decision recorded in a run: an operator's or an app's, sealed into the run's checkpoints (or,
 * for a synchronous approval, into the call's record). @publicApi
 */
export interface RecordedDecision {
  /**
   * `approve` / `deny`: a call that needed approval; `rerun`: calls in doubt run again
   * (`rerunInDoubt`); `resolve`: what calls in doubt really did (`ran`); `cancel`: the run ended
   * by an operator, or by the clock (`timedOut`: an approval deadline passed and its tool says
   * `onTimeout: 'fail'`); `restore`: the store was restored from a backup (`runs restored`).
   */
  kind: 'approve' | 'deny' | 'rerun' | 'resolve' | 'cancel' | 'restore';
  /** For `resolve`: per call (same order as `calls`), whether it ran. */
  ran?: boolean[];
  /** The checkpoint step that sealed it (for a synchronous approval: the step it was made in). */
  step: number;
  /** The calls it decided (`node#index`); none for an operator's cancel. */
  calls: string[];
  /** Tools of those calls, in the same order. */
  tools: string[];
  by?: string;
  reason?: string;
  /** When (epoch ms); absent for decisions sealed before this was recorded. */
  at?: number;
  /** A synchronous approval port's decision (not a resume). */
  sync?: true;
  /**
   * Decided by the clock, not a person: the call's approval deadline passed with no decision, and
   * its tool's `onTimeout` approved or denied it, or failed the run (`cancel`, the call named, `at`
   * the deadline). No `by`.
   */
  timedOut?: true;
}

/** @publicApi */
export interface ResumeDecision {
  approved: boolean;
  /** Who decided (kept with the decision in the checkpoint). */
  by?: string;
  reason?: string;
}

/** @publicApi */
export interface ResumeOptions {
  /**
   * Who resumes: the run's own identity, or anyone the runner's `canResume` policy allows (else
   * `RunAccessDenied`, nothing written). Without a ctx the call acts as the run's own identity (a
   * trusted server-side call, as with `recover`), except for a run with a principal, which needs it.
   */
  ctx?: RunIdentity;
  /**
   * Run calls of the paused superstep that are in doubt again (after checking them), as with
   * `recover`: e.g. a call whose result could not be stored before the run paused.
   */
  rerunInDoubt?: boolean;
}
