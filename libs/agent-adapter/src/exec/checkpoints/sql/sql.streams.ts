/** The SQL store's stream read (its append is in sql.writes, with the other fenced writes). */
import type { StreamQuery, StreamRecord } from '../checkpoint-store';
import type { Engine } from './sql.engine';
import { STREAM_COLUMNS, toStreamRecord, type StreamRow } from './sql.rows';
import type { SqlNames } from './sql.schema';

/** Stream rows in offset order: from an offset on, of one superstep or all. */
export async function readStreamRows(
  engine: Engine,
  n: SqlNames,
  runId: string,
  query: StreamQuery = {},
): Promise<StreamRecord[]> {
  const { from = 0, superstep, limit = 100 } = query;
  const select = `SELECT ${STREAM_COLUMNS} FROM ${n.stream} WHERE run_id = $1 AND entry_no >= $2`;
  const rows = await (superstep === undefined
    ? engine.all<StreamRow>(`${select} ORDER BY entry_no LIMIT $3`, [
        runId,
        from,
        limit,
      ])
    : engine.all<StreamRow>(
        `${select} AND superstep = $3 ORDER BY entry_no LIMIT $4`,
        [runId, from, superstep, limit],
      ));
  return rows.map(toStreamRecord);
}
