import { Messages } from '../../../errors/messages';
import { CheckpointStoreUnavailable } from '../../../errors';
import type {
  CallRecord,
  CheckpointRecord,
  SaveOptions,
} from '../checkpoint-store';
import type { SqlDialect, SqlNames } from './sql.schema';

/** Does one statement (or one transaction): the dialect-specific part of the store. */
export interface Engine {
  readonly dialect: SqlDialect;
  all<T>(sql: string, params: unknown[]): Promise<T[]>;
  /** Compare-and-set save; resolves to whether the head matched (else nothing was written). */
  save(
    n: SqlNames,
    cp: CheckpointRecord,
    o: SaveOptions,
    now: number,
  ): Promise<boolean>;
  /** Fenced append; resolves to whether the head matched (else nothing was written). */
  recordCall(
    n: SqlNames,
    runId: string,
    segment: number,
    calls: CallRecord[],
    /** The head seal (RunHead.sealed) the append leaves. */
    head: string | undefined,
  ): Promise<boolean>;
  /** A write of one statement; resolves to the rows it changed. */
  change(sql: string, params: unknown[]): Promise<number>;
  /** Removes the run, its checkpoints and calls atomically; whether anything existed. */
  deleteRun(n: SqlNames, runId: string): Promise<boolean>;
  /**
   * Runs the DDL under a lock that serialises creators. Refuses (before creating anything) when
   * the runs table exists without the meta table: tables of the same name made by something else.
   */
  ddl(n: SqlNames, statements: string[]): Promise<void>;
}

export const UNFINISHED_SQL = `status IN ('running', 'paused')`;

/** The refusal of tables that agent-adapter did not make (or the DDL's own error, unchanged). */
export function foreignTables(n: SqlNames, cause?: Error): Error {
  if (cause && !/exists without its meta table/.test(cause.message))
    return cause;
  return new CheckpointStoreUnavailable(Messages.foreignTables(n.runs));
}
