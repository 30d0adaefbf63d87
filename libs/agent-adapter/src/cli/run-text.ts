import type { RunHead } from '../exec/checkpoints/checkpoint-store';
import { decisionsText, inDoubtText } from './doubt-format';
import { dueCell, dueOf } from './due-time';
import { fields, table, time } from './format';
import type { Inspection } from './inspect';
import type { ShownRun } from './operations';

/**
 * What `runs list`, `runs show` and `runs inspect` print for people (`--json` prints the values).
 * A head's due time is named for what it is: a running run's lease, a sleeping run's wake time, a
 * paused run's approval deadline.
 */

/** `runs list`: one row per head, and the next page's command. */
export function listText(page: {
  runs: Array<RunHead & { corrupt?: string }>;
  next?: string;
}): string {
  return (
    (table(
      ['RUN', 'FLOW', 'STATUS', 'STEP', 'UPDATED', 'OWNER', 'LEASE / DUE'],
      page.runs.map((r) => [
        r.runId,
        r.flow,
        r.corrupt !== undefined ? 'CORRUPT' : r.status,
        String(r.step),
        time(r.updatedAt),
        r.owner ?? '-',
        // A corrupt head's columns are not trusted: its due time is not named by its status.
        r.corrupt !== undefined ? time(r.leaseExpiresAt) : dueCell(r),
      ]),
    ) || 'No runs.\n') +
    (page.next !== undefined
      ? `More: agent-adapter runs list --before ${page.next}\n`
      : '')
  );
}

/** The head's due time as a `runs show` / `runs inspect` field, or none. */
function dueField(
  head: Pick<RunHead, 'status' | 'leaseExpiresAt'>,
  latest: Parameters<typeof dueOf>[1],
  live: boolean,
): [string, string | undefined] {
  // A released lease (0) is no time: nothing shown, as before.
  const due = head.leaseExpiresAt === 0 ? undefined : dueOf(head, latest);
  if (!due) return ['lease until', undefined];
  const state =
    head.status === 'running' ? ` (${live ? 'live' : 'expired'})` : '';
  return [
    due.label,
    `${time(due.at)}${state}${due.then ? `, ${due.then}` : ''}`,
  ];
}

/** `runs show`: the head, the latest checkpoint, the history, calls in doubt and decisions. */
export function showText(shown: ShownRun): string {
  const { head, latest } = shown;
  let text = fields([
    ['run', head.runId],
    ['flow', head.flow],
    ['status', head.status],
    ['step', String(head.step)],
    ['segment', String(head.segment)],
    ['updated', time(head.updatedAt)],
    ['owner', head.owner],
    dueField(head, latest, shown.leaseLive),
    ['superstep', latest && String(latest.superstep)],
    ['frontier', latest && latest.frontier.join(', ')],
    ['identity', latest?.identity],
    ['recoveries', latest?.recoveries],
    ['forked from', latest?.forkedFrom],
    ['pending', head.status === 'paused' ? latest?.pending : undefined],
    ['error', latest?.error && `${latest.error.name}: ${latest.error.message}`],
    ['state', latest?.state],
  ]);
  text += `\nCheckpoints\n${table(
    ['STEP', 'STATUS', 'SEGMENT', 'SUPERSTEP', 'REASON', 'FRONTIER', 'SEAL'],
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
}

/** `runs inspect`: the verdict, its summary, what would replay, what is in doubt or waits. */
export function inspectionText(r: Inspection): string {
  const sealed = { wakeAt: r.wakeAt, pending: r.pending };
  let text = fields([
    ['run', r.runId],
    ['flow', r.flow],
    ['status', r.status],
    ['step', String(r.step)],
    ['superstep', r.superstep === undefined ? undefined : String(r.superstep)],
    ['segment', String(r.segment)],
    ['recoveries', r.recoveries],
    ['owner', r.owner],
    // Only a running run's due time is its lease (the one `lease` line people and scripts read).
    r.status === 'running'
      ? [
          'lease',
          r.leaseExpiresAt === undefined
            ? undefined
            : `${time(r.leaseExpiresAt)} (${r.leaseLive ? 'live' : 'expired'})`,
        ]
      : dueField(r, sealed, r.leaseLive),
    ['verdict', r.verdict],
  ]);
  text += `\n${r.summary}\n`;
  if (r.failover)
    text += `\nFailover: written last by replication history ${r.failover.lostHistory}, now ${r.failover.history}. Mark it restored: agent-adapter runs restored --failover\n`;
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
