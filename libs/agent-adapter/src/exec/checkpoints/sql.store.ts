import { createHash } from 'node:crypto';
import { CheckpointConflict, CheckpointStoreUnavailable } from '../../errors';
import { Messages } from '../../errors/messages';
import {
  requireFeatures,
  requirePackage,
  type OptionalFeature,
} from '../../peers/optional-packages';
import {
  CheckpointStore,
  type CallRecord,
  type CheckpointRecord,
  type HistoryPage,
  type ListQuery,
  type ListUnfinishedOptions,
  type RunHead,
  type RunPage,
  type RunStatus,
  type SaveOptions,
} from './checkpoint-store';
import {
  SCHEMA_VERSION,
  createStatements,
  sqlNames,
  type SqlDialect,
  type SqlNames,
  type SqlTableOptions,
} from './sql.schema';

/**
 * The part of a TypeORM `DataSource` the store uses, typed structurally so these typings do not
 * require typeorm. Pass your application's DataSource (Postgres or better-sqlite3).
 * @publicApi
 */
export interface DataSourceLike {
  readonly options: { readonly type: string };
  readonly isInitialized: boolean;
  readonly driver: unknown;
  initialize(): Promise<unknown>;
  destroy(): Promise<void>;
  query(sql: string, parameters?: unknown[]): Promise<unknown>;
}

/** TypeORM connection options for a DataSource the store creates and owns. @publicApi */
export type SqlConnectionOptions =
  | ({ type: 'postgres' } & Record<string, unknown>)
  | ({ type: 'better-sqlite3'; database: string } & Record<string, unknown>);

/** @publicApi */
export interface SQLCheckpointStoreOptions extends SqlTableOptions {
  /**
   * Create missing tables on first use. Turn off when you run the shipped migrations
   * (`agentAdapterMigrations()`) yourself; the store then only checks the tables are there.
   * @default true
   */
  createTables?: boolean;
  /**
   * Postgres: name the hot-path statements so the server parses and plans them once per
   * connection. Turn off behind a pooler that cannot keep prepared statements (PgBouncer in
   * transaction mode before 1.21).
   * @default true
   */
  preparedStatements?: boolean;
}

interface RunRow {
  run_id: string;
  flow: string;
  step: number;
  status: RunStatus;
  segment: number;
  calls: number | string;
  owner: string | null;
  lease_expires_at: number | string | null;
  updated_at: number | string;
  id?: number | string;
}

interface CheckpointRow {
  run_id: string;
  step: number;
  flow: string;
  status: RunStatus;
  segment: number;
  sealed: string;
}

interface CallRow {
  run_id: string;
  superstep: number;
  segment: number;
  seq: number;
  sealed: string;
}

/** Does one statement (or one transaction): the dialect-specific part of the store. */
interface Engine {
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

const UNFINISHED_SQL = `status IN ('running', 'paused')`;

/**
 * The compare-and-set a checkpoint's head update is conditioned on, the same for both dialects
 * ($2 = the new step, $4 = its segment): exactly the next step of an unfinished run, the run's
 * segment or the next one (a claim), the call count a recoverer saw, and fencing for the calls
 * saved with it. `expectCalls` and `callsSegment` are placeholders that may be NULL.
 */
function casConditions(expectCalls: string, callsSegment: string): string {
  return `step = $2 - 1 AND ${UNFINISHED_SQL} AND (segment = $4 OR segment = $4 - 1)
    AND (${expectCalls} IS NULL OR calls = ${expectCalls})
    AND (${callsSegment} IS NULL OR (segment = ${callsSegment} AND status = 'running'))`;
}

const HEAD_COLUMNS =
  'run_id, flow, step, status, segment, calls, owner, lease_expires_at, updated_at';

/**
 * Runs in SQL through TypeORM: Postgres (`pg`) or SQLite (`better-sqlite3`), one implementation.
 * Every write is one atomic statement (Postgres) or one immediate transaction (SQLite); the
 * compare-and-set and the fencing check happen inside it, on the run's head row.
 * @publicApi
 */
export class SQLCheckpointStore extends CheckpointStore {
  readonly shared = true;
  private readonly source: DataSourceLike | SqlConnectionOptions;
  private readonly owned: boolean;
  private readonly options: SQLCheckpointStoreOptions;
  private engine?: Promise<{
    engine: Engine;
    names: SqlNames;
    dataSource: DataSourceLike;
  }>;
  private closed = false;

  constructor(
    source: DataSourceLike | SqlConnectionOptions,
    options: SQLCheckpointStoreOptions = {},
  ) {
    super();
    this.source = source;
    this.owned = !isDataSource(source);
    this.options = options;
    const type = isDataSource(source) ? source.options.type : source.type;
    if (type !== 'postgres' && type !== 'better-sqlite3') {
      throw new TypeError(
        `SQLCheckpointStore supports TypeORM type "postgres" or "better-sqlite3", not "${type}".`,
      );
    }
    sqlNames(type === 'postgres' ? 'postgres' : 'sqlite', options); // validates the names now
    // A DataSource the store makes needs typeorm and the driver: checked now (resolved, not
    // loaded; typeorm loads on first use), so a missing one fails here, not at the first run.
    if (!isDataSource(source))
      requireFeatures([feature(source)], new.target.name);
  }

  /** Connects (once) and makes sure the tables exist and are of this version. */
  private open() {
    if (this.closed)
      return Promise.reject(
        new CheckpointStoreUnavailable('This SQLCheckpointStore was closed.'),
      );
    return (this.engine ??= this.connect().catch((error: unknown) => {
      this.engine = undefined; // a later call may try again (the database may come back)
      throw error;
    }));
  }

  private async connect() {
    const dataSource = isDataSource(this.source)
      ? this.source
      : createDataSource(this.source);
    const dialect: SqlDialect =
      dataSource.options.type === 'postgres' ? 'postgres' : 'sqlite';
    if (!dataSource.isInitialized) {
      try {
        await dataSource.initialize();
      } catch (error) {
        throw new CheckpointStoreUnavailable(
          `SQLCheckpointStore cannot connect to the ${dialect} database: ${(error as Error).message}. Check the connection options and that the server is up.`,
          undefined,
          { cause: error },
        );
      }
    }
    try {
      const names = sqlNames(dialect, this.options);
      const engine =
        dialect === 'postgres'
          ? new PostgresEngine(
              dataSource,
              this.options.preparedStatements ?? true,
            )
          : new SqliteEngine(dataSource);
      await prepareTables(
        engine,
        names,
        dialect,
        this.options.createTables ?? true,
      );
      return { engine, names, dataSource };
    } catch (error) {
      // A DataSource this store made is not left open by a failed start (a later call retries).
      if (this.owned && dataSource.isInitialized)
        await dataSource.destroy().catch(() => undefined);
      throw error;
    }
  }

  async save(
    checkpoint: CheckpointRecord,
    options: SaveOptions = {},
  ): Promise<void> {
    const calls = options.calls ?? [];
    checkBatch(checkpoint.runId, calls);
    const { engine, names } = await this.open();
    // Whole milliseconds: the column is a BIGINT.
    const lease = options.leaseExpiresAt;
    const saving =
      lease === undefined
        ? options
        : { ...options, leaseExpiresAt: Math.floor(lease) };
    let matched: boolean;
    try {
      matched = await engine.save(names, checkpoint, saving, Date.now());
    } catch (error) {
      throw duplicateOr(error, checkpoint.runId, calls);
    }
    if (!matched)
      throw await this.whyRefused(checkpoint.runId, {
        save: checkpoint,
        options,
      });
  }

  async recordCall(
    runId: string,
    segment: number,
    records: CallRecord[],
  ): Promise<void> {
    if (records.length === 0) return;
    checkBatch(runId, records, segment);
    const { engine, names } = await this.open();
    let matched: boolean;
    try {
      matched = await engine.recordCall(names, runId, segment, records);
    } catch (error) {
      throw duplicateOr(error, runId, records);
    }
    if (!matched) throw await this.whyRefused(runId, { segment });
  }

  async latest(runId: string): Promise<CheckpointRecord | undefined> {
    const { engine, names } = await this.open();
    const [row] = await engine.all<CheckpointRow>(
      `SELECT run_id, step, flow, status, segment, sealed FROM ${names.checkpoints} WHERE run_id = $1 ORDER BY step DESC LIMIT 1`,
      [runId],
    );
    return row && toCheckpoint(row);
  }

  async head(runId: string): Promise<RunHead | undefined> {
    const { engine, names } = await this.open();
    const [row] = await engine.all<RunRow>(
      `SELECT ${HEAD_COLUMNS} FROM ${names.runs} WHERE run_id = $1`,
      [runId],
    );
    return row && toHead(row);
  }

  async listUnfinished(
    flow: string,
    options: ListUnfinishedOptions = {},
  ): Promise<RunHead[]> {
    const { engine, names } = await this.open();
    const params: unknown[] = [flow];
    let where = `flow = $1 AND ${UNFINISHED_SQL}`;
    if (options.after !== undefined)
      where += ` AND run_id > $${params.push(options.after)}`;
    if (options.leaseExpiredBefore !== undefined) {
      where += ` AND (lease_expires_at IS NULL OR lease_expires_at < $${params.push(options.leaseExpiredBefore)})`;
    }
    const rows = await engine.all<RunRow>(
      `SELECT ${HEAD_COLUMNS} FROM ${names.runs} WHERE ${where} ORDER BY run_id LIMIT $${params.push(options.limit ?? 100)}`,
      params,
    );
    return rows.map(toHead);
  }

  async delete(runId: string): Promise<boolean> {
    const { engine, names } = await this.open();
    return engine.deleteRun(names, runId);
  }

  async calls(runId: string, superstep: number): Promise<CallRecord[]> {
    const { engine, names } = await this.open();
    const rows = await engine.all<CallRow>(
      `SELECT run_id, superstep, segment, seq, sealed FROM ${names.calls} WHERE run_id = $1 AND superstep = $2 ORDER BY segment, seq`,
      [runId, superstep],
    );
    return rows.map(toCall);
  }

  async list(query: ListQuery = {}): Promise<RunPage> {
    const { engine, names } = await this.open();
    const limit = query.limit ?? 50;
    const params: unknown[] = [];
    const where: string[] = [];
    if (query.flow !== undefined)
      where.push(`flow = $${params.push(query.flow)}`);
    if (query.status !== undefined)
      where.push(`status = $${params.push(query.status)}`);
    if (query.before !== undefined)
      where.push(`id < $${params.push(Number(query.before))}`);
    const rows = await engine.all<RunRow>(
      `SELECT id, ${HEAD_COLUMNS} FROM ${names.runs}${where.length ? ` WHERE ${where.join(' AND ')}` : ''} ORDER BY id DESC LIMIT $${params.push(limit + 1)}`,
      params,
    );
    const page = rows.slice(0, limit);
    const last = page[page.length - 1];
    return {
      runs: page.map(toHead),
      ...(rows.length > limit && last && { next: String(last.id) }),
    };
  }

  async history(runId: string): Promise<HistoryPage> {
    const { engine, names } = await this.open();
    const [checkpoints, calls] = await Promise.all([
      engine.all<CheckpointRow>(
        `SELECT run_id, step, flow, status, segment, sealed FROM ${names.checkpoints} WHERE run_id = $1 ORDER BY step`,
        [runId],
      ),
      engine.all<CallRow>(
        `SELECT run_id, superstep, segment, seq, sealed FROM ${names.calls} WHERE run_id = $1 ORDER BY segment, superstep, seq`,
        [runId],
      ),
    ]);
    return {
      checkpoints: checkpoints.map(toCheckpoint),
      calls: calls.map(toCall),
    };
  }

  async renewLeases(
    owner: string,
    leaseExpiresAt: number,
    runIds: readonly string[],
  ): Promise<number> {
    if (runIds.length === 0) return 0;
    const { engine, names } = await this.open();
    // One statement for all the runs this worker drives.
    const listed =
      engine.dialect === 'postgres'
        ? 'run_id = ANY($3::varchar[])'
        : 'run_id IN (SELECT value FROM json_each($3))';
    return engine.change(
      `UPDATE ${names.runs} SET lease_expires_at = $1 WHERE owner = $2 AND ${listed} AND ${UNFINISHED_SQL}`,
      [
        Math.floor(leaseExpiresAt),
        owner,
        engine.dialect === 'postgres' ? [...runIds] : JSON.stringify(runIds),
      ],
    );
  }

  async close(): Promise<void> {
    this.closed = true;
    const opened = this.engine && (await this.engine.catch(() => undefined));
    if (this.owned && opened?.dataSource.isInitialized)
      await opened.dataSource.destroy();
  }

  /** After a refused write: reads the head to say why (a message only; the write did nothing). */
  private async whyRefused(
    runId: string,
    w: { save: CheckpointRecord; options: SaveOptions } | { segment: number },
  ): Promise<CheckpointConflict> {
    const head = await this.head(runId);
    if ('segment' in w)
      return new CheckpointConflict(
        Messages.fenced(runId, w.segment, head?.segment),
        runId,
      );
    const { save, options } = w;
    if (head && save.step !== 0 && head.step === save.step - 1) {
      if (head.status === 'done' || head.status === 'failed') {
        return new CheckpointConflict(
          Messages.ended(runId, head.status),
          runId,
        );
      }
      if (save.segment !== head.segment && save.segment !== head.segment + 1) {
        return new CheckpointConflict(
          Messages.fenced(runId, save.segment, head.segment),
          runId,
        );
      }
      if (
        options.expectCalls !== undefined &&
        head.calls !== options.expectCalls
      ) {
        return new CheckpointConflict(Messages.logMoved(runId), runId);
      }
      const segment = options.calls?.[0]?.segment;
      if (segment !== undefined)
        return new CheckpointConflict(
          Messages.fenced(runId, segment, head.segment),
          runId,
        );
    }
    return new CheckpointConflict(
      Messages.conflictStep(runId, save.step, head?.step),
      runId,
    );
  }
}

/** SQLiteCheckpointStore's defaults: WAL, a busy timeout, full sync: many processes on one host. */
export function sqliteConnection(path: string): SqlConnectionOptions {
  return {
    type: 'better-sqlite3',
    database: path,
    enableWAL: true,
    timeout: 10_000,
    prepareDatabase: (db: { pragma(s: string): unknown }) => {
      db.pragma('synchronous = FULL');
    },
  };
}

function isDataSource(
  source: DataSourceLike | SqlConnectionOptions,
): source is DataSourceLike {
  return typeof (source as DataSourceLike).initialize === 'function';
}

/** The optional feature (typeorm and its driver) a DataSource made from `options` needs. */
function feature(options: SqlConnectionOptions): OptionalFeature {
  return options.type === 'postgres' ? 'postgres' : 'sqlite';
}

function createDataSource(options: SqlConnectionOptions): DataSourceLike {
  const context = 'SQLCheckpointStore';
  requireFeatures([feature(options)], context); // the driver, which typeorm loads itself
  const typeorm = requirePackage<{
    DataSource: new (o: unknown) => DataSourceLike;
  }>('typeorm', feature(options), context);
  return new typeorm.DataSource(options);
}

/**
 * Makes sure the tables exist (creating them only when they are missing, so a routine start takes
 * no DDL lock) and are this version's.
 */
async function prepareTables(
  engine: Engine,
  names: SqlNames,
  dialect: SqlDialect,
  create: boolean,
): Promise<void> {
  let version = await readVersion(engine, names);
  // undefined: the meta table is there but has no version row. That is what TypeORM's
  // `synchronize` leaves with agentAdapterEntities() (entities carry no rows); the DDL (every
  // statement "if missing", under the DDL lock) stamps this version into it. The entities and the
  // DDL are held to each other by a test, so those tables are this version's.
  if ((version === null || version === undefined) && create) {
    await engine.ddl(names, createStatements(dialect, names));
    version = await readVersion(engine, names);
  }
  if (version === null) {
    throw new CheckpointStoreUnavailable(
      `The agent-adapter tables (${names.runs}, ...) are missing or unreadable. Run the shipped migrations (agentAdapterMigrations()) or create the store with createTables: true.`,
    );
  }
  if (version === undefined) {
    throw new CheckpointStoreUnavailable(
      `The agent-adapter tables (${names.runs}, ...) carry no schema version (made by TypeORM synchronize from agentAdapterEntities(), or by something else). Open the store once with createTables: true to stamp them, run the shipped migrations instead, or use another tablePrefix/schema. Nothing was changed.`,
    );
  }
  if (version !== String(SCHEMA_VERSION)) {
    throw new CheckpointStoreUnavailable(
      `The agent-adapter tables (${names.runs}, ...) have schema version ${version}, but this version of agent-adapter uses ${SCHEMA_VERSION}. They were made by another version: use a matching agent-adapter, or another tablePrefix/schema. Nothing was changed.`,
    );
  }
}

/** The stored schema version; undefined when the meta table has none, null when it is missing. */
async function readVersion(
  engine: Engine,
  names: SqlNames,
): Promise<string | undefined | null> {
  try {
    const [row] = await engine.all<{ value: string }>(
      `SELECT value FROM ${names.meta} WHERE key = 'schema_version'`,
      [],
    );
    return row?.value;
  } catch {
    return null;
  }
}

/** Every call of a batch must belong to the run and (for recordCall) the segment it is written for. */
function checkBatch(
  runId: string,
  calls: CallRecord[],
  segment = calls[0]?.segment,
): void {
  for (const c of calls) {
    if (c.runId !== runId || c.segment !== segment) {
      throw new CheckpointConflict(
        Messages.fenced(runId, c.segment, segment),
        runId,
      );
    }
  }
}

/** A unique violation on the call log means a (segment, superstep, seq) was written before. */
function duplicateOr(
  error: unknown,
  runId: string,
  calls: CallRecord[],
): unknown {
  const code =
    (error as { code?: string; driverError?: { code?: string } }).driverError
      ?.code ?? (error as { code?: string }).code;
  if (
    code === '23505' ||
    code === 'SQLITE_CONSTRAINT_PRIMARYKEY' ||
    code === 'SQLITE_CONSTRAINT_UNIQUE'
  ) {
    const c = calls[0];
    return new CheckpointConflict(
      Messages.duplicateCall(
        runId,
        c?.segment ?? 0,
        c?.superstep ?? 0,
        c?.seq ?? 0,
      ),
      runId,
    );
  }
  return error;
}

const num = (v: number | string) => Number(v);

function toHead(r: RunRow): RunHead {
  return {
    runId: r.run_id,
    flow: r.flow,
    step: num(r.step),
    status: r.status,
    segment: num(r.segment),
    calls: num(r.calls),
    updatedAt: num(r.updated_at),
    ...(r.owner !== null && { owner: r.owner }),
    ...(r.lease_expires_at !== null && {
      leaseExpiresAt: num(r.lease_expires_at),
    }),
  };
}

function toCheckpoint(r: CheckpointRow): CheckpointRecord {
  return {
    runId: r.run_id,
    step: num(r.step),
    flow: r.flow,
    status: r.status,
    segment: num(r.segment),
    sealed: r.sealed,
  };
}

function toCall(r: CallRow): CallRecord {
  return {
    runId: r.run_id,
    superstep: num(r.superstep),
    segment: num(r.segment),
    seq: num(r.seq),
    sealed: r.sealed,
  };
}

/**
 * Postgres: each write is ONE statement (data-modifying CTEs), so it is atomic and costs one
 * round trip and one commit. The UPDATE of the head row takes its row lock, which serialises a
 * claim against a fenced append: whichever commits second re-checks the head and matches nothing.
 */
class PostgresEngine implements Engine {
  readonly dialect = 'postgres' as const;
  /** Statement text → prepared-statement name (pg prepares each once per connection). */
  private readonly names = new Map<string, string>();
  private readonly pool?: PgPool;

  constructor(
    private readonly ds: DataSourceLike,
    private readonly prepared: boolean,
  ) {
    // TypeORM's pg pool (the primary's, with replication): named statements are parsed and
    // planned once per connection instead of on every write.
    const master = (ds.driver as { master?: unknown }).master;
    if (isPgPool(master)) this.pool = master;
  }

  async deleteRun(n: SqlNames, runId: string): Promise<boolean> {
    const sql = [
      // The head's row lock first: a save in flight finishes before, and the deletes that follow
      // (each with a fresh snapshot) see what it wrote; a later save finds no head.
      `SELECT 1 FROM ${n.runs} WHERE run_id = $1 FOR UPDATE`,
      `DELETE FROM ${n.calls} WHERE run_id = $1`,
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

  async all<T>(sql: string, params: unknown[]): Promise<T[]> {
    if (!this.pool || !this.prepared)
      return (await this.ds.query(sql, params)) as T[];
    let name = this.names.get(sql);
    if (!name) {
      name = `aa_${createHash('sha1').update(sql).digest('hex').slice(0, 20)}`;
      this.names.set(sql, name);
    }
    return (await this.pool.query({ name, text: sql, values: params }))
      .rows as T[];
  }

  async change(sql: string, params: unknown[]): Promise<number> {
    const [row] = await this.all<{ n: number }>(
      `WITH w AS (${sql} RETURNING 1) SELECT count(*)::int AS n FROM w`,
      params,
    );
    return row?.n ?? 0;
  }

  async save(
    n: SqlNames,
    cp: CheckpointRecord,
    o: SaveOptions,
    now: number,
  ): Promise<boolean> {
    const calls = o.calls ?? [];
    // $1-$14 are shared by both heads; the update adds the compare-and-set conditions.
    // prettier-ignore
    const params: unknown[] = [
      cp.runId, cp.step, cp.status, cp.segment, o.owner ?? null, o.leaseExpiresAt ?? null, now,
      cp.flow, cp.sealed, calls.map((c) => c.superstep), calls.map((c) => c.segment),
      calls.map((c) => c.seq), calls.map((c) => c.sealed), calls.length,
    ];
    const head =
      cp.step === 0
        ? `INSERT INTO ${n.runs} (run_id, flow, step, status, segment, calls, owner, lease_expires_at, updated_at)
           VALUES ($1, $8, $2, $3, $4, $14, $5, $6, $7)
           ON CONFLICT (run_id) DO NOTHING RETURNING run_id`
        : `UPDATE ${n.runs} SET step = $2, status = $3, segment = $4, owner = $5, lease_expires_at = $6,
             updated_at = $7, calls = calls + $14
           WHERE run_id = $1 AND ${casConditions(`$${params.push(o.expectCalls ?? null)}::int`, `$${params.push(calls[0]?.segment ?? null)}::int`)}
           RETURNING run_id`;
    const [row] = await this.all<{ n: number }>(
      `WITH head AS (${head}),
       cp AS (INSERT INTO ${n.checkpoints} (run_id, step, flow, status, segment, sealed)
              SELECT run_id, $2, $8, $3, $4, $9 FROM head),
       calls AS (INSERT INTO ${n.calls} (run_id, superstep, segment, seq, sealed)
              SELECT head.run_id, c.superstep, c.segment, c.seq, c.sealed FROM head,
                unnest($10::int[], $11::int[], $12::int[], $13::text[]) AS c(superstep, segment, seq, sealed))
       SELECT count(*)::int AS n FROM head`,
      params,
    );
    return (row?.n ?? 0) === 1;
  }

  async recordCall(
    n: SqlNames,
    runId: string,
    segment: number,
    calls: CallRecord[],
  ): Promise<boolean> {
    const [row] = await this.all<{ n: number }>(
      `WITH head AS (
         UPDATE ${n.runs} SET calls = calls + $3
         WHERE run_id = $1 AND segment = $2 AND status = 'running' RETURNING run_id),
       calls AS (INSERT INTO ${n.calls} (run_id, superstep, segment, seq, sealed)
         SELECT head.run_id, c.superstep, $2, c.seq, c.sealed FROM head,
           unnest($4::int[], $5::int[], $6::text[]) AS c(superstep, seq, sealed))
       SELECT count(*)::int AS n FROM head`,
      [
        runId,
        segment,
        calls.length,
        calls.map((c) => c.superstep),
        calls.map((c) => c.seq),
        calls.map((c) => c.sealed),
      ],
    );
    return (row?.n ?? 0) === 1;
  }

  async ddl(n: SqlNames, statements: string[]): Promise<void> {
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

/** The part of pg's Pool the engine uses. */
interface PgPool {
  query(q: {
    name: string;
    text: string;
    values: unknown[];
  }): Promise<{ rows: unknown[] }>;
  connect(): Promise<{
    query(
      text: string,
      values?: unknown[],
    ): Promise<{ rowCount: number | null }>;
    release(): void;
  }>;
}

function isPgPool(value: unknown): value is PgPool {
  return typeof (value as PgPool | undefined)?.query === 'function';
}

function foreignTables(n: SqlNames, cause?: Error): Error {
  if (cause && !/exists without its meta table/.test(cause.message))
    return cause;
  return new CheckpointStoreUnavailable(
    `${n.runs} exists but the agent-adapter meta table does not: these tables were not made by agent-adapter. Use another tablePrefix/schema. Nothing was changed.`,
  );
}

function quoteLiteral(s: string): string {
  return `'${s.replace(/'/g, "''")}'`;
}

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
class SqliteEngine implements Engine {
  readonly dialect = 'sqlite' as const;
  /** SQL text → the prepared statement and the order its `$n` parameters bind in. */
  private readonly statements = new Map<
    string,
    { stmt: SqliteStatement; order: number[] }
  >();
  private readonly db: SqliteDb;

  /** One BEGIN IMMEDIATE ... COMMIT around `work` (made once: better-sqlite3 wraps it per call). */
  private readonly immediate: (work: () => boolean) => boolean;

  constructor(ds: DataSourceLike) {
    this.db = (
      ds.driver as { databaseConnection: SqliteDb }
    ).databaseConnection;
    const tx = this.db.transaction((work: () => boolean) => work());
    this.immediate = (work) => {
      // better-sqlite3 has one connection: inside a transaction the application opened on it, our
      // "transaction" would be a savepoint its rollback could undo after we reported success.
      if (this.db.inTransaction) {
        throw new CheckpointStoreUnavailable(
          'The SQLite connection the store shares has a transaction open (an application transaction on the same DataSource). A checkpoint written inside it could be rolled back after the fact: give the store its own connection (new SQLiteCheckpointStore(path) or a DataSource of its own).',
        );
      }
      return tx.immediate(work);
    };
  }

  async deleteRun(n: SqlNames, runId: string): Promise<boolean> {
    return this.immediate(() => {
      let removed = 0;
      for (const table of [n.calls, n.checkpoints, n.runs]) {
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

  async all<T>(sql: string, params: unknown[]): Promise<T[]> {
    const { stmt, args } = this.prepare(sql, params);
    return stmt.all(...args) as T[];
  }

  async change(sql: string, params: unknown[]): Promise<number> {
    const { stmt, args } = this.prepare(sql, params);
    return stmt.run(...args).changes;
  }

  async save(
    n: SqlNames,
    cp: CheckpointRecord,
    o: SaveOptions,
    now: number,
  ): Promise<boolean> {
    const calls = o.calls ?? [];
    return this.immediate(() => {
      const head =
        cp.step === 0
          ? this.prepare(
              `INSERT INTO ${n.runs} (run_id, flow, step, status, segment, calls, owner, lease_expires_at, updated_at)
               VALUES ($1, $2, 0, $3, $4, $5, $6, $7, $8) ON CONFLICT (run_id) DO NOTHING`,
              [
                cp.runId,
                cp.flow,
                cp.status,
                cp.segment,
                calls.length,
                o.owner ?? null,
                o.leaseExpiresAt ?? null,
                now,
              ],
            )
          : this.prepare(
              `UPDATE ${n.runs} SET step = $2, status = $3, segment = $4, owner = $5, lease_expires_at = $6,
                 updated_at = $7, calls = calls + $8
               WHERE run_id = $1 AND ${casConditions('$9', '$10')}`,
              [
                cp.runId,
                cp.step,
                cp.status,
                cp.segment,
                o.owner ?? null,
                o.leaseExpiresAt ?? null,
                now,
                calls.length,
                o.expectCalls ?? null,
                calls[0]?.segment ?? null,
              ],
            );
      if (
        !this.sameTenure(n, cp, o, now, calls) &&
        head.stmt.run(...head.args).changes !== 1
      ) {
        return false;
      }
      const c = this.prepare(
        `INSERT INTO ${n.checkpoints} (run_id, step, flow, status, segment, sealed) VALUES ($1, $2, $3, $4, $5, $6)`,
        [cp.runId, cp.step, cp.flow, cp.status, cp.segment, cp.sealed],
      );
      c.stmt.run(...c.args);
      this.insertCalls(n, calls);
      return true;
    });
  }

  /**
   * The common checkpoint: same status (running), segment and owner. Setting only the columns that
   * change leaves the indexes on status and owner alone, so the commit writes fewer pages. Same
   * compare-and-set conditions as the full update, which runs when this one matches nothing.
   */
  private sameTenure(
    n: SqlNames,
    cp: CheckpointRecord,
    o: SaveOptions,
    now: number,
    calls: CallRecord[],
  ): boolean {
    if (cp.step === 0 || cp.status !== 'running') return false;
    const narrow = this.prepare(
      `UPDATE ${n.runs} SET step = $2, lease_expires_at = $5, updated_at = $6, calls = calls + $7
       WHERE run_id = $1 AND step = $2 - 1 AND status = 'running' AND segment = $3 AND owner IS $4
         AND ($8 IS NULL OR calls = $8) AND ($9 IS NULL OR segment = $9)`,
      [
        cp.runId,
        cp.step,
        cp.segment,
        o.owner ?? null,
        o.leaseExpiresAt ?? null,
        now,
        calls.length,
        o.expectCalls ?? null,
        calls[0]?.segment ?? null,
      ],
    );
    return narrow.stmt.run(...narrow.args).changes === 1;
  }

  async recordCall(
    n: SqlNames,
    runId: string,
    segment: number,
    calls: CallRecord[],
  ): Promise<boolean> {
    return this.immediate(() => {
      const head = this.prepare(
        `UPDATE ${n.runs} SET calls = calls + $1 WHERE run_id = $2 AND segment = $3 AND status = 'running'`,
        [calls.length, runId, segment],
      );
      if (head.stmt.run(...head.args).changes !== 1) return false;
      this.insertCalls(n, calls);
      return true;
    });
  }

  private insertCalls(n: SqlNames, calls: CallRecord[]): void {
    for (const c of calls) {
      const i = this.prepare(
        `INSERT INTO ${n.calls} (run_id, superstep, segment, seq, sealed) VALUES ($1, $2, $3, $4, $5)`,
        [c.runId, c.superstep, c.segment, c.seq, c.sealed],
      );
      i.stmt.run(...i.args);
    }
  }

  async ddl(n: SqlNames, statements: string[]): Promise<void> {
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
