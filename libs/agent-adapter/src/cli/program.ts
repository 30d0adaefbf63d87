import { readFile, writeFile } from 'node:fs/promises';
import {
  Command,
  CommanderError,
  InvalidArgumentError,
  Option,
} from 'commander';
import {
  CheckpointConflict,
  CheckpointKeyError,
  CheckpointNotFound,
  CheckpointStoreCorrupt,
  DriverNotInstalledError,
  DurableError,
} from '../errors';
import type {
  CheckpointStore,
  RunStatus,
} from '../exec/checkpoints/checkpoint-store';
import { StoreDescriptorError } from '../exec/checkpoints/create-store';
import type { KeyRing } from '../exec/durable/key-ring';
import { CliError } from './cli.error';
import { corruptMessage } from './corrupt-wording';
import { fields, parseBefore, table, time } from './format';
import { inspectRun, type Inspection } from './inspect';
import { keyRingFromEnv, KEY_ENV } from './key';
import { forkCommand } from './fork-command';
import { cancelRun, pruneRuns, showRun } from './operations';
import { runIdArg } from './run-id-arg';
import { STORE_URL_HELP, storeFromUrl } from './store-url';
import {
  exportRun,
  verifyBundle,
  verifyRun,
  type RunVerification,
} from './verify';

/** Exit codes (also in the README). */
export const EXIT = {
  ok: 0,
  /** verify/inspect found corrupt rows or a bad bundle. */
  problems: 1,
  /** The user's mistake: bad arguments, unknown URL scheme, missing key, unknown run, nothing to do. */
  usage: 2,
  /** The store could not be used (unreachable, tables missing) or an unexpected error. */
  failure: 3,
} as const;

export const STORE_ENV = 'AGENT_ADAPTER_STORE';
export interface CliIo {
  stdout: (text: string) => void;
  stderr: (text: string) => void;
  env: NodeJS.ProcessEnv;
}

const STATUSES: RunStatus[] = ['running', 'paused', 'done', 'failed'];

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
        `No store: give --store <url> or set $${STORE_ENV}. Store URLs:\n${indent(STORE_URL_HELP)}`,
      );
    }
    return (store ??= storeFromUrl(url));
  };
  const key = (): KeyRing => (ring ??= keyRingFromEnv(io.env));
  const out = (cmd: Command, value: unknown, human: () => string) =>
    print(json(cmd) ? `${JSON.stringify(value, null, 2)}\n` : human());

  const runs = program
    .command('runs')
    .description('operate on runs')
    .helpCommand(false);

  runs
    .command('list')
    .description('list runs, newest first')
    .option('--flow <name>', 'only runs of this flow')
    .addOption(
      new Option('--status <status>', 'only runs with this status').choices(
        STATUSES,
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
        const page = await openStore(cmd).list({
          limit: o.limit,
          ...(o.flow !== undefined && { flow: o.flow }),
          ...(o.status !== undefined && { status: o.status }),
          ...(o.before !== undefined && { before: o.before }),
        });
        out(
          cmd,
          page,
          () =>
            (table(
              ['RUN', 'FLOW', 'STATUS', 'STEP', 'UPDATED', 'OWNER', 'LEASE'],
              page.runs.map((r) => [
                r.runId,
                r.flow,
                r.status,
                String(r.step),
                time(r.updatedAt),
                r.owner ?? '-',
                time(r.leaseExpiresAt),
              ]),
            ) || 'No runs.\n') +
            (page.next !== undefined
              ? `More: agent-adapter runs list --before ${page.next}\n`
              : ''),
        );
      },
    );

  runs
    .command('show')
    .description("a run's head, latest state and history")
    .argument('<id>', 'run id', runIdArg)
    .action(async (id: string, _o: unknown, cmd: Command) => {
      const shown = await showRun(openStore(cmd), key(), id);
      out(cmd, shown, () => {
        const { head, latest } = shown;
        let text = fields([
          ['run', head.runId],
          ['flow', head.flow],
          ['status', head.status],
          ['step', String(head.step)],
          ['segment', String(head.segment)],
          ['updated', time(head.updatedAt)],
          ['owner', head.owner],
          ['lease until', head.leaseExpiresAt && time(head.leaseExpiresAt)],
          ['superstep', latest && String(latest.superstep)],
          ['frontier', latest && latest.frontier.join(', ')],
          ['identity', latest?.identity],
          ['recoveries', latest?.recoveries],
          ['forked from', latest?.forkedFrom],
          ['pending', latest?.pending],
          [
            'error',
            latest?.error && `${latest.error.name}: ${latest.error.message}`,
          ],
          ['state', latest?.state],
        ]);
        text += `\nCheckpoints\n${table(
          [
            'STEP',
            'STATUS',
            'SEGMENT',
            'SUPERSTEP',
            'REASON',
            'FRONTIER',
            'SEAL',
          ],
          shown.checkpoints.map((c) => [
            String(c.step),
            c.status,
            String(c.segment),
            c.superstep === undefined ? '?' : String(c.superstep),
            c.reason ?? '?',
            c.frontier?.join(',') ?? '?',
            c.corrupt ? `CORRUPT: ${c.corrupt}` : 'ok',
          ]),
        )}`;
        text += `\nCalls\n${
          table(
            [
              'SUPERSTEP',
              'SEG/SEQ',
              'NODE',
              'TOOL',
              'PHASE',
              'OUTCOME',
              'AT',
              'SEAL',
            ],
            shown.calls.map((c) => [
              String(c.superstep),
              `${c.segment}/${c.seq}`,
              c.node === undefined ? '?' : `${c.node}#${c.index}`,
              c.tool ?? '?',
              c.phase ?? '?',
              c.outcome ?? '-',
              time(c.at),
              c.corrupt ? `CORRUPT: ${c.corrupt}` : 'ok',
            ]),
          ) || '(none)\n'
        }`;
        return text;
      });
    });

  runs
    .command('verify')
    .description(
      'check every signature and sequence of a run (or of all runs, or of an exported bundle); exit 1 on any problem',
    )
    .argument('[id]', 'run id', runIdArg)
    .option('--all', 'every run in the store')
    .option('--bundle <file>', 'an exported bundle, checked offline (no store)')
    .action(
      async (
        id: string | undefined,
        o: { all?: boolean; bundle?: string },
        cmd: Command,
      ) => {
        const given = [
          id !== undefined,
          o.all === true,
          o.bundle !== undefined,
        ];
        if (given.filter(Boolean).length !== 1) {
          throw new CliError(
            'runs verify: give exactly one of <id>, --all or --bundle <file>.',
          );
        }
        let results: RunVerification[];
        let signed: boolean | undefined;
        if (o.bundle !== undefined) {
          const parsed = await readJson(o.bundle);
          let checked: ReturnType<typeof verifyBundle>;
          try {
            checked = verifyBundle(key(), parsed);
          } catch (error) {
            if (!(error instanceof TypeError)) throw error;
            throw new CliError(`${o.bundle}: ${error.message}`, EXIT.problems);
          }
          signed = checked.signed;
          results = [checked];
        } else if (id !== undefined) {
          const checked = await verifyRun(openStore(cmd), key(), id);
          if (!checked) throw new CheckpointNotFound(id);
          results = [checked];
        } else {
          results = [];
          const s = openStore(cmd);
          for (let before: string | undefined; ;) {
            const page = await s.list({
              limit: 100,
              ...(before !== undefined && { before }),
            });
            for (const head of page.runs) {
              const checked = await verifyRun(s, key(), head.runId);
              if (checked) results.push(checked);
            }
            if (page.next === undefined) break;
            before = page.next;
          }
        }
        const bad = results.filter((r) => r.problems.length > 0);
        if (bad.length) exitCode = EXIT.problems;
        out(
          cmd,
          {
            ok: bad.length === 0,
            ...(signed !== undefined && { signed }),
            runs: results,
          },
          () => {
            let text = '';
            for (const r of results) {
              text += `${r.problems.length ? 'CORRUPT' : 'ok'}  ${r.runId}  (${r.checkpoints} checkpoints, ${r.calls} call records)\n`;
              for (const p of r.problems)
                text += `  - ${p.where}: ${p.detail}\n`;
            }
            if (signed !== undefined)
              text += `bundle signature: ${signed ? 'ok' : 'INVALID'}\n`;
            text += `${results.length} run(s) checked, ${bad.length} with problems.\n`;
            return text;
          },
        );
      },
    );

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
        const report = await inspectRun(openStore(cmd), key(), id, {
          ...(o.idempotent && { idempotent: o.idempotent }),
          ...(o.notIdempotent && { notIdempotent: o.notIdempotent }),
        });
        if (report.verdict === 'corrupt') exitCode = EXIT.problems;
        out(cmd, report, () => describeInspection(report));
      },
    );

  runs
    .command('cancel')
    .description(
      'end a running or paused run as failed ("cancelled by operator"), fencing any worker driving it',
    )
    .argument('<id>', 'run id', runIdArg)
    .option('--reason <text>', 'why, recorded in the run')
    .action(async (id: string, o: { reason?: string }, cmd: Command) => {
      const done = await cancelRun(openStore(cmd), key(), id, {
        ...(o.reason !== undefined && { reason: o.reason }),
      });
      out(
        cmd,
        done,
        () =>
          `Cancelled run ${id} (was ${done.was}): failed checkpoint at step ${done.step}, segment ${done.segment}.\n`,
      );
    });

  forkCommand(runs, { openStore, key, out });

  runs
    .command('export')
    .description(
      'write a self-contained, signed audit bundle of a run (check it with runs verify --bundle)',
    )
    .argument('<id>', 'run id', runIdArg)
    .option('--out <file>', 'write to this file (default: stdout)')
    .action(async (id: string, o: { out?: string }, cmd: Command) => {
      const bundle = await exportRun(openStore(cmd), key(), id);
      if (!bundle) throw new CheckpointNotFound(id);
      const text = `${JSON.stringify(bundle, null, 2)}\n`;
      if (o.out === undefined) {
        print(text);
        return;
      }
      await writeFile(o.out, text, { mode: 0o600 });
      out(
        cmd,
        {
          file: o.out,
          runId: id,
          checkpoints: bundle.checkpoints.length,
          calls: bundle.calls.length,
        },
        () =>
          `Wrote ${o.out}: run ${id}, ${bundle.checkpoints.length} checkpoints, ${bundle.calls.length} call records, signed.\n`,
      );
    });

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
        const pruned = await pruneRuns(openStore(cmd), o.finishedBefore, {
          ...(o.flow !== undefined && { flow: o.flow }),
          ...(o.dryRun && { dryRun: true }),
        });
        out(
          cmd,
          { ...pruned, before: time(o.finishedBefore) },
          () =>
            `${pruned.dryRun ? 'Would delete' : 'Deleted'} ${pruned.deleted} finished run(s) last written before ${time(o.finishedBefore)} (${pruned.scanned} finished run(s) scanned).\n`,
        );
      },
    );

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
  const e = error instanceof Error ? error : new Error(String(error));
  line(
    io.env.AGENT_ADAPTER_DEBUG
      ? (e.stack ?? e.message)
      : `${e.message} (set AGENT_ADAPTER_DEBUG=1 for details)`,
  );
  return EXIT.failure;
}

function describeInspection(r: Inspection): string {
  let text = fields([
    ['run', r.runId],
    ['flow', r.flow],
    ['status', r.status],
    ['step', String(r.step)],
    ['superstep', r.superstep === undefined ? undefined : String(r.superstep)],
    ['segment', String(r.segment)],
    ['recoveries', r.recoveries],
    ['owner', r.owner],
    [
      'lease',
      r.leaseExpiresAt === undefined
        ? undefined
        : `${time(r.leaseExpiresAt)} (${r.leaseLive ? 'live' : 'expired'})`,
    ],
    ['verdict', r.verdict],
  ]);
  text += `\n${r.summary}\n`;
  if (
    r.frontier.length &&
    (r.verdict === 'recoverable' || r.verdict === 'needs-decision')
  )
    text += `\nNodes that run again: ${r.frontier.join(', ')}\n`;
  if (r.replay.length) {
    text += `\nWould replay (finished; their recorded outcome is returned, the tool is not called)\n${table(
      ['NODE', 'TOOL', 'SEG/SEQ', 'OUTCOME'],
      r.replay.map((c) => [
        `${c.node}#${c.index}`,
        c.tool,
        `${c.segment}/${c.seq}`,
        c.outcome === 'value' ? 'value' : `error ${c.error?.name ?? ''}`.trim(),
      ]),
    )}`;
  }
  if (r.inDoubt.length) {
    text += `\nIn doubt (may or may not have run)\n${table(
      ['NODE', 'TOOL', 'SEG/SEQ', 'AT', 'WHY', 'ACTION', 'ARGS'],
      r.inDoubt.map((c) => [
        `${c.node}#${c.index}`,
        c.tool,
        `${c.segment}/${c.seq}`,
        time(c.at),
        c.why,
        c.action,
        c.args === undefined ? '-' : JSON.stringify(c.args),
      ]),
    )}`;
  }
  if (r.pending)
    text += `\nWaiting for approval: ${r.pending.tool} (node ${r.pending.node}) ${JSON.stringify(r.pending.args)}\n`;
  for (const p of r.problems) text += `\nPROBLEM: ${p}\n`;
  return text;
}

async function readJson(file: string): Promise<unknown> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (error) {
    throw new CliError(`Cannot read ${file}: ${(error as Error).message}`);
  }
  try {
    return JSON.parse(text) as unknown;
  } catch (error) {
    throw new CliError(
      `${file} is not JSON (${(error as Error).message}): not an audit bundle.`,
      EXIT.problems,
    );
  }
}

function positiveInt(value: string): number {
  const n = Number(value);
  if (!/^\d+$/.test(value) || n < 1)
    throw new InvalidArgumentError('must be a positive integer.');
  return n;
}

function list(value: string, previous: string[] = []): string[] {
  return [
    ...previous,
    ...value
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean),
  ];
}

function indent(text: string): string {
  return text
    .split('\n')
    .map((l) => `  ${l}`)
    .join('\n');
}
