import { CheckpointKeyError, CheckpointStoreCorrupt } from '../../errors';
import type { CheckpointStore } from '../../exec/checkpoints/checkpoint-store';
import type { KeyRing } from '../../exec/durable/key-ring';
import {
  openCall,
  openCheckpoint,
  type Call,
  type CallIdentity,
  type Checkpoint,
  type RerunDecision,
} from '../../exec/durable/records';
import type { RecordedDecision } from '../flow.interfaces';
import { callIdOf } from './in-doubt';

/**
 * The decisions a run holds, read from where they are sealed: an approval or denial (a person's,
 * or the clock's at an approval deadline) in the checkpoint that resumed the run, a rerun of calls
 * in doubt in the recovery's claim, a cancel in the checkpoint that ended the run (an operator's,
 * or the clock's: `deadline`), a synchronous approval in the call's record. The runner's
 * `run.decided` event, `runs inspect` / `runs show` and the viewer read them through here.
 */

/** What a claim seals when it runs calls in doubt again (`rerunInDoubt`), with who and why. */
export function rerunDecision(
  calls: CallIdentity[],
  from: { by?: string; reason?: string },
  at = Date.now(),
): RerunDecision {
  return {
    calls,
    at,
    ...(from.by !== undefined && { by: String(from.by) }),
    ...(from.reason !== undefined && { reason: String(from.reason) }),
  };
}

/** The decision checkpoint `cp` sealed, if it sealed one. */
export function decisionOf(cp: Checkpoint): RecordedDecision | undefined {
  const { step } = cp;
  if (cp.reason === 'resume') {
    const d = cp.decisions?.at(-1);
    if (!d) return undefined;
    return {
      ...approvalOf(d, d, step),
      ...(d.at !== undefined && { at: d.at }),
      ...(d.timedOut && { timedOut: true }),
    };
  }
  if (cp.reason === 'deadline' && cp.pending) {
    // The clock ended the run (`onTimeout: 'fail'`): a cancel, of the call that waited, at its deadline.
    const { pending } = cp;
    return {
      kind: 'cancel',
      step,
      calls: [callIdOf(pending)],
      tools: [pending.tool],
      ...(cp.error && { reason: cp.error.message }),
      ...(pending.deadline !== undefined && { at: pending.deadline }),
      timedOut: true,
    };
  }
  if (cp.reason === 'claim' && cp.rerun) {
    const { calls, at } = cp.rerun;
    return {
      kind: 'rerun',
      step,
      calls: calls.map(callIdOf),
      tools: calls.map((c) => c.tool),
      ...attribution(cp.rerun),
      at,
    };
  }
  if (cp.reason === 'resolve' && cp.resolutions?.length) {
    // The findings this checkpoint sealed (earlier ones are kept until the superstep closes).
    const added = cp.resolutions.filter((r) => r.step === step);
    const last = added.at(-1);
    if (!last) return undefined;
    return {
      kind: 'resolve',
      step,
      calls: added.map(callIdOf),
      tools: added.map((r) => r.tool),
      ran: added.map((r) => r.ran),
      ...attribution(last),
      at: last.at,
    };
  }
  if (cp.reason === 'restore' && cp.restored) {
    return {
      kind: 'restore',
      step,
      calls: [],
      tools: [],
      ...attribution(cp.restored),
      at: cp.restored.at,
    };
  }
  if (cp.reason === 'cancel') {
    return {
      kind: 'cancel',
      step,
      calls: [],
      tools: [],
      ...(cp.cancelled && {
        by: cp.cancelled.by,
        ...(cp.cancelled.reason !== undefined && {
          reason: cp.cancelled.reason,
        }),
        at: cp.cancelled.at,
      }),
    };
  }
  return undefined;
}

/** The synchronous approval port's decision sealed in a call record, if it holds one. */
export function syncDecisionOf(
  call: Call,
  step: number,
): RecordedDecision | undefined {
  const d = call.decision;
  if (!d) return undefined;
  return { ...approvalOf(d, call, step), at: call.at, sync: true };
}

/** An approval or denial of one call: a resume's, or the synchronous approval port's. */
function approvalOf(
  d: { approved: boolean; by?: string; reason?: string },
  call: CallIdentity,
  step: number,
): RecordedDecision {
  return {
    kind: d.approved ? 'approve' : 'deny',
    step,
    calls: [callIdOf(call)],
    tools: [call.tool],
    ...attribution(d),
  };
}

/** Who decided and why, as far as the record says: an absent field stays absent. */
function attribution(d: {
  by?: string;
  reason?: string;
}): Pick<RecordedDecision, 'by' | 'reason'> {
  return {
    ...(d.by !== undefined && { by: d.by }),
    ...(d.reason !== undefined && { reason: d.reason }),
  };
}

/**
 * Every decision of a run's history, oldest first: `checkpoints` as opened (in step order) and
 * `calls` as opened (in log order). A synchronous approval is dated by its record and placed at
 * the step of the first checkpoint of its superstep's end (or the last step, if still open).
 */
export function decisionsIn(
  checkpoints: readonly Checkpoint[],
  calls: readonly Call[],
): RecordedDecision[] {
  const out: RecordedDecision[] = [];
  for (const cp of checkpoints) {
    const d = decisionOf(cp);
    if (d) out.push(d);
  }
  const last = checkpoints.at(-1)?.step ?? 0;
  for (const call of calls) {
    // The checkpoint that closed the call's superstep (superstep moved past it), else the latest.
    const closing = checkpoints.find((c) => c.superstep > call.superstep);
    const d = syncDecisionOf(call, closing?.step ?? last);
    if (d) out.push(d);
  }
  return out.sort((a, b) => a.step - b.step || (a.at ?? 0) - (b.at ?? 0));
}

/**
 * Every decision of the run's history, read from the store: rows that do not open (corrupt, or
 * signed with a key the ring lacks) are skipped here; `runs verify` reports them.
 */
export async function readDecisions(
  store: CheckpointStore,
  ring: KeyRing,
  runId: string,
): Promise<RecordedDecision[]> {
  const history = await store.history(runId);
  const checkpoints: Checkpoint[] = [];
  for (const record of history.checkpoints) {
    const cp = opened(() => openCheckpoint(ring, record));
    if (cp) checkpoints.push(cp);
  }
  // Against the run's incarnation: records of an earlier run with this id are not this run's.
  const incarnation = checkpoints.at(-1)?.incarnation;
  const calls: Call[] = [];
  for (const record of history.calls) {
    const call = opened(() => openCall(ring, record, incarnation));
    if (call?.decision) calls.push(call);
  }
  return decisionsIn(checkpoints, calls);
}

function opened<T>(open: () => T): T | undefined {
  try {
    return open();
  } catch (error) {
    if (
      error instanceof CheckpointStoreCorrupt ||
      error instanceof CheckpointKeyError
    )
      return undefined;
    throw error;
  }
}
