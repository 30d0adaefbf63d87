import { ApprovalTimedOut } from '../../errors';
import { Messages } from '../../errors/messages';
import type { RunHead } from '../../exec/checkpoints/checkpoint-store';
import type { Checkpoint, RunIdentity } from '../../exec/durable/records';
import type { CompiledFlow } from '../flow.graph';
import type {
  ResumeDecision,
  ResumeOptions,
  RunResult,
} from '../flow.interfaces';
import { sealError } from '../superstep';
import { readPaused, type RunSources } from './run-checks';
import { resumePolicyAllows } from './run-access';
import type { RunnerSettings } from './flow-runner.options';
import {
  deadlineCheckpoint,
  resultOf,
  resumeCheckpoint,
  wakeCheckpoint,
} from './run-transitions';
import type { SegmentDriver } from './segment-driver';

/** A run read for a recovery: its head, its latest checkpoint, who recovers it. */
export interface ReadRun {
  head: RunHead;
  cp: Checkpoint;
  identity: RunIdentity;
}

/**
 * A recovery meets a run that waits: a sleeping run wakes once its (sealed) time came; a paused
 * run whose approval deadline passed gets the clock's decision (`onTimeout`), sealed and stored
 * with the same compare-and-set as a person's, so of a person and the clock racing one decision
 * wins and the other is refused. Before its time, the run is returned as it stands: the store's
 * due time is not sealed, the checkpoint's is.
 */
export async function goOnIfDue<S extends object>(
  driver: SegmentDriver,
  sources: RunSources,
  compiled: CompiledFlow<S>,
  { head, cp, identity }: ReadRun,
  rerunInDoubt: boolean | undefined,
  now = Date.now(),
): Promise<RunResult<S>> {
  if (cp.status === 'sleeping') {
    if (cp.wakeAt === undefined || cp.wakeAt > now)
      return resultOf(compiled, cp);
    const woken = wakeCheckpoint(cp, { identity, digest: compiled.digest });
    return goOn(driver, sources, compiled, { head, cp }, rerunInDoubt, woken);
  }
  const pending = cp.pending;
  const deadline = pending?.deadline;
  if (!pending || deadline === undefined || deadline > now)
    return resultOf(compiled, cp);
  if (pending.onTimeout === 'fail') {
    const failed = deadlineCheckpoint(
      cp,
      sealError(new ApprovalTimedOut(cp.runId, pending.tool, deadline)),
    );
    await driver.save(driver.writerFor(failed), failed, {
      expectCalls: head.calls,
    });
    driver.announceDecision(failed);
    return resultOf(compiled, failed);
  }
  const approved = pending.onTimeout === 'approve';
  const reason = Messages.approvalDeadlinePassed(deadline);
  return decidePaused(
    driver,
    sources,
    compiled,
    { head, cp, identity },
    { approved, reason, at: now, timedOut: true },
    rerunInDoubt,
  );
}

/**
 * A paused run goes on with a decision (a person's `resume`, or the clock's at the deadline),
 * sealed into the next checkpoint with a compare-and-set on the head (of two at once, one wins;
 * the other gets CheckpointConflict) and only then spent.
 */
export function decidePaused<S extends object>(
  driver: SegmentDriver,
  sources: RunSources,
  compiled: CompiledFlow<S>,
  { head, cp, identity }: ReadRun,
  decision: Omit<Parameters<typeof resumeCheckpoint>[1], 'identity'>,
  rerunInDoubt: boolean | undefined,
): Promise<RunResult<S>> {
  const pending = cp.pending!;
  const decided = resumeCheckpoint(
    { ...cp, pending },
    { ...decision, identity },
  );
  return goOn(driver, sources, compiled, { head, cp }, rerunInDoubt, decided);
}

/**
 * Takes a waiting run on with `next` (a new segment: the waiting one is fenced), not as a
 * recovery (nothing was cut short), and drives it from its open superstep.
 */
function goOn<S extends object>(
  driver: SegmentDriver,
  sources: RunSources,
  compiled: CompiledFlow<S>,
  { head, cp }: Pick<ReadRun, 'head' | 'cp'>,
  rerunInDoubt: boolean | undefined,
  next: Checkpoint,
): Promise<RunResult<S>> {
  return driver.takeOverCut(
    sources,
    compiled,
    cp.runId,
    { head, cp },
    { rerunInDoubt, recovered: false },
    () => next,
  );
}

/** `FlowRunner.resume`: a person's decision on the call a paused run waits for, checked first. */
export async function resumeRun<S extends object>(
  on: {
    driver: SegmentDriver;
    sources: RunSources;
    canResume: RunnerSettings['canResume'];
  },
  compiled: CompiledFlow<S>,
  runId: string,
  decision: ResumeDecision,
  options: ResumeOptions,
): Promise<RunResult<S>> {
  if (typeof decision?.approved !== 'boolean')
    throw new TypeError(Messages.badDecision());
  const read = await readPaused(
    on.sources,
    compiled,
    runId,
    options,
    (cp, requester) =>
      resumePolicyAllows(on.canResume, cp, requester, decision),
  );
  const { by, reason } = decision;
  return decidePaused(
    on.driver,
    on.sources,
    compiled,
    read,
    {
      approved: decision.approved,
      ...(by !== undefined && { by: String(by) }),
      ...(reason !== undefined && { reason: String(reason) }),
      at: Date.now(),
    },
    options.rerunInDoubt,
  );
}
