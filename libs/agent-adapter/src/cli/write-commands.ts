import { InvalidArgumentError, type Command } from 'commander';
import type { CommandContext } from './fork-command';
import { parseBefore, time } from './format';
import { cancelRun, pruneRuns } from './operations';
import { CliMessages } from './cli.messages';
import { runIdArg } from './run-id-arg';

/** `runs cancel` and `runs prune` (fork has its own file): each write a compare-and-set. */
export function writeCommands(runs: Command, c: CommandContext): void {
  runs
    .command('cancel')
    .description(
      'end a running or paused run as failed ("cancelled by operator"), fencing any worker driving it',
    )
    .argument('<id>', 'run id', runIdArg)
    .option('--reason <text>', 'why, recorded in the run')
    .option(
      '--by <name>',
      'who decided, recorded in the run (default: operator:<user>@<host>)',
    )
    .action(
      async (id: string, o: { reason?: string; by?: string }, cmd: Command) => {
        const done = await cancelRun(c.openStore(cmd), c.key(), id, {
          ...(o.reason !== undefined && { reason: o.reason }),
          ...(o.by !== undefined && { by: o.by }),
        });
        c.out(
          cmd,
          done,
          () =>
            `Cancelled run ${id} (was ${done.was}): failed checkpoint at step ${done.step}, segment ${done.segment}.\n`,
        );
      },
    );

  runs
    .command('prune')
    .description(
      'delete finished (done or failed) runs last written before a date, page by page',
    )
    .requiredOption(
      '--finished-before <date>',
      'ISO-8601 date/time, or an age: 30d, 12h, 90m',
      (value: string) => {
        try {
          return parseBefore(value);
        } catch (error) {
          throw new InvalidArgumentError((error as Error).message);
        }
      },
    )
    .option('--flow <name>', 'only runs of this flow')
    .option('--dry-run', 'count, delete nothing')
    .action(
      async (
        o: { finishedBefore: number; flow?: string; dryRun?: boolean },
        cmd: Command,
      ) => {
        const pruned = await pruneRuns(
          c.openStore(cmd),
          c.key(),
          o.finishedBefore,
          {
            ...(o.flow !== undefined && { flow: o.flow }),
            ...(o.dryRun && { dryRun: true }),
          },
        );
        if (pruned.corrupt.length) c.problemsFound();
        c.out(
          cmd,
          { ...pruned, before: time(o.finishedBefore) },
          () =>
            `${pruned.dryRun ? 'Would delete' : 'Deleted'} ${pruned.deleted} finished run(s) last written before ${time(o.finishedBefore)} (${pruned.scanned} finished run(s) scanned).\n` +
            pruned.corrupt
              .map((r) => CliMessages.pruneKeptCorrupt(r.runId, r.detail))
              .join(''),
        );
      },
    );
}
