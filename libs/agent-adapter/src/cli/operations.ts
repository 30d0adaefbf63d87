import { hostname, userInfo } from 'node:os';
import {
  CheckpointConflict,
  CheckpointNotFound,
  CheckpointStoreCorrupt,
  RunCancelled,
} from '../errors';
import { corruptMessage } from './corrupt-wording';
import {
  UNFINISHED,
  type CheckpointStore,
  type RunHead,
  type RunStatus,
} from '../exec/checkpoints/checkpoint-store';
import type { KeyRing } from '../exec/durable/key-ring';
import {
  openCall,
  openCheckpoint,
  type Call,
  type Checkpoint,
} from '../exec/durable/records';
import { listAll } from '../exec/checkpoints/list-all';
import { SegmentWriter } from '../exec/durable/segment-writer';
import { openLatest, readHeadAndLatest } from '../flow/runner/run-reader';
import { cancelCheckpoint } from '../flow/runner/run-transitions';
import { decisionsIn } from '../flow/runner/decisions';
import type { RecordedDecision } from '../flow/flow.interfaces';
import { inspectRun, leaseLive, type DoubtfulCall } from './inspect';
import { CliError } from './cli.error';
import { CliMessages } from './cli.messages';

/** Who writes an operator's checkpoints, in the head's `owner` column. */
export function operatorId(): string {
  let user = 'unknown';
  try {
    user = userInfo().username;
  } catch {
    // no passwd entry (containers): keep "unknown"
  }
  return `operator:${user}@${hostname()}`;
}

/**
 * Writes an operator's transition of the run as it was read (`head`): its own segment, owned by
 * `by`, with the store's compare-and-set on the head's call count, so a worker's save or call
 * since the read makes it a `CheckpointConflict` instead of writing over what it did not see.
 */
export function writeAsOperator(
  store: CheckpointStore,
  ring: KeyRing,
  head: RunHead,
  next: Checkpoint,
  by: string,
  options: { acceptLostWrites?: boolean } = {},
): Promise<void> {
  return SegmentWriter.writeAlone(
    store,
    ring,
    next,
    { owner: by },
    { expectCalls: head.calls, ...options },
  );
}

/** One checkpoint or call of `runs show`, opened if its seal holds. */
export interface ShownCheckpoint {
  step: number;
  status: RunStatus;
  segment: number;
  superstep?: number;
  reason?: string;
  frontier?: string[];
  error?: { name: string; message: string };
  /** Why it did not open (signature, format). */
  corrupt?: string;
}

export interface ShownCall {
  superstep: number;
  segment: number;
  seq: number;
  node?: string;
  index?: number;
  tool?: string;
  phase?: string;
  at?: number;
  outcome?: 'value' | 'error';
  corrupt?: string;
}

export interface ShownRun {
  head: RunHead;
  latest?: Checkpoint;
  /** The owner's lease has not expired (the worker may be alive and mid-call). */
  leaseLive: boolean;
  checkpoints: ShownCheckpoint[];
  calls: ShownCall[];
  /**
   * The cut superstep's calls in doubt (an unfinished run), as `runs inspect` reads them: what to
   * check at each call's system before deciding.
   */
  inDoubt: DoubtfulCall[];
  /** Every decision recorded in the run, oldest first. */
  decisions: RecordedDecision[];
}

/** A run's head, latest state and history, each row opened if its seal holds. */
export async function showRun(
  store: CheckpointStore,
  ring: KeyRing,
  runId: string,
): Promise<ShownRun> {
  const head = await store.head(runId);
  if (!head) throw new CheckpointNotFound(runId);
  const history = await store.history(runId);
  let latest: Checkpoint | undefined;
  const opened: Checkpoint[] = [];
  const decided: Call[] = [];
  const checkpoints = history.checkpoints.map((record): ShownCheckpoint => {
    const row = {
      step: record.step,
      status: record.status,
      segment: record.segment,
    };
    try {
      const cp = openCheckpoint(ring, record);
      latest = cp;
      opened.push(cp);
      return {
        ...row,
        superstep: cp.superstep,
        reason: cp.reason,
        frontier: cp.frontier,
        ...(cp.error && { error: cp.error }),
      };
    } catch (error) {
      return { ...row, corrupt: corruptWhy(error) };
    }
  });
  const calls = history.calls.map((record): ShownCall => {
    const row = {
      superstep: record.superstep,
      segment: record.segment,
      seq: record.seq,
    };
    let call: Call;
    try {
      // Against the run's incarnation: a record copied from an earlier run with this id is corrupt.
      call = openCall(ring, record, latest?.incarnation);
    } catch (error) {
      return { ...row, corrupt: corruptWhy(error) };
    }
    if (call.decision) decided.push(call);
    return {
      ...row,
      node: call.node,
      index: call.index,
      tool: call.tool,
      phase: call.phase,
      at: call.at,
      ...(call.outcome && {
        outcome: call.outcome.ok ? ('value' as const) : ('error' as const),
      }),
    };
  });
  const unfinished = UNFINISHED.includes(head.status);
  // What recovery would find in doubt, through the inspector's read (problems are `runs verify`'s).
  const inDoubt = unfinished
    ? await inspectRun(store, ring, runId).then(
        (r) => r.inDoubt,
        (error: unknown) => {
          if (error instanceof CheckpointNotFound) return [];
          throw error;
        },
      )
    : [];
  return {
    head,
    ...(latest && latest.step === head.step && { latest }),
    leaseLive: leaseLive(head, Date.now()),
    checkpoints,
    calls,
    inDoubt,
    decisions: decisionsIn(opened, decided),
  };
}

function corruptWhy(error: unknown): string {
  if (error instanceof CheckpointStoreCorrupt) {
    // The first sentence names the row and the reason; the rest is advice for the runner.
    return (
      corruptMessage(error)
        .replace(/^Run "[^"]*": /, '')
        .split('. ')[0] ?? ''
    );
  }
  throw error;
}

export interface CancelResult {
  runId: string;
  /** The status the run had. */
  was: RunStatus;
  /** The step of the `failed` checkpoint written. */
  step: number;
  segment: number;
}

/**
 * Ends a running, paused or sleeping run as `failed` ("cancelled by operator"): a new sealed
 * checkpoint saved with the store's compare-and-set, in a new segment. A worker driving the run is
 * fenced (its next call is refused, its next save conflicts) and runs nothing after its current
 * call. A race with that worker's own save is retried on the fresh checkpoint. What the run waited
 * for goes with it: a pending approval and its deadline, a sleep's wake time (an ended run is
 * never due, so no takeover wakes it or lets the clock decide).
 */
export async function cancelRun(
  store: CheckpointStore,
  ring: KeyRing,
  runId: string,
  options: {
    reason?: string;
    by?: string;
    /**
     * Cancel only the run as it was read at this step: if it has moved on (a worker saved a
     * checkpoint, or it ended), nothing is written and a `CliError` says so, where a plain cancel
     * would retry on the fresh checkpoint. `runs fork --cancel-source` uses it, so a fork is
     * never written beside a source whose state the operator did not see.
     */
    expectStep?: number;
  } = {},
): Promise<CancelResult> {
  const by = options.by ?? operatorId();
  const cancelled = new RunCancelled(runId, by, options.reason);
  for (let attempt = 1; ; attempt++) {
    const { head, record } = await readHeadAndLatest(store, runId);
    if (options.expectStep !== undefined && head.step !== options.expectStep)
      throw new CliError(
        CliMessages.movedWhileCancelling(
          runId,
          options.expectStep,
          head.step,
          head.status,
        ),
      );
    let cp: Checkpoint;
    try {
      cp = openLatest(ring, head, record); // the head and the row, both verified
    } catch (error) {
      // A save landed between the two reads: read again.
      if (!(error instanceof CheckpointConflict) || attempt >= 5) throw error;
      continue;
    }
    if (cp.status === 'done' || cp.status === 'failed') {
      throw new CliError(CliMessages.cancelEnded(runId, cp.status));
    }
    const next = cancelCheckpoint(
      cp,
      { name: cancelled.name, message: cancelled.message },
      {
        by,
        ...(options.reason !== undefined && { reason: options.reason }),
        at: Date.now(),
      },
    );
    try {
      // The operator writes the new segment: the worker on the old one is fenced.
      await writeAsOperator(store, ring, head, next, by);
      return {
        runId,
        was: cp.status,
        step: next.step,
        segment: next.segment,
      };
    } catch (error) {
      if (!(error instanceof CheckpointConflict) || attempt >= 5) throw error;
    }
  }
}

export interface PruneResult {
  /** Runs deleted (or, with dryRun, that would be). */
  deleted: number;
  /** Finished runs looked at. */
  scanned: number;
  dryRun: boolean;
  /**
   * Runs listed as finished that were kept because they do not verify (an edited head, a missing
   * or forged checkpoint): never deleted, for an operator to look at (`runs verify <id>`).
   */
  corrupt: Array<{ runId: string; detail: string }>;
}

/**
 * Deletes finished (done or failed) runs last written before `before` (epoch ms), one page of
 * heads at a time (`list` by status), never a whole table. Each run is read again and verified as
 * recovery reads it just before its delete: only a run whose sealed head and latest checkpoint
 * say it ended goes, so a head edited to `done` (hiding an unfinished run) is reported, not
 * deleted, and a run id reused since the page was read is left alone.
 */
export async function pruneRuns(
  store: CheckpointStore,
  ring: KeyRing,
  before: number,
  options: { dryRun?: boolean; pageSize?: number; flow?: string } = {},
): Promise<PruneResult> {
  const pageSize = options.pageSize ?? 100;
  let deleted = 0;
  let scanned = 0;
  const corrupt: PruneResult['corrupt'] = [];
  for (const status of ['done', 'failed'] as const) {
    const query = {
      status,
      limit: pageSize,
      ...(options.flow !== undefined && { flow: options.flow }),
    };
    for await (const listed of listAll(store, query)) {
      scanned++;
      if (listed.updatedAt >= before) continue;
      let ended: boolean;
      try {
        const { head, record } = await readHeadAndLatest(store, listed.runId);
        const cp = openLatest(ring, head, record);
        ended =
          (cp.status === 'done' || cp.status === 'failed') &&
          head.updatedAt < before;
      } catch (error) {
        if (error instanceof CheckpointStoreCorrupt) {
          corrupt.push({
            runId: listed.runId,
            detail: corruptMessage(error),
          });
        } else if (
          !(error instanceof CheckpointNotFound) &&
          !(error instanceof CheckpointConflict)
        ) {
          throw error;
        }
        continue; // gone, or moving: not a finished run
      }
      if (!ended) continue;
      if (options.dryRun || (await store.delete(listed.runId))) deleted++;
    }
  }
  return { deleted, scanned, dryRun: options.dryRun === true, corrupt };
}
