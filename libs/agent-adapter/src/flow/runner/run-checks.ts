import {
  CheckpointConflict,
  CheckpointNotFound,
  FlowError,
  FailoverNeedsDecision,
  RecoveryNeedsDecision,
  RunAccessDenied,
} from '../../errors';
import { Messages } from '../../errors/messages';
import type {
  CheckpointStore,
  RunHead,
} from '../../exec/checkpoints/checkpoint-store';
import type { KeyRing } from '../../exec/durable/key-ring';
import {
  openCheckpoint,
  type CallIdentity,
  type Checkpoint,
  type RunIdentity,
} from '../../exec/durable/records';
import type { ToolRegistry } from '../../exec/tool.registry';
import type { CompiledFlow } from '../flow.graph';
import type { RunResult } from '../flow.interfaces';
import { accessAs, checkAccess } from './run-access';
import {
  openLatest,
  readCutSuperstep,
  readHeadAndLatest,
  readVerified,
  type CutSuperstep,
} from './run-reader';
import { needsDecision } from './in-doubt';
import { resultOf } from './run-transitions';

/**
 * What a run must pass before a transition is written, read and checked in the order that leaks
 * nothing: identity first, then the flow, the status, the graph, and the calls in doubt.
 */

/** Where a runner reads runs and how it judges their calls. */
export interface RunSources {
  readonly store: CheckpointStore;
  readonly ring: KeyRing;
  readonly registry: ToolRegistry;
}

/**
 * The requester may act on the run (`checkAccess`), and it is `flow`'s run: in that order, so a
 * stranger learns nothing of the run, not even its flow.
 */
export function checkOwnRun(
  cp: Checkpoint,
  runId: string,
  flow: string,
  ctx: RunIdentity | undefined,
): void {
  checkAccess(cp, ctx);
  checkFlow(cp, runId, flow);
}

/** The run is `flow`'s; a run of another flow is a conflict that names both. */
function checkFlow(cp: Checkpoint, runId: string, flow: string): void {
  if (cp.flow !== flow)
    throw new CheckpointConflict(
      Messages.otherFlow(runId, cp.flow, flow),
      runId,
    );
}

/**
 * A start whose run id exists: that run's latest result if it is this flow's run, for this
 * identity, started from this input; a conflict that says so if it started from another.
 */
export async function startedAlready<S extends object>(
  on: RunSources,
  compiled: CompiledFlow<S>,
  start: Checkpoint,
  ctx: RunIdentity | undefined,
): Promise<RunResult<S>> {
  const { runId } = start;
  const record = await on.store.latest(runId);
  if (!record) throw new CheckpointNotFound(runId); // deleted meanwhile
  const cp = openCheckpoint(on.ring, record);
  // A stranger learns nothing of the run, not even its flow; without a ctx, only a run without one.
  if (!ctx && Object.keys(cp.identity).length)
    throw new RunAccessDenied(runId, Messages.restartNeedsCtx());
  checkOwnRun(cp, runId, compiled.name, ctx);
  if (cp.startedFrom === undefined || cp.startedFrom !== start.startedFrom)
    throw new CheckpointConflict(Messages.startedWithOtherInput(runId), runId);
  return resultOf(compiled, cp);
}

/**
 * The run's head and latest checkpoint, checked: flow, identity (or, for a ctx that is not the
 * run's, `allow`), not ended, same graph.
 */
export async function readLatest<S>(
  on: RunSources,
  compiled: CompiledFlow<S>,
  runId: string,
  ctx: RunIdentity | undefined,
  allow?: (cp: Checkpoint, requester: RunIdentity) => Promise<boolean>,
): Promise<{ head: RunHead; cp: Checkpoint; identity: RunIdentity }> {
  const { head, record } = await readHeadAndLatest(on.store, runId);
  const cp = openLatest(on.ring, head, record);
  // Identity before anything else: a stranger learns nothing of the run, not even its flow.
  const identity = await accessAs(cp, ctx, allow);
  checkFlow(cp, runId, compiled.name);
  if (cp.status === 'done' || cp.status === 'failed') {
    throw new CheckpointConflict(Messages.ended(runId, cp.status), runId);
  }
  // A fork has run nothing yet: its first claim adopts the flow's current graph.
  if (cp.digest !== compiled.digest && cp.reason !== 'fork')
    throw new FlowError(Messages.graphChanged(runId, compiled.name), runId);
  return { head, cp, identity };
}

/**
 * A paused run's head and latest checkpoint for a resume (`readLatest`, with `allow` for a
 * requester other than the run's own), and the call it waits for.
 */
export async function readPaused<S>(
  on: RunSources,
  compiled: CompiledFlow<S>,
  runId: string,
  options: { ctx?: RunIdentity; rerunInDoubt?: boolean },
  allow: (cp: Checkpoint, requester: RunIdentity) => Promise<boolean>,
): Promise<{ head: RunHead; cp: Checkpoint; identity: RunIdentity }> {
  const read = await readLatest(on, compiled, runId, options.ctx, (cp, who) => {
    // Rerunning calls in doubt (a charge that may have happened) is the run's own call, or an
    // operator's through recover: a requester the policy lets decide does not get to make it.
    if (options.rerunInDoubt)
      throw new RunAccessDenied(Messages.strangerRerun(runId), runId);
    return allow(cp, who);
  });
  const { cp } = read;
  if (cp.status !== 'paused' || !cp.pending)
    throw new CheckpointConflict(Messages.notPaused(runId, cp.status), runId);
  return read;
}

/**
 * The run's latest state as a result (`FlowRunner.get`): verified, the requester's and `flow`'s,
 * and, when it is stuck on calls in doubt, `needsDecision`.
 */
export async function readResult<S extends object>(
  on: RunSources,
  compiled: CompiledFlow<S>,
  runId: string,
  ctx: RunIdentity | undefined,
  held: (head: RunHead, now: number) => unknown,
): Promise<RunResult<S>> {
  const read = await readVerified(on.store, on.ring, runId);
  checkOwnRun(read.cp, runId, compiled.name, ctx);
  const result = resultOf(compiled, read.cp);
  // A running run read `running` like one in progress: say when it is stuck on calls in doubt.
  const stuck = await needsDecision(on, read, held);
  return stuck ? { ...result, needsDecision: stuck } : result;
}

/**
 * Reads the cut superstep of `cp`; calls in doubt of tools that are not idempotent stop the run
 * here, before anything is written.
 */
export async function readCutDecided(
  on: RunSources,
  runId: string,
  cp: Parameters<typeof readCutSuperstep>[2],
  head: Parameters<typeof readCutSuperstep>[3],
  rerunInDoubt = false,
): Promise<CutSuperstep & { undecided: CallIdentity[] }> {
  const cut = await readCutSuperstep(on.store, on.ring, cp, head);
  const { book } = cut;
  const doubtful = book
    .inDoubt()
    .filter((p) => !on.registry.get(p.call.tool)?.idempotent);
  if (doubtful.length && !rerunInDoubt) {
    const calls = doubtful.map((p) => [p.call.tool, p.why] as const);
    // A failover may have lost more than these calls' outcomes: it is named first (its decision,
    // a restore mark, puts every call it may have lost in doubt with these).
    const failover = await on.store.failover(runId);
    if (failover)
      throw new FailoverNeedsDecision(
        runId,
        failover.lostHistory,
        failover.history,
        calls,
      );
    throw new RecoveryNeedsDecision(runId, calls);
  }
  // With rerunInDoubt: the calls the claim decides to run again (sealed with it).
  const undecided = doubtful.map(({ call: { node, index, tool } }) => ({
    node,
    index,
    tool,
  }));
  return { ...cut, undecided };
}
