import type { InDoubtCall, RecordedDecision } from '../flow/flow.interfaces';
import { table, time } from './format';

/**
 * The calls in doubt as an operator checks them: one block per call, with what its system can be
 * searched by (the idempotency key, the arguments, when it started).
 */
export function inDoubtText(
  calls: ReadonlyArray<InDoubtCall & { action?: string }>,
): string {
  if (!calls.length) return '';
  let text =
    '\nIn doubt (may or may not have run): check each call at its system\n';
  for (const c of calls) {
    text += `  ${c.callId}  ${c.tool}${c.action ? `  ${c.action}` : ''}\n`;
    const rows: Array<[string, string]> = [
      ['why', c.why],
      ['started', time(c.startedAt)],
      [
        'idempotency key',
        c.idempotencyKey ?? '- (the key ring lacks its key id)',
      ],
      ['args', c.args === undefined ? '-' : JSON.stringify(c.args)],
      [
        'record',
        `superstep ${c.superstep}, segment ${c.segment}, seq ${c.seq}${c.attempt !== undefined ? `, attempt ${c.attempt}` : ''}`,
      ],
    ];
    for (const [k, v] of rows) text += `    ${`${k}:`.padEnd(17)}${v}\n`;
  }
  return text;
}

/** The run's recorded decisions, oldest first, or nothing when it has none. */
export function decisionsText(decisions: readonly RecordedDecision[]): string {
  if (!decisions.length) return '';
  return `\nDecisions\n${table(
    ['STEP', 'DECISION', 'CALLS', 'BY', 'AT', 'REASON'],
    decisions.map((d) => [
      String(d.step),
      d.sync
        ? `${d.kind} (sync)`
        : d.timedOut
          ? `${d.kind} (timed out)`
          : d.kind,
      d.calls.map((id, i) => `${id} ${d.tools[i] ?? ''}`.trim()).join(', ') ||
        '-',
      // The clock decided at an approval deadline: no person to name.
      d.by ?? (d.timedOut ? 'the clock' : '-'),
      time(d.at),
      d.reason ?? '-',
    ]),
  )}`;
}
