/**
 * How a Postgres write binds its call records: a small batch as rows of a VALUES list of scalar
 * parameters (one prepared statement per size), a larger one as one array per column through
 * unnest (one statement for any size). On a 3-step flow, VALUES rows cost the server ~0.025 ms less
 * a statement than unnest (bench/RESULTS.md, eighteenth session).
 */
import type { CallRecord } from '../checkpoint-store';
import { CALL_COLUMNS } from './sql.rows';
import type { SqlNames } from './sql.schema';

/** The largest batch bound as VALUES rows. */
export const VALUES_ROWS = 8;

type Column = readonly [keyof CallRecord, string];
/** The columns a write binds per call: with each call's segment, or without (bound once). */
const WITH_SEGMENT: readonly Column[] = [
  ['superstep', 'int'],
  ['segment', 'int'],
  ['seq', 'int'],
  ['sealed', 'text'],
];
const WITHOUT_SEGMENT = WITH_SEGMENT.filter(([key]) => key !== 'segment');

function fields(own: boolean): readonly Column[] {
  return own ? WITH_SEGMENT : WITHOUT_SEGMENT;
}

/** Pushes the parameters of `calls` after `params`, as `insertCallsSql` numbers them. */
export function bindCalls(
  calls: readonly CallRecord[],
  params: unknown[],
  own: boolean,
): void {
  const columns = fields(own);
  if (calls.length > VALUES_ROWS) {
    for (const [key] of columns) params.push(calls.map((c) => c[key]));
    return;
  }
  for (const c of calls) for (const [key] of columns) params.push(c[key]);
}

/**
 * The INSERT of `size` (at least one) calls for the head the write matched, their parameters
 * numbered from `at + 1`. `segment` is the segment column's source: each call's own (undefined) or
 * one the write binds once (an append's `$2`).
 */
export function insertCallsSql(
  n: SqlNames,
  size: number,
  at: number,
  segment?: string,
): string {
  const columns = fields(segment === undefined);
  const names = columns.map(([key]) => key).join(', ');
  let source: string;
  if (size > VALUES_ROWS) {
    const arrays = columns.map(([, type], i) => `$${at + i + 1}::${type}[]`);
    source = `unnest(${arrays.join(', ')})`;
  } else {
    const rows = Array.from({ length: size }, (_, r) => {
      const first = at + r * columns.length;
      // The first row types the columns; the others follow it.
      const cells = columns.map(
        ([, type], i) => `$${first + i + 1}${r === 0 ? `::${type}` : ''}`,
      );
      return `(${cells.join(', ')})`;
    });
    source = `(VALUES ${rows.join(', ')})`;
  }
  return `INSERT INTO ${n.calls} (${CALL_COLUMNS})
    SELECT head.run_id, c.superstep, ${segment ?? 'c.segment'}, c.seq, c.sealed FROM head, ${source} AS c(${names})`;
}
