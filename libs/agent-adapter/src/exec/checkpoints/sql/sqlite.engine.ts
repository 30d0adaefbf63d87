import { Messages } from '../../../errors/messages';
import { CheckpointStoreUnavailable } from '../../../errors';
import type { CallRecord, CheckpointRecord } from '../checkpoint-store';
import type { DataSourceLike } from './sql.driver';
import { Engine, foreignTables, type SqlStep } from './sql.engine';
import { CALL_COLUMNS, STREAM_COLUMNS } from './sql.rows';

import type { SqlNames } from './sql.schema';
import {
  afterLastSql,
  dropOldSql,
  insertCheckpointSql,
  setLastSql,
  streamHeadSql,
  type StreamParams,
} from './sql.writes';

/** The synchronous better-sqlite3 connection TypeORM holds. */
interface SqliteStatement {
  run(...params: unknown[]): { changes: number };
  all(...params: unknown[]): unknown[];
}

interface SqliteDb {
  prepare(sql: string): SqliteStatement;
  readonly inTransaction: boolean;
  transaction<F extends (...args: never[]) => unknown>(
    fn: F,
  ): F & { immediate: F };
}

/**
 * SQLite: each write is one IMMEDIATE transaction on better-sqlite3's synchronous connection: it
 * takes the database's write lock up front, so processes on one host are serialised by SQLite.
 */
/* eslint-disable @typescript-eslint/require-await -- better-sqlite3 is synchronous; async keeps the
   Engine contract and turns its throws into rejections. */
export class SqliteEngine extends Engine {
  override readonly dialect = 'sqlite' as const;
  /** SQL text → the prepared statement and the order its `$n` parameters bind in. */
  private readonly statements = new Map<
    string,
    { stmt: SqliteStatement; order: number[] }
  >();
  private readonly db: SqliteDb;

  /** One BEGIN IMMEDIATE ... COMMIT around `work` (made once: better-sqlite3 wraps it per call). */
  private readonly immediate: (work: () => boolean) => boolean;
  /** The texts every save writes, made once: a text is the key its prepared statement is found by. */
  private readonly text: {
    keepLease: string;
    narrow: string;
    checkpoint: string;
    call: string;
  };

  constructor(ds: DataSourceLike, tables: SqlNames) {
    super(tables);
    this.db = (
      ds.driver as { databaseConnection: SqliteDb }
    ).databaseConnection;
    const tx = this.db.transaction((work: () => boolean) => work());
    this.immediate = (work) => {
      // better-sqlite3 has one connection: inside a transaction the application opened on it, our
      // "transaction" would be a savepoint its rollback could undo after we reported success.
      if (this.db.inTransaction) {
        throw new CheckpointStoreUnavailable(
          Messages.sqliteSharedTransaction(),
        );
      }
      return tx.immediate(work);
    };
    // The common checkpoint (`sameTenure`): same compare-and-set conditions as the full update.
    const sameTenure = `run_id = $1 AND step = $2 - 1 AND status = 'running' AND segment = $4 AND owner IS $5
         AND ($15 IS NULL OR calls = $15) AND ($16 IS NULL OR (segment = $16 AND ${afterLastSql('$16', '$17', '$18')}))`;
    const last = setLastSql('$16', '$19', '$20');
    const narrow = `UPDATE ${tables.runs} SET step = $2, lease_expires_at = $6, updated_at = $7, calls = calls + $9,
         sealed = $11, ${last}
       WHERE ${sameTenure}`;
    this.text = {
      // SQLite rewrites an index whose column a statement SETs, even to the same value: the lease
      // moves once a lease quantum (`leaseEnd`), so most saves leave it, and the due index, alone.
      keepLease: `UPDATE ${tables.runs} SET step = $2, updated_at = $7, calls = calls + $9, sealed = $11, ${last}
       WHERE ${sameTenure} AND lease_expires_at IS $6`,
      narrow,
      checkpoint: `${insertCheckpointSql(tables)} VALUES ($1, $2, $8, $3, $4, $10, $12, $13, $14)`,
      call: `INSERT INTO ${tables.calls} (${CALL_COLUMNS}) VALUES ($1, $2, $3, $4, $5)`,
    };
  }

  override async deleteRun(runId: string): Promise<boolean> {
    const n = this.tables;
    return this.immediate(() => {
      let removed = 0;
      for (const table of [n.stream, n.calls, n.checkpoints, n.runs]) {
        removed += this.db
          .prepare(`DELETE FROM ${table} WHERE run_id = ?`)
          .run(runId).changes;
      }
      return removed > 0;
    });
  }

  /** Prepares once per SQL text, rewriting `$n` placeholders to `?` (in order of appearance). */
  private prepare(sql: string, params: unknown[]) {
    let s = this.statements.get(sql);
    if (!s) {
      const order: number[] = [];
      const text = sql.replace(
        /\$(\d+)/g,
        (_, i: string) => (order.push(Number(i) - 1), '?'),
      );
      s = { stmt: this.db.prepare(text), order };
      this.statements.set(sql, s);
    }
    return { stmt: s.stmt, args: s.order.map((i) => params[i]) };
  }

  /** SQLite's write lock serialises every admission (and every write): never busy. */
  override async admission<T>(
    _queue: string,
    steps: Generator<SqlStep, T, unknown[]>,
  ): Promise<T> {
    let result!: T;
    this.immediate(() => {
      let next = steps.next([]);
      while (!next.done) {
        const { stmt, args } = this.prepare(next.value.sql, next.value.params);
        // A statement with RETURNING or a SELECT gives rows; better-sqlite3's all() runs both.
        next = steps.next(stmt.all(...args));
      }
      result = next.value;
      return true;
    });
    return result;
  }

  override async all<T>(sql: string, params: unknown[]): Promise<T[]> {
    const { stmt, args } = this.prepare(sql, params);
    return stmt.all(...args) as T[];
  }

  override async change(sql: string, params: unknown[]): Promise<number> {
    return this.run(sql, params);
  }

  /** The shared head write, then the checkpoint and the calls, in one immediate transaction. */
  protected override async writeSave(
    cp: CheckpointRecord,
    calls: readonly CallRecord[],
    params: unknown[],
    headSql: string,
  ): Promise<boolean> {
    return this.immediate(() => {
      if (!this.sameTenure(cp, params) && this.run(headSql, params) !== 1) {
        return false;
      }
      this.run(this.text.checkpoint, params);
      this.insertCalls(calls);
      return true;
    });
  }

  /**
   * The common checkpoint: same status (running), segment and owner, and most often the same lease.
   * Setting only the columns that change leaves the indexes on status, owner and lease alone, so the
   * commit writes fewer pages. Same compare-and-set conditions as the full update (over the same
   * `saveParams`), which runs when these match nothing.
   */
  private sameTenure(cp: CheckpointRecord, params: unknown[]): boolean {
    if (cp.step === 0 || cp.status !== 'running') return false;
    return (
      this.run(this.text.keepLease, params) === 1 ||
      this.run(this.text.narrow, params) === 1
    );
  }

  /** The head write, then the calls, in one immediate transaction. */
  protected override async writeAppend(
    calls: readonly CallRecord[],
    params: unknown[],
  ): Promise<boolean> {
    return this.immediate(() => {
      if (this.run(this.headText('append'), params) !== 1) return false;
      this.insertCalls(calls);
      return true;
    });
  }

  /** The head's count, the entries and the drop of old ones, in one immediate transaction. */
  override async appendStream(p: StreamParams): Promise<number | undefined> {
    const n = this.tables;
    let first: number | undefined;
    this.immediate(() => {
      const { stmt, args } = this.prepare(streamHeadSql(n, false), p.head);
      const [row] = stmt.all(...args) as Array<{ first: number }>;
      if (row === undefined) return false;
      const at = (first = Number(row.first));
      p.entries.forEach((e, i) =>
        this.run(
          `INSERT INTO ${n.stream} (${STREAM_COLUMNS}) VALUES ($1, $2, $3, $4, $5)`,
          [e.runId, at + i, e.superstep, e.place, e.sealed],
        ),
      );
      this.run(dropOldSql(n, '$6'), [...p.head, at + p.entries.length]);
      return true;
    });
    return first;
  }

  /** Runs one prepared statement inside the caller's transaction; the rows it changed. */
  private run(sql: string, params: unknown[]): number {
    const { stmt, args } = this.prepare(sql, params);
    return stmt.run(...args).changes;
  }

  private insertCalls(calls: readonly CallRecord[]): void {
    for (const c of calls) {
      this.run(this.text.call, [
        c.runId,
        c.superstep,
        c.segment,
        c.seq,
        c.sealed,
      ]);
    }
  }

  override async ddl(statements: string[]): Promise<void> {
    const n = this.tables;
    const unquoted = (table: string) => table.replace(/"/g, '');
    this.db
      .transaction(() => {
        const has = (table: string) =>
          this.db
            .prepare(
              "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
            )
            .all(unquoted(table)).length > 0;
        if (has(n.runs) && !has(n.meta)) throw foreignTables(n);
        for (const sql of statements) this.db.prepare(sql).run();
      })
      .immediate();
  }
}
/* eslint-enable @typescript-eslint/require-await */
