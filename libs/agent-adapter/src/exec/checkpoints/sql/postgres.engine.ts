import { createHash } from 'node:crypto';
import type { CallRecord, CheckpointRecord } from '../checkpoint-store';
import type { DataSourceLike } from './sql.driver';
import { Engine, foreignTables, type SqlStep } from './sql.engine';
import { CheckpointStoreUnavailable } from '../../../errors';
import { Messages } from '../../../errors/messages';
import { STREAM_COLUMNS } from './sql.rows';
import { bindCalls, insertCallsSql, VALUES_ROWS } from './postgres.calls';
import type { SqlNames } from './sql.schema';
import {
  dropOldSql,
  insertCheckpointSql,
  streamHeadSql,
  type StreamParams,
} from './sql.writes';

type NamedQuery = { name: string; text: string; values: unknown[] };
type PgResult = { rows: unknown[]; rowCount: number | null };

/** The part of pg's Pool the engine uses. */
interface PgPool {
  /** pg-pool's: with a callback it returns nothing (see `rows`). */
  query(q: NamedQuery): Promise<PgResult>;
  query(
    q: NamedQuery,
    done: (error: Error | undefined, result: PgResult) => void,
  ): void;
  connect(): Promise<{
    query(
      text: string,
      values?: unknown[],
    ): Promise<{ rowCount: number | null; rows: unknown[] }>;
    release(): void;
  }>;
}

function isPgPool(value: unknown): value is PgPool {
  return typeof (value as PgPool | undefined)?.query === 'function';
}

function quoteLiteral(s: string): string {
  return `'${s.replace(/'/g, "''")}'`;
}

/**
 * Postgres: each write is ONE statement (data-modifying CTEs), so it is atomic and costs one
 * round trip and one commit. The UPDATE of the head row takes its row lock, which serialises a
 * claim against a fenced append: whichever commits second re-checks the head and matches nothing.
 */
export class PostgresEngine extends Engine {
  override readonly dialect = 'postgres' as const;
  /** Statement text → prepared-statement name (pg prepares each once per connection). */
  private readonly names = new Map<string, string>();
  private readonly pool?: PgPool;
  /**
   * Write texts by head write, by the count of parameters before the calls, then by batch size
   * (every batch past VALUES_ROWS shares one).
   */
  private readonly writes = new Map<string, Map<number, string[]>>();

  constructor(
    private readonly ds: DataSourceLike,
    tables: SqlNames,
    private readonly prepared: boolean,
  ) {
    super(tables);
    // TypeORM's pg pool (the primary's, with replication): named statements are parsed and
    // planned once per connection instead of on every write.
    const master = (ds.driver as { master?: unknown }).master;
    if (isPgPool(master)) this.pool = master;
  }

  override async deleteRun(runId: string): Promise<boolean> {
    const n = this.tables;
    const sql = [
      // The head's row lock first: a save in flight finishes before, and the deletes that follow
      // (each with a fresh snapshot) see what it wrote; a later save finds no head.
      `SELECT 1 FROM ${n.runs} WHERE run_id = $1 FOR UPDATE`,
      `DELETE FROM ${n.calls} WHERE run_id = $1`,
      `DELETE FROM ${n.stream} WHERE run_id = $1`,
      `DELETE FROM ${n.checkpoints} WHERE run_id = $1`,
      `DELETE FROM ${n.runs} WHERE run_id = $1`,
    ];
    if (!this.pool) {
      let removed = 0;
      for (const q of sql.slice(1)) removed += await this.change(q, [runId]);
      return removed > 0;
    }
    const client = await this.pool.connect();
    try {
      await client.query('BEGIN');
      let removed = 0;
      for (const q of sql)
        removed += (await client.query(q, [runId])).rowCount ?? 0;
      await client.query('COMMIT');
      return removed > 0;
    } catch (error) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw error;
    } finally {
      client.release();
    }
  }

  override async admission<T>(
    queue: string,
    steps: Generator<SqlStep, T, unknown[]>,
    busy: T,
  ): Promise<T> {
    if (!this.pool)
      throw new CheckpointStoreUnavailable(Messages.queuesNeedPool());
    const n = this.tables;
    await this.all(
      `INSERT INTO ${n.queues} (name) VALUES ($1) ON CONFLICT (name) DO NOTHING`,
      [queue],
    );
    const client = await this.pool.connect();
    try {
      await client.query('BEGIN');
      // Each statement below reads a snapshot taken after this lock: admissions never overlap.
      const locked = await client.query(
        `SELECT name FROM ${n.queues} WHERE name = $1 FOR UPDATE SKIP LOCKED`,
        [queue],
      );
      if (!locked.rowCount) {
        await client.query('ROLLBACK');
        return busy;
      }
      let next = steps.next([]);
      while (!next.done) {
        const { rows } = await client.query(next.value.sql, next.value.params);
        next = steps.next(rows);
      }
      await client.query('COMMIT');
      return next.value;
    } catch (error) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw error;
    } finally {
      client.release();
    }
  }

  override all<T>(sql: string, params: unknown[]): Promise<T[]> {
    return this.rows(sql, params, (rows) => rows as T[]);
  }

  /**
   * Whether the write `sql` made matched its head. Its outermost statement is an INSERT that
   * writes only when the head matched, so on the pool its row count says: no rows come back to
   * describe and parse (pg spends more on a result's fields than on its bind). Through TypeORM,
   * which keeps an INSERT's count to itself, the text ends in `RETURNING 1` (an INSERT, not an
   * UPDATE: TypeORM answers an UPDATE with `[rows, count]`, whose length is always 2).
   */
  private wrote(sql: string, params: unknown[]): Promise<boolean> {
    return this.rows(sql, params, (rows, count) => (count ?? rows.length) > 0);
  }

  /**
   * `map` of the rows of `sql` (and its row count on the pool): a prepared statement on the pool,
   * in pg's callback form (one promise: its promise form makes two, and an async layer here two
   * more, each paying the async hooks; this runs on every write), else TypeORM's query. `map` must
   * not throw (it runs in pg's callback).
   */
  private rows<T>(
    sql: string,
    params: unknown[],
    map: (rows: unknown[], count?: number) => T,
  ): Promise<T> {
    const pool = this.prepared ? this.pool : undefined;
    if (!pool)
      return (this.ds.query(sql, params) as Promise<unknown[]>).then((rows) =>
        map(rows),
      );
    const query = { name: this.nameOf(sql), text: sql, values: params };
    // A pool whose `query` declares no callback (not pg-pool's, or one wrapped by instrumentation)
    // would never call one back. Read on each call: instrumentation may wrap it at any time.
    if (pool.query.length < 2)
      return pool.query(query).then((r) => map(r.rows, r.rowCount ?? 0));
    return new Promise<T>((resolve, reject) => {
      pool.query(query, (error, result) =>
        error ? reject(error) : resolve(map(result.rows, result.rowCount ?? 0)),
      );
    });
  }

  /** What ends a write's text: rows to count where the row count does not come back. */
  private get counted(): string {
    return this.prepared && this.pool ? '' : ' RETURNING 1';
  }

  /** The prepared statement's name for `sql`. */
  private nameOf(sql: string): string {
    let name = this.names.get(sql);
    if (!name) {
      name = `aa_${createHash('sha1').update(sql).digest('hex').slice(0, 20)}`;
      this.names.set(sql, name);
    }
    return name;
  }

  override async change(sql: string, params: unknown[]): Promise<number> {
    const [row] = await this.all<{ n: number }>(
      `WITH w AS (${sql} RETURNING 1) SELECT count(*)::int AS n FROM w`,
      params,
    );
    return row?.n ?? 0;
  }

  /**
   * The shared head write, the calls and the checkpoint as one statement: all or nothing. The
   * checkpoint's INSERT is outermost: it inserts one row exactly when the head matched.
   */
  protected override writeSave(
    cp: CheckpointRecord,
    calls: readonly CallRecord[],
    params: unknown[],
    headSql: string,
  ): Promise<boolean> {
    const at = params.length;
    const sql = this.writeText(headSql, at, calls.length, () => {
      const n = this.tables;
      const insertCalls = calls.length
        ? `, calls AS (${insertCallsSql(n, calls.length, at)})`
        : '';
      return `WITH head AS (${headSql} RETURNING run_id)${insertCalls}
       ${insertCheckpointSql(n)} SELECT run_id, $2, $8, $3, $4, $10, $12::text, $13::int, $14::int FROM head${this.counted}`;
    });
    bindCalls(calls, params, true);
    return this.wrote(sql, params);
  }

  /**
   * The head write and the calls (at least one: the store sends no empty batch) as one statement:
   * all or nothing. The calls' INSERT is outermost: it writes rows exactly when the head matched.
   */
  protected override writeAppend(
    calls: readonly CallRecord[],
    params: unknown[],
  ): Promise<boolean> {
    const head = this.headText('append');
    const at = params.length;
    const sql = this.writeText(
      head,
      at,
      calls.length,
      () => `WITH head AS (${head} RETURNING run_id)
       ${insertCallsSql(this.tables, calls.length, at, '$2')}${this.counted}`,
    );
    bindCalls(calls, params, false);
    return this.wrote(sql, params);
  }

  /**
   * A write's text for its head write, the parameters bound before its calls and its batch size,
   * built once: `all` then looks its prepared statement up by the same string (a string's hash is
   * kept with it), not by a new kilobyte.
   */
  private writeText(
    head: string,
    at: number,
    size: number,
    build: () => string,
  ): string {
    let byAt = this.writes.get(head);
    if (byAt === undefined)
      this.writes.set(head, (byAt = new Map<number, string[]>()));
    let bySize = byAt.get(at);
    if (bySize === undefined) byAt.set(at, (bySize = []));
    return (bySize[Math.min(size, VALUES_ROWS + 1)] ??= build());
  }

  /** The head's count, the entries and the drop of old ones: one statement of CTEs. */
  override async appendStream(p: StreamParams): Promise<number | undefined> {
    const n = this.tables;
    const [row] = await this.all<{ first: string | number }>(
      `WITH head AS (${streamHeadSql(n, true)}),
       entries AS (INSERT INTO ${n.stream} (${STREAM_COLUMNS})
         SELECT $1, head.first + e.i - 1, e.superstep, e.place, e.sealed FROM head,
           unnest($6::int[], $7::text[], $8::text[]) WITH ORDINALITY AS e(superstep, place, sealed, i)),
       old AS (${dropOldSql(n, '(SELECT first + $3::int FROM head)')})
       SELECT first FROM head`,
      [
        ...p.head,
        p.entries.map((e) => e.superstep),
        p.entries.map((e) => e.place),
        p.entries.map((e) => e.sealed),
      ],
    );
    return row === undefined ? undefined : Number(row.first);
  }

  override async ddl(statements: string[]): Promise<void> {
    const n = this.tables;
    // Several workers may start at once: an advisory lock keeps their CREATE IF NOT EXISTS apart,
    // and the foreign-table check runs under it, so a concurrent creator cannot trip it.
    await this.ds
      .query(
        `DO $$ BEGIN PERFORM pg_advisory_xact_lock(7262001);
       IF to_regclass(${quoteLiteral(n.runs)}) IS NOT NULL AND to_regclass(${quoteLiteral(n.meta)}) IS NULL THEN
         RAISE EXCEPTION 'agent-adapter: % exists without its meta table', ${quoteLiteral(n.runs)};
       END IF;
       ${statements.map((s) => `EXECUTE ${quoteLiteral(s)};`).join(' ')} END $$`,
      )
      .catch((error: Error) => {
        throw foreignTables(n, error);
      });
  }
}
