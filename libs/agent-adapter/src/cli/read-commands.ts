import { Option, type Command } from 'commander';
import type { RunStatus } from '../exec/checkpoints/checkpoint-store';
import type { CommandContext } from './fork-command';
import { decisionsText, inDoubtText } from './doubt-format';
import { fields, table, time } from './format';
import { inspectRun, type Inspection } from './inspect';
import { headProblem } from '../flow/runner/run-reader';
import { list, positiveInt } from './args';
import { corruptMessage } from './corrupt-wording';
import { showRun } from './operations';
import { runIdArg } from './run-id-arg';

const STATUSES: RunStatus[] = ['running', 'paused', 'done', 'failed'];

/** `runs list`, `runs show` and `runs inspect`: reads, nothing written. */
export function readCommands(runs: Command, c: CommandContext): void {
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
        c.out(
          cmd,
          page,
          () =>
            (table(
              ['RUN', 'FLOW', 'STATUS', 'STEP', 'UPDATED', 'OWNER', 'LEASE'],
              page.runs.map((r) => [
                r.runId,
                r.flow,
                'corrupt' in r ? 'CORRUPT' : r.status,
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
      const shown = await showRun(c.openStore(cmd), c.key(), id);
      c.out(cmd, shown, () => {
        const { head, latest } = shown;
        let text = fields([
          ['run', head.runId],
          ['flow', head.flow],
          ['status', head.status],
          ['step', String(head.step)],
          ['segment', String(head.segment)],
          ['updated', time(head.updatedAt)],
          ['owner', head.owner],
          [
            'lease until',
            head.leaseExpiresAt &&
              `${time(head.leaseExpiresAt)}${head.status === 'running' ? ` (${shown.leaseLive ? 'live' : 'expired'})` : ''}`,
          ],
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
        text += inDoubtText(shown.inDoubt);
        text += decisionsText(shown.decisions);
        return text;
      });
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
        c.out(cmd, report, () => describeInspection(report));
      },
    );
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
  text += inDoubtText(r.inDoubt);
  if (r.pending)
    text += `\nWaiting for approval: ${r.pending.tool} (node ${r.pending.node}) ${JSON.stringify(r.pending.args)}\n`;
  text += decisionsText(r.decisions);
  for (const p of r.problems) text += `\nPROBLEM: ${p}\n`;
  return text;
}
