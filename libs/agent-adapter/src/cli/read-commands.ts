import { Option, type Command } from 'commander';
import type { RunStatus } from '../exec/checkpoints/checkpoint-store';
import type { CommandContext } from './fork-command';
import { RUN_STATUSES } from './due-time';
import { inspectRun } from './inspect';
import { headProblem } from '../flow/runner/run-reader';
import { list, positiveInt } from './args';
import { corruptMessage } from './corrupt-wording';
import { showRun } from './operations';
import { runIdArg } from './run-id-arg';
import { inspectionText, listText, showText } from './run-text';

/** `runs list`, `runs show` and `runs inspect`: reads, nothing written. */
export function readCommands(runs: Command, c: CommandContext): void {
  runs
    .command('list')
    .description('list runs, newest first')
    .option('--flow <name>', 'only runs of this flow')
    .addOption(
      new Option('--status <status>', 'only runs with this status').choices(
        RUN_STATUSES,
      ),
    )
    .option('--limit <n>', 'at most this many runs', positiveInt, 50)
    .option('--before <cursor>', 'the next page (the cursor a page printed)')
    .action(
      async (
        o: {
          flow?: string;
          status?: RunStatus;
          limit: number;
          before?: string;
        },
        cmd: Command,
      ) => {
        const listed = await c.openStore(cmd).list({
          limit: o.limit,
          ...(o.flow !== undefined && { flow: o.flow }),
          ...(o.status !== undefined && { status: o.status }),
          ...(o.before !== undefined && { before: o.before }),
        });
        // With the key, each head's seal is checked: one that fails says so instead of its status.
        const ring = c.keyIfGiven();
        const page = {
          ...listed,
          runs: listed.runs.map((r) => {
            const problem = ring && headProblem(ring, r);
            return problem ? { ...r, corrupt: corruptMessage(problem) } : r;
          }),
        };
        c.out(cmd, page, () => listText(page));
      },
    );

  runs
    .command('show')
    .description("a run's head, latest state and history")
    .argument('<id>', 'run id', runIdArg)
    .action(async (id: string, _o: unknown, cmd: Command) => {
      const shown = await showRun(c.openStore(cmd), c.key(), id);
      c.out(cmd, shown, () => showText(shown));
    });

  runs
    .command('inspect')
    .description(
      'a recovery dry run: which calls would replay, which are in doubt and why (writes nothing)',
    )
    .argument('<id>', 'run id', runIdArg)
    .option(
      '--idempotent <tools>',
      'comma-separated tools you know are idempotent (the CLI has no tool registry)',
      list,
    )
    .option(
      '--not-idempotent <tools>',
      'comma-separated tools you know are not idempotent',
      list,
    )
    .action(
      async (
        id: string,
        o: { idempotent?: string[]; notIdempotent?: string[] },
        cmd: Command,
      ) => {
        const report = await inspectRun(c.openStore(cmd), c.key(), id, {
          ...(o.idempotent && { idempotent: o.idempotent }),
          ...(o.notIdempotent && { notIdempotent: o.notIdempotent }),
        });
        if (report.verdict === 'corrupt') c.problemsFound();
        c.out(cmd, report, () => inspectionText(report));
      },
    );
}
