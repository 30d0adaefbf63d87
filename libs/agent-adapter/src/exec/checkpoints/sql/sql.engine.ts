import { Messages } from '../../../errors/messages';
import { CheckpointStoreUnavailable } from '../../../errors';
import type {
  CallRecord,
  CheckpointRecord,
  QueuePlacement,
  SaveOptions,
} from '../checkpoint-store';
import { splitSaveCalls } from './sql.call-batches';
import type { SqlDialect, SqlNames } from './sql.schema';
import {
  appendHeadSql,
  appendParams,
  type StreamParams,
  enqueueHeadSql,
  NO_ROW_CALLS,
  saveHeadSql,
  saveParams,
} from './sql.writes';

/** The head writes of `Engine.headText`. */
type HeadWrite = 'create' | 'update' | 'enqueue' | 'append';

/** One statement of a transaction given as steps (see `Engine.admission`): its rows come back. */
export interface SqlStep {
  sql: string;
  params: unknown[];
}

/**
 * Does one statement (or one transaction): the dialect-specific part of the store. A save and an
 * append bind their parameters here, once, in the numbering `sql.writes` gives them; each engine
 * makes the writes atomic its own way (`writeSave`, `writeAppend`).
 */
export abstract class Engine {
  abstract readonly dialect: SqlDialect;

  private readonly heads = new Map<HeadWrite, string>();

  /** The tables this engine writes: one store's (its schema and prefix). */
  constructor(readonly tables: SqlNames) {}

  /** A head write's text, built once: the same string on every write (cheap to look up). */
  protected headText(write: HeadWrite): string {
    let text = this.heads.get(write);
    if (text === undefined) {
      const n = this.tables;
      text =
        write === 'enqueue'
          ? enqueueHeadSql(n)
          : write === 'append'
            ? appendHeadSql(n)
            : saveHeadSql(this.dialect, n, write === 'create' ? 0 : 1);
      this.heads.set(write, text);
    }
    return text;
  }

  abstract all<T>(sql: string, params: unknown[]): Promise<T[]>;

  /**
   * Compare-and-set save; resolves to whether the head matched (else nothing was written). Not
   * async: the engine's write is the one promise of the call (the store awaits it in a try that
   * also catches a throw from binding).
   */
  save(cp: CheckpointRecord, o: SaveOptions, now: number): Promise<boolean> {
    const head = this.headText(cp.step === 0 ? 'create' : 'update');
    const split = splitSaveCalls(cp.step, o.calls ?? []);
    return this.writeSave(
      cp,
      split.inTable,
      saveParams(cp, o, now, split),
      head,
    );
  }

  /**
   * A run's step 0 waiting on a queue; resolves to whether it was inserted (not when the run id
   * is stored or the dedupe key held).
   */
  enqueue(
    cp: CheckpointRecord,
    q: QueuePlacement,
    head: string | undefined,
    now: number,
  ): Promise<boolean> {
    const params = saveParams(cp, { head }, now, NO_ROW_CALLS);
    // prettier-ignore
    params.push(q.queue, q.key ?? null, q.dedupeKey ?? null, q.priority ?? 0, Math.floor(q.availableAt));
    return this.writeSave(cp, [], params, this.headText('enqueue'));
  }

  /**
   * Runs `steps` (each statement's rows go back to it) in one transaction that no other admission
   * of `queue` overlaps. Resolves to `busy` without running them when another admission of the
   * queue holds it (Postgres skips a locked queue rather than wait).
   */
  abstract admission<T>(
    queue: string,
    steps: Generator<SqlStep, T, unknown[]>,
    busy: T,
  ): Promise<T>;

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

  /**
   * The head write `headSql` over `params`, the checkpoint (with its own records, bound in
   * `params`) and `calls`, the records kept in the calls table: all or nothing.
   */
  protected abstract writeSave(
    cp: CheckpointRecord,
    calls: readonly CallRecord[],
    params: unknown[],
    headSql: string,
  ): Promise<boolean>;

  /** The head write over `appendParams` and `calls` (never empty): all or nothing. */
  protected abstract writeAppend(
    calls: readonly CallRecord[],
    params: unknown[],
  ): Promise<boolean>;

  /**
   * Fenced stream append (see the port's `appendStream`, over `streamParams`): resolves to the
   * offset of the first entry, or undefined when the head did not match (nothing was written).
   */
  abstract appendStream(params: StreamParams): Promise<number | undefined>;

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
