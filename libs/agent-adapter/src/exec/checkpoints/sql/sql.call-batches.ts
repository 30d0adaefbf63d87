/**
 * Where the SQL store keeps call records. A save's records go into its checkpoint row's `calls`
 * text (with their first and last superstep in `calls_from` and `calls_to`), so a save writes one
 * row, not one more per record: a flow's saves carry its `done` results and the next node's first
 * `started`. A fenced append's records, and a save's of a superstep after its own step (which the
 * runner never sends), go into the calls table. A record's superstep is at most the step of the
 * checkpoint row that keeps it, so the records of superstep k are in the calls table or in rows of
 * step k or later whose range covers k.
 *
 * Nothing needs a per-record key in a table: the head keeps the run's last record and every write
 * appends after it in order (call-order.ts), which is what refuses a duplicate.
 */
import type { CallRecord } from '../checkpoint-store';

/** A save's records split by where they are kept. */
export interface SplitCalls {
  /** Kept in the checkpoint row, encoded (null when none), with their supersteps' range. */
  inRow: string | null;
  from: number | null;
  to: number | null;
  /** Kept in the calls table. */
  inTable: readonly CallRecord[];
}

/** Splits a save's records of checkpoint `step` (see the file comment). */
export function splitSaveCalls(
  step: number,
  calls: readonly CallRecord[],
): SplitCalls {
  let inRow = '';
  let from: number | null = null;
  let to: number | null = null;
  let inTable: CallRecord[] | undefined;
  for (const c of calls) {
    if (c.superstep > step) {
      (inTable ??= []).push(c);
      continue;
    }
    inRow += encode(c);
    from = from === null ? c.superstep : Math.min(from, c.superstep);
    to = to === null ? c.superstep : Math.max(to, c.superstep);
  }
  return {
    inRow: inRow === '' ? null : inRow,
    from,
    to,
    inTable: inTable ?? [],
  };
}

/** A row's `calls` text for `records` (null for none). */
export function encodeCalls(records: readonly CallRecord[]): string | null {
  return records.length ? records.map(encode).join('') : null;
}

/**
 * One record in a row's `calls` text: a header line `superstep segment seq length`, then the sealed
 * text itself, as long as the header says. No escaping: the sealed text is stored as it is.
 */
function encode(c: CallRecord): string {
  return `${c.superstep} ${c.segment} ${c.seq} ${c.sealed.length}\n${c.sealed}`;
}

// Whole numbers, each a safe integer (a segment is a large number: it carries the incarnation).
const HEADER = /^(\d{1,15}) (\d{1,15}) (\d{1,15}) (\d{1,15})$/;

/** The records of a row's `calls` text, or why it cannot be read (an edited or truncated text). */
export function decodeCalls(
  runId: string,
  text: string,
): CallRecord[] | { why: string } {
  const records: CallRecord[] = [];
  let at = 0;
  while (at < text.length) {
    const end = text.indexOf('\n', at);
    const header = end < 0 ? null : HEADER.exec(text.slice(at, end));
    if (header === null)
      return { why: `its calls text has no record header at ${at}` };
    const [superstep, segment, seq, length] = header.slice(1).map(Number);
    const start = end + 1;
    const sealed = text.slice(start, start + (length ?? 0));
    if (length === undefined || sealed.length !== length)
      return { why: `its calls text ends inside a record at ${at}` };
    records.push({
      runId,
      superstep: superstep ?? 0,
      segment: segment ?? 0,
      seq: seq ?? 0,
      sealed,
    });
    at = start + length;
  }
  return records;
}

/** Why a row's records cannot be read, for CheckpointStoreCorrupt and `unreadable`. */
export const rowCalls = (step: number): string =>
  `the call-record text of checkpoint step ${Number(step)}`;
