import { CheckpointConflict, CheckpointStoreCorrupt } from '../errors';
import { CliMessages } from './cli.messages';
import { corruptMessage } from './corrupt-wording';
import { Messages } from '../errors/messages';
import type {
  CheckpointStore,
  RunHead,
  RunStatus,
  StoreFailover,
} from '../exec/checkpoints/checkpoint-store';
import {
  openLatest,
  readCutSuperstep,
  readHeadAndLatest,
  type CutSuperstep,
} from '../flow/runner/run-reader';
import { describeInDoubt } from '../flow/runner/in-doubt';
import { readDecisions } from '../flow/runner/decisions';
import type { InDoubtCall, RecordedDecision } from '../flow/flow.interfaces';
import type { KeyRing } from '../exec/durable/key-ring';
import type {
  Checkpoint,
  PendingApproval,
  RunIdentity,
} from '../exec/durable/records';

/**
 * What `recover` would do with the run now, found with the reads and checks recovery makes and no
 * write. The CLI has no tool registry, so it cannot know which tools are idempotent: a call in
 * doubt is reported with its recorded facts as "in doubt (rerun only if idempotent)", unless the
 * operator names the tool's idempotency (`idempotent`).
 */
export type Verdict =
  /** Done or failed: recover refuses it (CheckpointConflict); fork it to run it again. */
  | 'ended'
  /** recover returns it as it is; resume decides the pending call (or the clock, at its deadline). */
  | 'paused'
  /** recover returns it as it is until its (sealed) wake time; then a takeover or recover wakes it. */
  | 'sleeping'
  /** recover would claim it and rerun its cut superstep: replays, reruns, no decision needed. */
  | 'recoverable'
  /** recover would stop with RecoveryNeedsDecision, unless every listed tool is idempotent or rerunInDoubt. */
  | 'needs-decision'
  /** recover would refuse: a row is corrupt (CheckpointStoreCorrupt) or a key is missing. */
  | 'corrupt'
  /** A worker wrote while this read: the run is alive. */
  | 'moving';

export interface ReplayedCall {
  node: string;
  index: number;
  tool: string;
  segment: number;
  seq: number;
  /** The recorded outcome the rerun gets back instead of calling the tool. */
  outcome: 'value' | 'error';
  error?: { name: string; message: string };
}

/**
 * A call in doubt as recovery sees it (`InDoubtCall`: call id, arguments, idempotency key, when it
 * started), with what recovery would do with it.
 */
export interface DoubtfulCall extends InDoubtCall {
  /**
   * `in doubt (rerun only if idempotent)`; with the operator's idempotency list: `rerun
   * (idempotent)` or `needs a decision (not idempotent)`.
   */
  action: string;
}

export interface Inspection {
  runId: string;
  flow: string;
  status: RunStatus;
  step: number;
  superstep?: number;
  segment: number;
  /** Recoveries since the run last completed a superstep (see maxRecoveryAttempts). */
  recoveries?: number;
  reason?: string;
  identity?: RunIdentity;
  /** The run acts with a principal: recover needs its ctx. */
  needsCtx: boolean;
  owner?: string;
  leaseExpiresAt?: number;
  /** The owner's lease is live: recoverAll would skip the run (RunLeaseHeld); recover would fence that worker. */
  leaseLive: boolean;
  verdict: Verdict;
  summary: string;
  /** Nodes of the cut superstep: recovery runs each again (replaying what finished). */
  frontier: string[];
  replay: ReplayedCall[];
  inDoubt: DoubtfulCall[];
  /** A paused run: the call that waits, with its approval deadline and `onTimeout` if it has one. */
  pending?: PendingApproval;
  /** A sleeping run: when it wakes (epoch ms), from its sealed checkpoint. */
  wakeAt?: number;
  /** Every decision recorded in the run (approvals, denials, reruns in doubt, a cancel), oldest first. */
  decisions: RecordedDecision[];
  problems: string[];
  /** A Redis failover may have lost the run's last writes (`FailoverNeedsDecision`). */
  failover?: StoreFailover;
}

export interface InspectOptions {
  /** Tools the operator knows are idempotent (the CLI has no registry). */
  idempotent?: readonly string[];
  /** Tools the operator knows are not idempotent. */
  notIdempotent?: readonly string[];
  now?: number;
}

/** Whether a running run's owner may be alive at `now` (its lease has not expired). */
export function leaseLive(head: RunHead, now: number): boolean {
  return (
    head.status === 'running' &&
    head.leaseExpiresAt !== undefined &&
    head.leaseExpiresAt >= now
  );
}

/**
 * A recovery dry run: reads the head, the latest checkpoint and the cut superstep's call log (what
 * `recover` reads), checks them with recovery's own reader (`run-reader`: `openLatest`, `readCutSuperstep`,
 * `openCall`, `ReplayBook`) and writes nothing.
 */
export async function inspectRun(
  store: CheckpointStore,
  ring: KeyRing,
  runId: string,
  options: InspectOptions = {},
): Promise<Inspection> {
  const { head, record } = await readHeadAndLatest(store, runId);
  const now = options.now ?? Date.now();
  const base = {
    runId,
    flow: head.flow,
    status: head.status,
    step: head.step,
    segment: head.segment,
    ...(head.owner !== undefined && { owner: head.owner }),
    ...(head.leaseExpiresAt !== undefined && {
      leaseExpiresAt: head.leaseExpiresAt,
    }),
    leaseLive: leaseLive(head, now),
    needsCtx: false,
    frontier: [] as string[],
    replay: [] as ReplayedCall[],
    inDoubt: [] as DoubtfulCall[],
    decisions: await readDecisions(store, ring, runId),
    problems: [] as string[],
  };
  let cp: Checkpoint;
  try {
    cp = openLatest(ring, head, record);
  } catch (error) {
    if (error instanceof CheckpointConflict) {
      return {
        ...base,
        verdict: 'moving',
        summary: `A worker saved step ${record.step} while this read step ${head.step}: the run is alive. Inspect it again.`,
      };
    }
    if (!(error instanceof CheckpointStoreCorrupt)) throw error;
    return {
      ...base,
      verdict: 'corrupt',
      problems: [corruptMessage(error)],
      summary: `recover would refuse the run (CheckpointStoreCorrupt): its latest checkpoint does not verify. Run: agent-adapter runs verify ${runId}`,
    };
  }
  const facts = {
    ...base,
    superstep: cp.superstep,
    reason: cp.reason,
    identity: cp.identity,
    needsCtx: cp.identity.principal !== undefined,
    frontier: cp.frontier,
    ...(cp.recoveries !== undefined && { recoveries: cp.recoveries }),
    // A run the clock failed at a deadline keeps its pending call sealed: it waits no more.
    ...(cp.status === 'paused' && cp.pending && { pending: cp.pending }),
    ...(cp.status === 'sleeping' &&
      cp.wakeAt !== undefined && { wakeAt: cp.wakeAt }),
  };
  if (cp.status === 'done' || cp.status === 'failed') {
    return {
      ...facts,
      verdict: 'ended',
      summary: `${Messages.ended(runId, cp.status)}${cp.error ? ` Its error: ${cp.error.name}: ${cp.error.message}` : ''}`,
    };
  }

  // What recovery reads and checks, without the claim that would follow: problems are collected.
  const problems: string[] = [];
  let cut: CutSuperstep;
  try {
    cut = await readCutSuperstep(store, ring, cp, head, (problem) =>
      problems.push(problem.message),
    );
  } catch (error) {
    if (!(error instanceof CheckpointConflict)) throw error;
    return {
      ...facts,
      verdict: 'moving',
      summary: Messages.logMoved(runId),
    };
  }
  const { calls, book } = cut;
  const idempotent = new Set(options.idempotent ?? []);
  const notIdempotent = new Set(options.notIdempotent ?? []);
  const replay: ReplayedCall[] = [];
  for (const prior of book.priors()) {
    if (prior.kind !== 'done') continue;
    const { call } = prior;
    replay.push({
      node: call.node,
      index: call.index,
      tool: call.tool,
      segment: call.segment,
      seq: call.seq,
      outcome: prior.outcome.ok ? 'value' : 'error',
      ...(!prior.outcome.ok && { error: prior.outcome.error }),
    });
  }
  const inDoubt = describeInDoubt(ring, cp, { calls, book }).map(
    (call): DoubtfulCall => ({
      ...call,
      action: idempotent.has(call.tool)
        ? 'rerun (idempotent)'
        : notIdempotent.has(call.tool)
          ? 'needs a decision (not idempotent)'
          : 'in doubt (rerun only if idempotent)',
    }),
  );
  const out = { ...facts, replay, inDoubt, problems };
  if (problems.length) {
    return {
      ...out,
      verdict: 'corrupt',
      summary: `recover would refuse the run: ${problems.length} problem(s) in its latest checkpoint's superstep. Nothing would run.`,
    };
  }
  // Any write to the run would be refused for it, whatever waits besides (redis.failover.ts).
  const failover = await store.failover(runId);
  if (failover) {
    return {
      ...out,
      failover,
      verdict: 'needs-decision',
      summary: `${Messages.failoverMayHaveLost(runId, failover.lostHistory, failover.history, inDoubt.length)}${base.leaseLive ? ' Its owner may still be driving it (its lease is live): its next write is refused the same way.' : ''}`,
    };
  }
  if (cp.status === 'paused') {
    const { pending } = cp;
    const deadline =
      pending?.deadline !== undefined && pending.onTimeout
        ? CliMessages.inspectDeadline(pending.deadline, pending.onTimeout, now)
        : '';
    return {
      ...out,
      verdict: 'paused',
      summary:
        CliMessages.inspectPaused(pending?.tool ?? '?', pending?.node ?? '?') +
        deadline,
    };
  }
  if (cp.status === 'sleeping' && cp.wakeAt !== undefined) {
    return {
      ...out,
      verdict: 'sleeping',
      summary: CliMessages.inspectSleeping(runId, cp.wakeAt, now),
    };
  }
  const undecided = inDoubt.filter((c) => !idempotent.has(c.tool));
  const lease = base.leaseLive
    ? ` Its owner's lease is live until ${new Date(head.leaseExpiresAt!).toISOString()}: recoverAll skips it (RunLeaseHeld); recover(flow, runId) would take it over and fence that worker.`
    : '';
  const ctx = facts.needsCtx
    ? ' It acts with a principal: recover needs its ctx.'
    : '';
  if (undecided.length) {
    return {
      ...out,
      verdict: 'needs-decision',
      summary: `recover would stop with RecoveryNeedsDecision unless every tool in doubt (${[...new Set(undecided.map((c) => c.tool))].join(', ')}) is registered idempotent, or it is given { rerunInDoubt: true } after you checked each call at its system. ${replay.length} finished call(s) would replay.${lease}${ctx} Nothing was written.`,
    };
  }
  return {
    ...out,
    verdict: 'recoverable',
    summary: `recover would claim step ${cp.step + 1} (segment ${cp.segment + 1}) and rerun superstep ${cp.superstep} (${cp.frontier.join(', ') || 'no nodes'}): ${replay.length} finished call(s) replay, ${inDoubt.length} idempotent call(s) in doubt run again.${lease}${ctx} Nothing was written.`,
  };
}
