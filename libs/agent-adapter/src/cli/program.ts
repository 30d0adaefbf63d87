import { Command, CommanderError, Option } from 'commander';
import {
  CheckpointConflict,
  CheckpointKeyError,
  CheckpointNotFound,
  CheckpointStoreCorrupt,
  DriverNotInstalledError,
  DurableError,
  asError,
} from '../errors';
import type { CheckpointStore } from '../exec/checkpoints/checkpoint-store';
import { StoreDescriptorError } from '../exec/checkpoints/create-store';
import type { KeyRing } from '../exec/durable/key-ring';
import { CliError } from './cli.error';
import { CliMessages } from './cli.messages';
import { corruptMessage } from './corrupt-wording';
import { keyRingFromEnv, KEY_ENV } from './key';
import { scheduleCommands } from './schedule-commands';
import { forkCommand, type CommandContext } from './fork-command';
import { indent } from './args';
import { readCommands } from './read-commands';
import { verifyCommands } from './verify-commands';
import { writeCommands } from './write-commands';
import { resolveCommand } from './resolve-command';
import { restoreCommand } from './restore';
import { STORE_URL_HELP, storeFromUrl } from './store-url';

import { EXIT } from './exit-codes';

export { EXIT };

export const STORE_ENV = 'AGENT_ADAPTER_STORE';
export interface CliIo {
  stdout: (text: string) => void;
  stderr: (text: string) => void;
  env: NodeJS.ProcessEnv;
}

interface Globals {
  store?: string;
  json?: boolean;
}

/**
 * Runs the operator CLI on `argv` (the arguments after the program name) and resolves to the exit
 * code. Never throws and never exits the process: errors are printed (no stack trace for a user's
 * mistake) and mapped to an exit code.
 */
export async function runCli(argv: string[], io: CliIo): Promise<number> {
  let exitCode: number = EXIT.ok;
  let store: CheckpointStore | undefined;
  let ring: KeyRing | undefined;
  const print = (text: string) => io.stdout(text);

  const program = new Command('agent-adapter')
    .description(
      'Operate agent-adapter runs in a checkpoint store: list, show, verify, inspect, cancel, fork, export, prune.',
    )
    .exitOverride()
    .configureOutput({
      writeOut: (s) => io.stdout(s),
      writeErr: (s) => io.stderr(s),
    })
    .showHelpAfterError('(add --help for usage)')
    .addOption(
      new Option(
        '--store <url>',
        `the checkpoint store (default: $${STORE_ENV})`,
      ),
    )
    .option('--json', 'print JSON for machines instead of tables')
    .addHelpText(
      'after',
      `\nStore URLs:\n${indent(STORE_URL_HELP)}\n\nThe checkpoint key comes from $${KEY_ENV} (the secret, or a JSON key ring {"current": ..., "previous": [...]}).\nExit codes: 0 ok, 1 problems found (verify, inspect), 2 usage error or unknown run, 3 store unavailable or unexpected error.\n`,
    );

  const globals = (cmd: Command): Globals => cmd.optsWithGlobals<Globals>();
  const json = (cmd: Command) => globals(cmd).json === true;
  const openStore = (cmd: Command): CheckpointStore => {
    const url = globals(cmd).store ?? io.env[STORE_ENV];
    if (!url) {
      throw new CliError(
        CliMessages.noStore(STORE_ENV, indent(STORE_URL_HELP)),
      );
    }
    return (store ??= storeFromUrl(url));
  };
  const key = (): KeyRing => (ring ??= keyRingFromEnv(io.env));
  const out = (cmd: Command, value: unknown, human: () => string) =>
    print(json(cmd) ? `${JSON.stringify(value, null, 2)}\n` : human());

  const context: CommandContext = {
    openStore,
    key,
    keyIfGiven: () => (io.env[KEY_ENV] ? key() : undefined),
    out,
    print,
    problemsFound: () => void (exitCode = EXIT.problems),
  };

  const runs = program
    .command('runs')
    .description('operate on runs')
    .helpCommand(false);

  readCommands(runs, context);
  verifyCommands(runs, context);
  writeCommands(runs, context);
  resolveCommand(runs, context);
  restoreCommand(runs, context);
  forkCommand(runs, context);
  scheduleCommands(program, context);

  try {
    await program.parseAsync(argv, { from: 'user' });
  } catch (error) {
    exitCode = report(error, io);
  } finally {
    await store?.close().catch(() => undefined);
  }
  return exitCode;
}

/** Prints an error and gives its exit code: the message only, a stack trace only when unexpected. */
function report(error: unknown, io: CliIo): number {
  if (error instanceof CommanderError) {
    // Commander printed it already (usage, unknown option, help, version).
    return error.exitCode === 0 ? EXIT.ok : EXIT.usage;
  }
  const line = (text: string) => io.stderr(`agent-adapter: ${text}\n`);
  if (error instanceof CliError) {
    line(error.message);
    return error.exitCode;
  }
  if (error instanceof CheckpointStoreCorrupt) {
    line(corruptMessage(error));
    return EXIT.problems;
  }
  if (
    error instanceof CheckpointNotFound ||
    error instanceof CheckpointConflict ||
    error instanceof CheckpointKeyError ||
    error instanceof StoreDescriptorError ||
    error instanceof DriverNotInstalledError
  ) {
    line(error.message);
    return EXIT.usage;
  }
  if (error instanceof DurableError) {
    line(error.message);
    return EXIT.failure;
  }
  const e = asError(error);
  line(
    io.env.AGENT_ADAPTER_DEBUG
      ? (e.stack ?? e.message)
      : `${e.message} (set AGENT_ADAPTER_DEBUG=1 for details)`,
  );
  return EXIT.failure;
}
