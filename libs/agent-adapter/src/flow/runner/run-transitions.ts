import { hash, randomInt } from 'node:crypto';
import type { CanonicalText } from '../../exec/durable/canonical-json';
import type { CompiledFlow } from '../flow.graph';
import type { RunResult } from '../flow.interfaces';
import type {
  ApprovalDecision,
  CancelDecision,
  Checkpoint,
  PendingApproval,
  RerunDecision,
  Resolution,
  RestoreMark,
  RunIdentity,
  SealedError,
} from '../../exec/durable/records';

/**
 * Every checkpoint transition of the protocol, as pure constructors: the checkpoint that follows
 * `cp`. The runner and the operator's CLI both build their checkpoints here, so the rules (which
 * transitions open a new segment, what a claim counts, what a superstep drops) live in one place.
 * Writing them is the caller's (a `SegmentWriter`, with the store's compare-and-set).
 *
 * A transition that opens a new segment fences whoever wrote the old one: its next call record is
 * refused and its next save conflicts.
 */

/**
 * The next step in a new segment: the step and segment of every transition that fences whoever
 * wrote the old one (claim, resolve, restore, park, resume, cancel).
 */
function newSegment(cp: Checkpoint): Pick<Checkpoint, 'step' | 'segment'> {
  return { step: cp.step + 1, segment: cp.segment + 1 };
}

/**
 * A run's first segment: random, so a run id deleted and used again starts an unrelated range of
 * segments (a worker of the old run is fenced from the new one) and new idempotency keys.
 */
export function newIncarnation(): number {
  return randomInt(1, 2 ** 30);
}

/** What a run starts from. */
export interface RunStart {
  runId: string;
  /** The compiled flow: its name, kind, graph digest and start nodes. */
  flow: {
    name: string;
    kind: Checkpoint['kind'];
    digest: string;
    starts: string[];
  };
  state: CanonicalText;
  identity: RunIdentity;
  /** The key id the run's idempotency keys derive from, for its whole life. */
  idemKid: string;
}

/** The digest a run's checkpoints keep of the state it started from (`startedFrom`). */
export function startDigest(state: CanonicalText): string {
  return hash('sha256', state.text, 'hex');
}

/** Step 0 of a new run. */
export function startCheckpoint(start: RunStart): Checkpoint {
  const { flow } = start;
  const incarnation = newIncarnation();
  return {
    runId: start.runId,
    state: start.state,
    identity: start.identity,
    idemKid: start.idemKid,
    flow: flow.name,
    kind: flow.kind,
    digest: flow.digest,
    frontier: flow.starts,
    startedFrom: startDigest(start.state),
    step: 0,
    status: 'running',
    segment: incarnation,
    incarnation,
    logBefore: 0,
    superstep: 0,
    visits: {},
    reason: 'start',
  };
}

/**
 * A recoverer takes the run over: a new segment, the same superstep (it runs again, replaying what
 * finished), one more recovery counted. A fork adopts the recovering flow's graph here.
 */
export function claimCheckpoint(
  cp: Checkpoint,
  by: { identity: RunIdentity; digest: string; rerun?: RerunDecision },
): Checkpoint {
  return {
    ...cp,
    identity: by.identity,
    ...newSegment(cp),
    reason: 'claim',
    digest: by.digest,
    recoveries: (cp.recoveries ?? 0) + 1,
    // Sealed on this claim only: a later claim decides (or not) for itself.
    rerun: by.rerun,
  };
}

/**
 * An operator says what calls in doubt of the open superstep really did: a new segment (the cut
 * one is fenced), sealed before anything is spent, kept until the superstep closes. Recovery
 * spends it (`ReplayBook`): a call that ran is replayed with its outcome, one that did not runs.
 */
export function resolveCheckpoint(
  cp: Checkpoint,
  resolutions: Array<Omit<Resolution, 'step'>>,
): Checkpoint {
  const next = newSegment(cp);
  return {
    ...cp,
    ...next,
    reason: 'resolve',
    rerun: undefined,
    resolutions: [
      ...(cp.resolutions ?? []),
      ...resolutions.map((r) => ({ ...r, step: next.step })),
    ],
  };
}

/**
 * The store was restored from a backup: the run is marked so until it ends (a new segment fences
 * whoever wrote the restored one). Calls not `done` in the restored rows, and every call after,
 * may have run since the backup: recovery does not run one of a tool that is not idempotent
 * without a decision.
 */
export function restoreCheckpoint(
  cp: Checkpoint,
  mark: RestoreMark,
): Checkpoint {
  return {
    ...cp,
    ...newSegment(cp),
    reason: 'restore',
    rerun: undefined,
    restored: mark,
  };
}

/** Dead letter: the run ends `failed` instead of being claimed again. */
export function parkCheckpoint(cp: Checkpoint, error: SealedError): Checkpoint {
  return {
    ...cp,
    ...newSegment(cp),
    status: 'failed',
    reason: 'parked',
    error,
  };
}

/** A call waits for an approval: the superstep stays open (it reruns on resume). */
export function pauseCheckpoint(
  cp: Checkpoint,
  pending: PendingApproval,
): Checkpoint {
  return {
    ...cp,
    step: cp.step + 1,
    status: 'paused',
    reason: 'pause',
    pending,
  };
}

/**
 * A node sleeps: the superstep stays open (it runs again on waking, each sleep replaying from its
 * call record) and the run waits, held by no worker, until `wakeAt`.
 */
export function sleepCheckpoint(cp: Checkpoint, wakeAt: number): Checkpoint {
  return {
    ...cp,
    step: cp.step + 1,
    status: 'sleeping',
    reason: 'sleep',
    wakeAt,
  };
}

/**
 * A worker takes a sleeping run on at its time: a new segment, like a claim, but not a recovery
 * (nothing was cut short, so none is counted).
 */
export function wakeCheckpoint(
  cp: Checkpoint,
  by: { identity: RunIdentity; digest: string },
): Checkpoint {
  return {
    ...cp,
    identity: by.identity,
    digest: by.digest,
    ...newSegment(cp),
    status: 'running',
    reason: 'wake',
    wakeAt: undefined,
  };
}

/** The clock fails a paused run whose approval deadline passed (`onTimeout: 'fail'`). */
export function deadlineCheckpoint(
  cp: Checkpoint,
  error: SealedError,
): Checkpoint {
  return {
    ...cp,
    ...newSegment(cp),
    status: 'failed',
    reason: 'deadline',
    // Kept: the call that waited is what the clock's decision names (decisionOf).
    error,
  };
}

/**
 * A paused run goes on with the decision for its pending call, sealed before it is spent; the
 * decisions of the open superstep so far are kept. `timedOut`: the clock decided it at the
 * approval's deadline.
 */
export function resumeCheckpoint(
  cp: Checkpoint & { pending: PendingApproval },
  by: {
    identity: RunIdentity;
    approved: boolean;
    by?: string;
    reason?: string;
    at?: number;
    timedOut?: boolean;
  },
): Checkpoint {
  const {
    args: _args,
    deadline: _deadline,
    onTimeout: _onTimeout,
    ...call
  } = cp.pending;
  const decision: ApprovalDecision = {
    ...call,
    approved: by.approved,
    ...(by.by !== undefined && { by: by.by }),
    ...(by.reason !== undefined && { reason: by.reason }),
    ...(by.at !== undefined && { at: by.at }),
    ...(by.timedOut && { timedOut: true }),
  };
  return {
    ...cp,
    identity: by.identity,
    ...newSegment(cp),
    status: 'running',
    reason: 'resume',
    pending: undefined,
    decisions: [...(cp.decisions ?? []), decision],
  };
}

/** How a superstep that ran to its end came out. */
export type SuperstepOutcome =
  | {
      state: CanonicalText;
      frontier: string[];
      visits: Record<string, number>;
    }
  | { error: SealedError };

/**
 * A superstep closed: the next one (or the run's end), its call records counted, the spent
 * decisions and the recovery count dropped.
 */
export function advanceCheckpoint(
  cp: Checkpoint,
  outcome: SuperstepOutcome,
  /** Call records the superstep wrote, in every segment. */
  logged: number,
): Checkpoint {
  const next: Checkpoint = {
    ...cp,
    step: cp.step + 1,
    superstep: cp.superstep + 1,
    logBefore: cp.logBefore + logged,
    reason: 'superstep',
    decisions: undefined,
    resolutions: undefined,
    rerun: undefined,
    recoveries: undefined,
  };
  // Assigned, not spread from a conditional object: this runs once per superstep.
  if ('error' in outcome) {
    next.status = 'failed';
    next.error = outcome.error;
  } else {
    next.status = outcome.frontier.length ? 'running' : 'done';
    next.state = outcome.state;
    next.frontier = outcome.frontier;
    next.visits = outcome.visits;
  }
  return next;
}

/**
 * An operator ends an unfinished run as `failed`, fencing any worker on it. What it waited for
 * goes: a pending call's approval (and its deadline), a sleep's wake time.
 */
export function cancelCheckpoint(
  cp: Checkpoint,
  error: SealedError,
  cancelled?: CancelDecision,
): Checkpoint {
  return {
    ...cp,
    ...newSegment(cp),
    status: 'failed',
    reason: 'cancel',
    pending: undefined,
    wakeAt: undefined,
    rerun: undefined,
    error,
    ...(cancelled && { cancelled }),
  };
}

/**
 * Step 0 of a new run copied from checkpoint `from.step` of another: its state, frontier, visits
 * and identity, with a new incarnation (new segments, new idempotency keys). Nothing of the old
 * call log comes along: the checkpoint's superstep runs in full in the new run.
 */
export function forkCheckpoint(
  source: Checkpoint,
  fork: { runId: string; incarnation: number; idemKid: string },
): Checkpoint {
  return {
    ...source,
    runId: fork.runId,
    step: 0,
    status: 'running',
    segment: fork.incarnation,
    incarnation: fork.incarnation,
    logBefore: 0,
    idemKid: fork.idemKid,
    reason: 'fork',
    forkedFrom: { runId: source.runId, step: source.step },
    pending: undefined,
    wakeAt: undefined,
    decisions: undefined,
    resolutions: undefined,
    restored: undefined,
    rerun: undefined,
    cancelled: undefined,
    error: undefined,
    recoveries: undefined,
  };
}

/** A checkpoint as the result a caller gets. */
export function resultOf<S extends object>(
  flow: CompiledFlow<S>,
  cp: Checkpoint,
): RunResult<S> {
  return {
    runId: cp.runId,
    status: cp.status,
    step: cp.step,
    state: flow.state.view(cp.state),
    ...(cp.error && { error: cp.error }),
    ...(cp.pending && { pending: cp.pending }),
    ...(cp.status === 'sleeping' &&
      cp.wakeAt !== undefined && { wakeAt: cp.wakeAt }),
  };
}
