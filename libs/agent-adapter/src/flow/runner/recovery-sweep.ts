import pLimit from 'p-limit';
import { asError, type RunLeaseHeld } from '../../errors';
import type {
  CheckpointStore,
  RunHead,
} from '../../exec/checkpoints/checkpoint-store';
import { listAll, listAllHeadless } from '../../exec/checkpoints/list-all';
import type {
  RecoverAllOptions,
  RecoverOptions,
  RecoveryOutcome,
} from '../flow.interfaces';

/** Unfinished runs listed per store read. */
export const RECOVER_PAGE_SIZE = 100;

/** What a sweep needs from the runner. */
export interface SweepPort<R> {
  readonly store: CheckpointStore;
  /** `RunLeaseHeld` when the listed run's owner may still be alive at `now`. */
  held(head: RunHead, now: number): RunLeaseHeld | undefined;
  /** The runner's `recover`; with `unlessHeld`, a run whose owner's lease is live is refused. */
  recover(
    runId: string,
    options: RecoverOptions,
    unlessHeld: boolean,
  ): Promise<R>;
  /** Why a head's seal does not hold (`CheckpointStoreCorrupt`), or undefined when it does. */
  verify(head: RunHead): Error | undefined;
  /**
   * A run listed as headless, read again: the flow its verified latest checkpoint names (none when
   * it cannot be told) and its corruption; undefined when it is not headless after all.
   */
  headless(
    runId: string,
  ): Promise<{ flow?: string; problem: Error } | undefined>;
}

/**
 * The paged recovery sweep behind `recoverEach`: lists the flow's unfinished runs a page at a
 * time, only when a recovery slot is free and the last page is used up, and yields each run's
 * outcome as it settles. It holds at most one page of listed runs and `concurrency` recoveries
 * (running, or settled and not yet taken) at a time; runs that finish meanwhile leave the
 * unfinished set behind the cursor, so no run is skipped or taken twice. Recovery goes on only while
 * the consumer pulls: leaving the loop early stops listing and starting runs, and the recoveries
 * already started finish before the loop exits. A listing that fails is thrown after the outcomes
 * of the recoveries already started.
 */
export function sweepUnfinished<R>(
  port: SweepPort<R>,
  flow: string,
  options: RecoverAllOptions,
): AsyncGenerator<RecoveryOutcome<R>, void, undefined> {
  const concurrency = options.concurrency ?? 4;
  // Checked here, not on the first pull: a TypeError for a concurrency that is not 1 or more.
  const limit = pLimit(concurrency);
  return (async function* () {
    yield* sweep(port, flow, options, concurrency, limit);
    if (options.auditEnded === false) return;
    yield* auditEnded(port, flow, options);
    yield* auditHeadless(port, flow, options);
  })();
}

/**
 * The flow's runs listed as ended, a page at a time, with their heads' seals checked: the store
 * lists unfinished runs by a status column anyone with write access can edit, so a run hidden by
 * an edit to `done` is found here and reported (its outcome is `CheckpointStoreCorrupt`), never
 * skipped in silence. One HMAC per ended run: prune finished runs to keep the sweep short.
 */
async function* auditEnded<R>(
  port: SweepPort<R>,
  flow: string,
  options: Pick<RecoverAllOptions, 'signal'>,
): AsyncGenerator<RecoveryOutcome<R>, void, undefined> {
  for (const status of ['done', 'failed'] as const) {
    const query = { flow, status, limit: RECOVER_PAGE_SIZE };
    for await (const head of listAll(port.store, query)) {
      if (options.signal?.aborted) return;
      const problem = port.verify(head);
      if (problem) yield [head.runId, problem];
    }
  }
}

/**
 * Runs whose checkpoints are stored without a head (a head row deleted below the store, which
 * hides the run from every listing of heads), reported as `CheckpointStoreCorrupt` by the sweep of
 * the flow they belong to, or by every sweep when their rows cannot say which.
 */
async function* auditHeadless<R>(
  port: SweepPort<R>,
  flow: string,
  options: Pick<RecoverAllOptions, 'signal'>,
): AsyncGenerator<RecoveryOutcome<R>, void, undefined> {
  for await (const runId of listAllHeadless(port.store)) {
    if (options.signal?.aborted) return;
    const found = await port.headless(runId);
    if (found && (found.flow === undefined || found.flow === flow))
      yield [runId, found.problem];
  }
}

async function* sweep<R>(
  port: SweepPort<R>,
  flow: string,
  options: Pick<
    RecoverAllOptions,
    'force' | 'signal' | 'ctxFor' | 'rerunInDoubt'
  >,
  concurrency: number,
  limit: ReturnType<typeof pLimit>,
): AsyncGenerator<RecoveryOutcome<R>, void, undefined> {
  let page: RunHead[] = [];
  let next = 0;
  let listedAt = 0;
  let after: string | undefined;
  let lastPage = false;
  // Settled outcomes not yet yielded: at most `concurrency` recoveries plus one lease-held run.
  const settled: Array<RecoveryOutcome<R>> = [];
  const running = new Set<Promise<void>>();
  let wake: (() => void) | undefined;
  try {
    for (;;) {
      // The consumer first: nothing more starts until what settled has been taken.
      while (settled.length) yield settled.shift()!;
      const more =
        !options.signal?.aborted && (next < page.length || !lastPage);
      if (more && running.size < concurrency) {
        if (next === page.length) {
          try {
            page = await port.store.listUnfinished(flow, {
              limit: RECOVER_PAGE_SIZE,
              ...(after !== undefined && { after }),
            });
          } catch (error) {
            // The runs recovered so far are still reported, then the listing's error.
            await Promise.all(running);
            while (settled.length) yield settled.shift()!;
            throw error;
          }
          listedAt = Date.now();
          next = 0;
          lastPage = page.length < RECOVER_PAGE_SIZE;
          after = page[page.length - 1]?.runId ?? after;
          continue;
        }
        const head = page[next++]!;
        const held = !options.force && port.held(head, listedAt);
        if (held) {
          settled.push([head.runId, held]);
          continue;
        }
        const task: Promise<void> = limit(() =>
          recoverListed(port, head.runId, options),
        ).then((outcome) => {
          running.delete(task);
          settled.push(outcome);
          wake?.();
        });
        running.add(task);
        continue;
      }
      if (!running.size) return; // nothing left to list, start or wait for
      await new Promise<void>((resolve) => (wake = resolve));
      wake = undefined;
    }
  } finally {
    // Abandoned, or a listing failed: what was started finishes before the iteration ends.
    await Promise.all(running);
  }
}

/** One listed run's recovery, as an outcome (never rejects); the takeover's too. */
export async function recoverListed<R>(
  port: Pick<SweepPort<R>, 'recover'>,
  runId: string,
  options: Pick<RecoverAllOptions, 'force' | 'ctxFor' | 'rerunInDoubt'>,
): Promise<RecoveryOutcome<R>> {
  try {
    const ctx = options.ctxFor?.(runId);
    // The lease is judged again on the head read just before the claim: a worker that took the
    // run since it was listed (another worker's sweep, an operator's recover) is not fenced.
    const result = await port.recover(
      runId,
      {
        ...(ctx && { ctx }),
        ...(options.rerunInDoubt && { rerunInDoubt: true }),
      },
      !options.force,
    );
    return [runId, result];
  } catch (error) {
    return [runId, asError(error)];
  }
}
