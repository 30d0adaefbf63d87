import { Messages } from '../../../errors/messages';
import { CheckpointStoreUnavailable } from '../../../errors';
import type {
  CallRecord,
  CheckpointRecord,
  SaveOptions,
} from '../checkpoint-store';
import type { SqlDialect, SqlNames } from './sql.schema';
import { appendParams, saveParams } from './sql.writes';

/**
 * Does one statement (or one transaction): the dialect-specific part of the store. A save and an
 * append bind their parameters here, once, in the numbering `sql.writes` gives them; each engine
 * makes the writes atomic its own way (`writeSave`, `writeAppend`).
 */
export abstract class Engine {
  abstract readonly dialect: SqlDialect;

  /** The tables this engine writes: one store's (its schema and prefix). */
  constructor(readonly tables: SqlNames) {}

  abstract all<T>(sql: string, params: unknown[]): Promise<T[]>;

  /**
   * Compare-and-set save; resolves to whether the head matched (else nothing was written). Not
   * async: the engine's write is the one promise of the call (the store awaits it in a try that
   * also catches a throw from binding).
   */
  save(cp: CheckpointRecord, o: SaveOptions, now: number): Promise<boolean> {
    return this.writeSave(cp, o.calls ?? [], saveParams(cp, o, now));
  }

  /** Fenced append; resolves to whether the head matched (else nothing was written). */
  recordCall(
    runId: string,
    segment: number,
    calls: CallRecord[],
    /** The head seal (RunHead.sealed) the append leaves. */
    head: string | undefined,
  ): Promise<boolean> {
    return this.writeAppend(calls, appendParams(runId, segment, calls, head));
  }

  /** The head write over `saveParams`, the checkpoint and `calls`: all or nothing. */
  protected abstract writeSave(
    cp: CheckpointRecord,
    calls: readonly CallRecord[],
    params: unknown[],
  ): Promise<boolean>;

  /** The head write over `appendParams` and `calls`: all or nothing. */
  protected abstract writeAppend(
    calls: readonly CallRecord[],
    params: unknown[],
  ): Promise<boolean>;

  /** A write of one statement; resolves to the rows it changed. */
  abstract change(sql: string, params: unknown[]): Promise<number>;
  /** Removes the run, its checkpoints and calls atomically; whether anything existed. */
  abstract deleteRun(runId: string): Promise<boolean>;
  /**
   * Runs the DDL under a lock that serialises creators. Refuses (before creating anything) when
   * the runs table exists without the meta table: tables of the same name made by something else.
   */
  abstract ddl(statements: string[]): Promise<void>;
}

/** The refusal of tables that agent-adapter did not make (or the DDL's own error, unchanged). */
export function foreignTables(n: SqlNames, cause?: Error): Error {
  if (cause && !/exists without its meta table/.test(cause.message))
    return cause;
  return new CheckpointStoreUnavailable(Messages.foreignTables(n.runs));
}
