import type { CompiledFlow } from '../flow.graph';
import type { RecoverOptions, RunResult } from '../flow.interfaces';
import { rerunDecision } from './decisions';
import type { RunSources } from './run-checks';
import { claimCheckpoint } from './run-transitions';
import type { SegmentDriver } from './segment-driver';
import { goOnIfDue, type ReadRun } from './waits';

/**
 * What a recovery does with an unfinished run it read (and may take): a run that waits goes on
 * only if its time came (waits.ts); a run that keeps dying is parked once it reached
 * `maxRecoveryAttempts`; any other is claimed, its cut superstep run again.
 */
export function continueRun<S extends object>(
  driver: SegmentDriver,
  sources: RunSources,
  compiled: CompiledFlow<S>,
  read: ReadRun,
  options: RecoverOptions & { maxRecoveryAttempts: number | undefined },
): Promise<RunResult<S>> {
  const { head, cp, identity } = read;
  if (cp.status !== 'running')
    return goOnIfDue(driver, sources, compiled, read, options.rerunInDoubt);
  const max = options.maxRecoveryAttempts;
  if (max !== undefined && (cp.recoveries ?? 0) >= max)
    return driver.park(compiled, cp, head.calls);
  // The claim: one racing recoverer wins this step, the other gets CheckpointConflict here.
  // (A forked run adopts this graph here: readLatest let its digest differ.) A rerun of calls in
  // doubt is sealed with it: who, when, why, which calls.
  return driver.takeOverCut(
    sources,
    compiled,
    cp.runId,
    { head, cp },
    { rerunInDoubt: options.rerunInDoubt, recovered: true },
    (undecided) =>
      claimCheckpoint(cp, {
        identity,
        digest: compiled.digest,
        ...(undecided.length > 0 && {
          rerun: rerunDecision(undecided, options),
        }),
      }),
  );
}
