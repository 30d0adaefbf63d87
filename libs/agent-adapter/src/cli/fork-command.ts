import { InvalidArgumentError, type Command } from 'commander';
import type { CheckpointStore } from '../exec/checkpoints/checkpoint-store';
import type { KeyRing } from '../exec/durable/key-ring';
import { CliMessages } from './cli.messages';
import { forkRun } from './fork';
import { runIdArg } from './run-id-arg';

/** What a command needs from `runCli`: the store, the key ring, and output (human or --json). */
export interface CommandContext {
  openStore: (cmd: Command) => CheckpointStore;
  key: () => KeyRing;
  /** The key ring when $CHECKPOINT_KEY is set (commands that can do without it). */
  keyIfGiven: () => KeyRing | undefined;
  out: (cmd: Command, value: unknown, human: () => string) => void;
  /** Raw output (an export bundle on stdout). */
  print: (text: string) => void;
  /** The command found problems (verify, inspect): the CLI exits with `EXIT.problems`. */
  problemsFound: () => void;
}

/** `runs fork <id> --from-step <n> [--run-id <id>] [--cancel-source]`. */
export function forkCommand(runs: Command, c: CommandContext): void {
  runs
    .command('fork')
    .description(
      'start a new run from checkpoint N of an ended run (e.g. after a graph change); a worker recovers it',
    )
    .argument('<id>', 'run id', runIdArg)
    .requiredOption(
      '--from-step <n>',
      'the checkpoint step to start from',
      nonNegativeInt,
    )
    .option('--run-id <id>', 'the new run id (default: random)', runIdArg)
    .option(
      '--cancel-source',
      'if the run has not ended, cancel it first (as runs cancel does, fencing any worker on it); without it an unfinished run is refused',
    )
    .action(
      async (
        id: string,
        o: { fromStep: number; runId?: string; cancelSource?: boolean },
        cmd: Command,
      ) => {
        const forked = await forkRun(
          c.openStore(cmd),
          c.key(),
          id,
          o.fromStep,
          {
            ...(o.runId !== undefined && { newRunId: o.runId }),
            ...(o.cancelSource && { cancelSource: true }),
          },
        );
        const was = forked.cancelled;
        c.out(
          cmd,
          forked,
          () =>
            (was
              ? `Cancelled run ${id} (was ${was.was}): failed checkpoint at step ${was.step}, segment ${was.segment}.\n`
              : '') +
            `Forked run ${forked.runId} from ${id} step ${o.fromStep} (superstep ${forked.superstep}, next: ${forked.frontier.join(', ')}).\nA worker runs it on its next recoverAll, or call recover(flow, "${forked.runId}").\n`,
        );
      },
    );
}

function nonNegativeInt(value: string): number {
  if (!/^\d+$/.test(value))
    throw new InvalidArgumentError(CliMessages.stepNumber());
  return Number(value);
}
