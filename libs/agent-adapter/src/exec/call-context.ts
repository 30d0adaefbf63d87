import { AsyncLocalStorage } from 'node:async_hooks';
import type { SegmentWriter } from './durable/segment-writer';
import type {
  RestoreMark,
  ApprovalDecision,
  CallIdentity,
  PendingApproval,
  RunIdentity,
} from './durable/records';
import type { ReplayBook } from './durable/replay';
import type { KeyRing } from './durable/key-ring';
import type { ApprovalPort } from './approvals';
import type { StreamPublisher } from './stream-publisher';

/** What one superstep of one run shares between its nodes' calls. */
export interface SuperstepScope {
  runId: string;
  flow: string;
  superstep: number;
  identity: RunIdentity;
  /** The segment's write channel: the call records of this superstep go through it. */
  log: SegmentWriter;
  ring: KeyRing;
  idemKid: string;
  incarnation: number;
  /** Calls in progress: the superstep waits for them, so no record lands after its checkpoint. */
  inflight: Set<Promise<unknown>>;
  /** Set once the superstep settled: a call made later (an un-awaited ctx.call) is refused. */
  closed: boolean;
  /** The superstep's stream entries (`ctx.publish`): stored before its checkpoint. */
  stream: StreamPublisher;
  /** A synchronous approver: calls that need approval await it instead of pausing the run. */
  approvals?: ApprovalPort;
  /** The decisions this superstep may spend (a resumed run). */
  decisions?: ApprovalDecision[];
  /** Set by the executor when a call must wait for an approval: the superstep pauses the run. */
  paused?: PendingApproval;
  /** The earliest wake time of the superstep's sleeps: the run sleeps until then (if not paused). */
  sleeping?: number;
  /** The store was restored from a backup since the run started (see `RestoreMark`). */
  restored?: RestoreMark;
  /** What the cut-short superstep did; set only for the first superstep after a recovery. */
  replay?: ReplayBook;
  replayed: CallIdentity[];
  rerun: CallIdentity[];
  unreplayed: CallIdentity[];
}

/** One node's invocation inside a superstep. */
export interface NodeScope {
  step: SuperstepScope;
  node: string;
  nextIndex: number;
}

/**
 * Which tool call of which run is in progress: what `currentCall()` returns, and exactly what
 * `idempotencyKey()` is derived from (with the run's incarnation, under its key).
 * @publicApi
 */
export interface CurrentCall extends Readonly<CallIdentity> {
  readonly runId: string;
  /** The superstep the call was made in (0 for the first). */
  readonly superstep: number;
}

/** A tool call in progress. */
export interface ToolScope {
  runId: string;
  tool: string;
  identity: RunIdentity;
  /** A frozen snapshot: tools get it from `currentCall()`. */
  call: CurrentCall;
  /** `publish()` from the tool: an entry placed by this call. */
  publish(data: unknown): Promise<void>;
  readonly idempotencyKey: string;
}

/**
 * What the caller runs in: a node's invocation or a tool call, never both (a tool runs outside
 * its node's scope).
 */
type CallContext =
  | { readonly node: NodeScope; readonly tool?: undefined }
  | { readonly tool: ToolScope; readonly node?: undefined };

/**
 * One storage for nodes and tools. On Node 20 every enabled AsyncLocalStorage costs each promise
 * in the process a propagation, and leaving one for another (`exit`) takes it out of and back into
 * the hooks' list: one storage, whose tool context replaces the node's, pays neither twice.
 */
const callStorage = new AsyncLocalStorage<CallContext | undefined>();

/** `fn` as the node invocation `scope`: its calls and decorated tools go through the executor. */
export function inNode<T>(scope: NodeScope, fn: () => T): T {
  return callStorage.run({ node: scope }, fn);
}

/** `fn` as the tool call `scope`, outside its node's scope (tools it calls are plain calls). */
export function inTool<T>(scope: ToolScope, fn: () => T): T {
  return callStorage.run({ tool: scope }, fn);
}

/** `fn` outside any node or tool scope (an approval policy or port: tools it calls stay plain). */
export function outsideCalls<T>(fn: () => T): T {
  return callStorage.run(undefined, fn);
}

/** The tool call the caller runs in, if any. */
export function currentToolScope(): ToolScope | undefined {
  return callStorage.getStore()?.tool;
}

/**
 * The node invocation the caller runs in, if any (and not inside a tool). The Nest layer uses it
 * to route a decorated tool method through the executor inside a run, and call it plainly outside.
 */
export function currentNodeScope(): NodeScope | undefined {
  return callStorage.getStore()?.node;
}
