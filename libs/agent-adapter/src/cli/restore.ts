import type { Command } from 'commander';
import {
  CheckpointConflict,
  CheckpointNotFound,
  CheckpointStoreCorrupt,
} from '../errors';
import {
  UNFINISHED,
  type CheckpointStore,
} from '../exec/checkpoints/checkpoint-store';
import { listAll } from '../exec/checkpoints/list-all';
import type { KeyRing } from '../exec/durable/key-ring';
import { readVerified } from '../flow/runner/run-reader';
import { restoreCheckpoint } from '../flow/runner/run-transitions';
import { CliError } from './cli.error';
import { CliMessages } from './cli.messages';
import { corruptMessage } from './corrupt-wording';
import type { CommandContext } from './fork-command';
import { operatorId, writeAsOperator } from './operations';

export interface RestoreResult {
  /** Unfinished runs marked restored. */
  marked: string[];
  /** Runs that could not be marked, and why (they do not verify, or moved meanwhile). */
  skipped: Array<{ runId: string; why: string }>;
}

/**
 * After the store was restored from a backup: marks every unfinished run restored (a sealed
 * checkpoint, a new segment written with a compare-and-set, fencing any worker still on it).
 * Recovery then runs no call of a tool that is not idempotent that the restored rows do not record
 * `done`, in the cut superstep or after it, without an operator's decision (resolve or rerun):
 * each may have run after the backup was taken. Idempotent tools run, under the same idempotency
 * keys as before, so providers that honour them deduplicate.
 */
export async function markRestored(
  store: CheckpointStore,
  ring: KeyRing,
  options: {
    by?: string;
    reason?: string;
    flow?: string;
    /**
     * After a Redis failover: only the runs the store says a replaced master last wrote
     * (`CheckpointStore.failover`), each mark naming the lost history.
     */
    failover?: boolean;
    /**
     * With `failover`: it was a coordinated `CLUSTER FAILOVER` (no FORCE or TAKEOVER), which
     * loses nothing: the runs go on as they are, no call held back (see `RestoreMark.failover`).
     */
    planned?: boolean;
  } = {},
): Promise<RestoreResult> {
  if (options.planned && !options.failover)
    throw new TypeError(CliMessages.plannedWithoutFailover());
  const by = options.by ?? operatorId();
  const mark = {
    at: Date.now(),
    by,
    ...(options.reason !== undefined && { reason: options.reason }),
  };
  const result: RestoreResult = { marked: [], skipped: [] };
  // A sleeping or paused run stays so, its wake time or deadline sealed as it was.
  for (const status of UNFINISHED) {
    const query = {
      status,
      limit: 100,
      ...(options.flow !== undefined && { flow: options.flow }),
    };
    for await (const { runId } of listAll(store, query)) {
      try {
        const failover = options.failover
          ? await store.failover(runId)
          : undefined;
        if (options.failover && !failover) continue;
        const { head, cp } = await readVerified(store, ring, runId);
        if (cp.status === 'done' || cp.status === 'failed') continue;
        const next = restoreCheckpoint(cp, {
          ...mark,
          ...(failover && {
            failover: {
              ...failover,
              ...(options.planned && { planned: true }),
            },
          }),
        });
        // The mark is what accepting lost writes means: every call they may have held is in doubt.
        await writeAsOperator(store, ring, head, next, by, {
          acceptLostWrites: true,
        });
        result.marked.push(runId);
      } catch (error) {
        if (error instanceof CheckpointStoreCorrupt)
          result.skipped.push({ runId, why: corruptMessage(error) });
        else if (
          error instanceof CheckpointConflict ||
          error instanceof CheckpointNotFound
        )
          result.skipped.push({ runId, why: error.message });
        else throw error;
      }
    }
  }
  return result;
}

/** `runs restored`: the one command to run after restoring the store from a backup. */
export function restoreCommand(runs: Command, c: CommandContext): void {
  runs
    .command('restored')
    .description(
      'after restoring the store from a backup (or a Redis failover, --failover): mark every unfinished run restored, so recovery runs no call that may have run since the backup without a decision',
    )
    .option('--flow <name>', 'only runs of this flow')
    .option(
      '--failover',
      'after a Redis failover: only the runs a replaced master last wrote (their last writes may be lost)',
    )
    .option(
      '--planned',
      'with --failover: it was a coordinated CLUSTER FAILOVER (no FORCE, no TAKEOVER), which loses nothing; the runs go on as they are, no call held back',
    )
    .option('--by <name>', 'who restored (default: operator:<user>@<host>)')
    .option('--reason <text>', 'why, recorded in each run')
    .action(
      async (
        o: {
          flow?: string;
          by?: string;
          reason?: string;
          failover?: boolean;
          planned?: boolean;
        },
        cmd: Command,
      ) => {
        if (o.planned && !o.failover)
          throw new CliError(CliMessages.plannedWithoutFailover());
        const done = await markRestored(c.openStore(cmd), c.key(), o);
        if (done.skipped.length) c.problemsFound();
        c.out(cmd, done, () =>
          CliMessages.restoredRuns(done, o.planned === true),
        );
      },
    );
}
