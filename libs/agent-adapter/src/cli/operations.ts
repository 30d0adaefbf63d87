import { randomBytes, randomInt } from 'node:crypto';
import { hostname, userInfo } from 'node:os';
import {
  CheckpointConflict,
  CheckpointNotFound,
  CheckpointStoreCorrupt,
  RunCancelled,
} from '../errors';
import { Messages } from '../errors/messages';
import type {
  CheckpointStore,
  RunHead,
  RunStatus,
} from '../exec/checkpoints/checkpoint-store';
import type { KeyRing } from '../exec/durable/key-ring';
import {
  openCall,
  openCheckpoint,
  sealCheckpoint,
  type Call,
  type Checkpoint,
} from '../exec/durable/records';
import { CliError } from './cli.error';
import { runIdArg } from './run-id-arg';

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
  checkpoints: ShownCheckpoint[];
  calls: ShownCall[];
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
  const checkpoints = history.checkpoints.map((record): ShownCheckpoint => {
    const row = {
      step: record.step,
      status: record.status,
      segment: record.segment,
    };
    try {
      const cp = openCheckpoint(ring, record);
      latest = cp;
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
      call = openCall(ring, record);
    } catch (error) {
      return { ...row, corrupt: corruptWhy(error) };
    }
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
  return {
    head,
    ...(latest && latest.step === head.step && { latest }),
    checkpoints,
    calls,
  };
}

function corruptWhy(error: unknown): string {
  if (error instanceof CheckpointStoreCorrupt) {
    // The first sentence names the row and the reason; the rest is advice for the runner.
    return error.message.replace(/^Run "[^"]*": /, '').split('. ')[0] ?? '';
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
 * Ends a running or paused run as `failed` ("cancelled by operator"): a new sealed checkpoint saved
 * with the store's compare-and-set, in a new segment. A worker driving the run is fenced (its next
 * call is refused, its next save conflicts) and runs nothing after its current call. A race with
 * that worker's own save is retried on the fresh checkpoint.
 */
export async function cancelRun(
  store: CheckpointStore,
  ring: KeyRing,
  runId: string,
  options: { reason?: string; by?: string } = {},
): Promise<CancelResult> {
  const by = options.by ?? operatorId();
  const cancelled = new RunCancelled(runId, by, options.reason);
  for (let attempt = 1; ; attempt++) {
    const head = await store.head(runId);
    const record = await store.latest(runId);
    if (!head || !record) throw new CheckpointNotFound(runId);
    if (record.step !== head.step) {
      if (attempt >= 5)
        throw new CheckpointConflict(Messages.logMoved(runId), runId);
      continue;
    }
    const cp = openCheckpoint(ring, record);
    if (cp.status === 'done' || cp.status === 'failed') {
      throw new CliError(
        `Run "${runId}" has already ended (${cp.status}); there is nothing to cancel.`,
      );
    }
    const next: Checkpoint = {
      ...cp,
      step: cp.step + 1,
      segment: cp.segment + 1,
      status: 'failed',
      reason: 'cancel',
      pending: undefined,
      error: { name: cancelled.name, message: cancelled.message },
    };
    try {
      await store.save(sealCheckpoint(ring, next), {
        expectCalls: head.calls,
        owner: by,
      });
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

export interface ForkResult {
  runId: string;
  from: { runId: string; step: number };
  superstep: number;
  frontier: string[];
}

/**
 * Starts a new run from checkpoint `step` of another: the checkpoint's state, frontier, visits and
 * identity, sealed for the new run id at step 0 with a new incarnation (new segments, new
 * idempotency keys) and `reason: 'fork'`. Nothing of the old run's call log is copied: the
 * checkpoint's superstep runs in full in the new run, which any worker's `recover`/`recoverAll`
 * picks up. A fork adopts the graph of the flow that first recovers it (so a run can move onto a
 * changed graph); its frontier's nodes must exist there.
 */
export async function forkRun(
  store: CheckpointStore,
  ring: KeyRing,
  runId: string,
  step: number,
  options: { newRunId?: string; by?: string } = {},
): Promise<ForkResult> {
  const newRunId = options.newRunId ?? randomBytes(16).toString('hex');
  runIdArg(newRunId);
  const history = await store.history(runId);
  if (history.checkpoints.length === 0) throw new CheckpointNotFound(runId);
  const record = history.checkpoints.find((c) => c.step === step);
  if (!record) {
    const steps = history.checkpoints.map((c) => c.step);
    throw new CliError(
      `Run "${runId}" has no checkpoint at step ${step} (it has steps ${Math.min(...steps)} to ${Math.max(...steps)}).`,
    );
  }
  const cp = openCheckpoint(ring, record);
  if (cp.frontier.length === 0) {
    throw new CliError(
      `Checkpoint ${step} of run "${runId}" has no node left to run (the run was done there); fork an earlier step.`,
    );
  }
  const incarnation = randomInt(1, 2 ** 30);
  const fork: Checkpoint = {
    ...cp,
    runId: newRunId,
    step: 0,
    status: 'running',
    segment: incarnation,
    incarnation,
    logBefore: 0,
    idemKid: ring.current.id,
    reason: 'fork',
    forkedFrom: { runId, step },
    pending: undefined,
    decisions: undefined,
    error: undefined,
    recoveries: undefined,
  };
  try {
    await store.save(sealCheckpoint(ring, fork), {
      owner: options.by ?? operatorId(),
    });
  } catch (error) {
    if (error instanceof CheckpointConflict) {
      throw new CliError(
        `Run "${newRunId}" already exists; choose another id for the fork (--run-id).`,
      );
    }
    throw error;
  }
  return {
    runId: newRunId,
    from: { runId, step },
    superstep: cp.superstep,
    frontier: cp.frontier,
  };
}

export interface PruneResult {
  /** Runs deleted (or, with dryRun, that would be). */
  deleted: number;
  /** Finished runs looked at. */
  scanned: number;
  dryRun: boolean;
}

/**
 * Deletes finished (done or failed) runs last written before `before` (epoch ms), one page of
 * heads at a time (`list` by status), never a whole table. Each run's head is read again just
 * before its delete, so a run id reused since the page was read is left alone.
 */
export async function pruneRuns(
  store: CheckpointStore,
  before: number,
  options: { dryRun?: boolean; pageSize?: number; flow?: string } = {},
): Promise<PruneResult> {
  const pageSize = options.pageSize ?? 100;
  let deleted = 0;
  let scanned = 0;
  for (const status of ['done', 'failed'] as const) {
    for (let cursor: string | undefined; ;) {
      const page = await store.list({
        status,
        limit: pageSize,
        ...(options.flow !== undefined && { flow: options.flow }),
        ...(cursor !== undefined && { before: cursor }),
      });
      for (const head of page.runs) {
        scanned++;
        if (head.updatedAt >= before) continue;
        if (options.dryRun) {
          deleted++;
          continue;
        }
        const again = await store.head(head.runId);
        if (
          again &&
          (again.status === 'done' || again.status === 'failed') &&
          again.updatedAt < before &&
          (await store.delete(head.runId))
        ) {
          deleted++;
        }
      }
      if (page.next === undefined) break;
      cursor = page.next;
    }
  }
  return { deleted, scanned, dryRun: options.dryRun === true };
}
