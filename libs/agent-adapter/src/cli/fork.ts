import { randomBytes } from 'node:crypto';
import { CheckpointConflict, CheckpointNotFound } from '../errors';
import type {
  CheckpointStore,
  RunStatus,
} from '../exec/checkpoints/checkpoint-store';
import type { KeyRing } from '../exec/durable/key-ring';
import { openCheckpoint } from '../exec/durable/records';
import { SegmentWriter } from '../exec/durable/segment-writer';
import { forkCheckpoint, newIncarnation } from '../flow/runner/run-transitions';
import { readVerified } from '../flow/runner/run-reader';
import { CliError } from './cli.error';
import { CliMessages } from './cli.messages';
import { cancelRun, operatorId, type CancelResult } from './operations';
import { runIdArg } from './run-id-arg';

export interface ForkResult {
  runId: string;
  from: { runId: string; step: number };
  superstep: number;
  frontier: string[];
  /** The source's cancel, when `cancelSource` found it unfinished and ended it first. */
  cancelled?: CancelResult;
}

export interface ForkOptions {
  newRunId?: string;
  by?: string;
  /**
   * If the source has not ended, end it first exactly as `runs cancel` does (`cancelRun`, with
   * the store's compare-and-set, fencing any worker on it), then write the fork. Without it, a
   * fork of an unfinished source is refused. A source that has already ended is forked as is.
   */
  cancelSource?: boolean;
}

/**
 * Starts a new run from checkpoint `step` of another: the checkpoint's state, frontier, visits and
 * identity, sealed for the new run id at step 0 with a new incarnation (new segments, new
 * idempotency keys) and `reason: 'fork'`. Nothing of the old run's call log is copied: the
 * checkpoint's superstep runs in full in the new run, which any worker's `recover`/`recoverAll`
 * picks up. A fork adopts the graph of the flow that first recovers it (so a run can move onto a
 * changed graph); its frontier's nodes must exist there.
 *
 * The source must have ended (`done` or `failed`): a fork of a run that is still running or paused
 * would be driven beside it, and with new keys no provider could deduplicate the calls both make.
 * With `cancelSource` the writes are, in order: (1) the source's `failed` checkpoint (`cancelRun`,
 * refused if the source moved since it was read here), (2) the fork's step 0 (create-only). Every
 * check that needs no write (the step, the frontier, the new id being free) is done before (1). A
 * crash between (1) and (2) leaves a cancelled source and no fork: fork it again (no flag needed).
 */
export async function forkRun(
  store: CheckpointStore,
  ring: KeyRing,
  runId: string,
  step: number,
  options: ForkOptions = {},
): Promise<ForkResult> {
  const newRunId = options.newRunId ?? randomBytes(16).toString('hex');
  runIdArg(newRunId);
  const by = options.by ?? operatorId();
  const history = await store.history(runId);
  if (history.checkpoints.length === 0) throw new CheckpointNotFound(runId);
  const record = history.checkpoints.find((c) => c.step === step);
  if (!record) {
    const steps = history.checkpoints.map((c) => c.step);
    throw new CliError(CliMessages.noCheckpointAt(runId, step, steps));
  }
  const cp = openCheckpoint(ring, record);
  if (cp.frontier.length === 0) {
    throw new CliError(CliMessages.nothingToFork(runId, step));
  }
  const source = await sourceState(store, ring, runId);
  if (!source.ended && !options.cancelSource) {
    throw new CliError(CliMessages.forkUnfinished(runId, source.status));
  }
  if (await store.head(newRunId)) throw alreadyExists(newRunId);
  let cancelled: CancelResult | undefined;
  if (!source.ended) {
    cancelled = await cancelRun(store, ring, runId, {
      by,
      reason: `forked to ${newRunId}`,
      expectStep: source.step,
    });
  }
  const fork = forkCheckpoint(cp, {
    runId: newRunId,
    incarnation: newIncarnation(),
    idemKid: ring.current.id,
  });
  try {
    await SegmentWriter.writeAlone(store, ring, fork, { owner: by });
  } catch (error) {
    const why =
      error instanceof CheckpointConflict
        ? alreadyExists(newRunId)
        : (error as Error);
    if (!cancelled) throw why;
    throw new CliError(
      CliMessages.forkAfterCancel(runId, cancelled.step, why.message),
      why instanceof CliError ? why.exitCode : 3,
    );
  }
  return {
    runId: newRunId,
    from: { runId, step },
    superstep: cp.superstep,
    frontier: cp.frontier,
    ...(cancelled && { cancelled }),
  };
}

function alreadyExists(runId: string): CliError {
  return new CliError(CliMessages.forkExists(runId));
}

/**
 * Whether the source has ended: its head and its latest sealed checkpoint agree on `done` or
 * `failed`. A run whose head is ahead of its latest checkpoint is moving, so not ended.
 */
async function sourceState(
  store: CheckpointStore,
  ring: KeyRing,
  runId: string,
): Promise<{ status: RunStatus; step: number; ended: boolean }> {
  // Both verified (the head's seal and the latest checkpoint against it): a fork of a run whose
  // rows were edited is refused as corrupt, never taken at an edited status.
  const { cp } = await readVerified(store, ring, runId);
  const ended = cp.status === 'done' || cp.status === 'failed';
  return { status: cp.status, step: cp.step, ended };
}
