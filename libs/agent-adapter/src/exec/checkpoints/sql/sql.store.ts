import {
  asError,
  CheckpointStoreUnavailable,
  DurableSetupError,
  type CheckpointConflict,
  type CheckpointStoreCorrupt,
} from '../../../errors';
import { Messages } from '../../../errors/messages';
import { requireFeatures } from '../../../peers/optional-packages';
import {
  CheckpointStore,
  type AdmitQuery,
  type CallRecord,
  type CheckpointRecord,
  type DueQuery,
  type Enqueued,
  type QueuePlacement,
  type HeadlessPage,
  type HeadlessQuery,
  type HistoryPage,
  type ListQuery,
  type ListUnfinishedOptions,
  type RunHead,
  type RunPage,
  type SaveOptions,
  type StreamQuery,
  type StreamRecord,
} from '../checkpoint-store';
import { readStreamRows } from './sql.streams';
import { PostgresEngine } from './postgres.engine';
import {
  createDataSource,
  isDataSource,
  sqlFeature,
  type DataSourceLike,
  type SqlConnectionOptions,
} from './sql.driver';
import type { Engine } from './sql.engine';
import {
  checkBatch,
  duplicateOr,
  refusedBecause,
  type RefusedWrite,
} from './sql.refusals';
import {
  CHECKPOINT_COLUMNS,
  HEAD_COLUMNS,
  toCheckpoint,
  toHead,
  type CheckpointRow,
  type RunRow,
} from './sql.rows';
import {
  sqlNames,
  type SqlDialect,
  type SqlNames,
  type SqlTableOptions,
} from './sql.schema';
import { prepareTables } from './sql.tables';
import {
  dueHeads,
  headPage,
  headlessRuns,
  runHistory,
  supersteps,
  unfinishedHeads,
} from './sql.listings';
import { guarded, interrupted } from '../transient-errors';
import { SqliteEngine } from './sqlite.engine';
import { admission, enqueueRun } from './sql.queues';
import { FOUND_RUNNING, streamParams } from './sql.writes';

const STORE = 'SQLCheckpointStore';

// The connection types are declared beside the driver loading; the store's entry re-exports them.
export type { DataSourceLike, SqlConnectionOptions } from './sql.driver';

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
  /** The engine once open: the writes take it without awaiting `open()` (a promise per write). */
  private ready?: Engine;
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
      throw new DurableSetupError(Messages.sqlType(type));
    }
    sqlNames(type === 'postgres' ? 'postgres' : 'sqlite', options); // validates the names now
    // A DataSource the store makes needs typeorm and the driver: checked now (resolved, not
    // loaded; typeorm loads on first use), so a missing one fails here, not at the first run.
    if (!isDataSource(source))
      requireFeatures([sqlFeature(source)], new.target.name);
  }

  /** Connects (once) and makes sure the tables exist and are of this version. */
  private open() {
    if (this.closed)
      return Promise.reject(
        new CheckpointStoreUnavailable(
          Messages.storeClosed('SQLCheckpointStore'),
        ),
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
        // Transient: a database that is down or restarting may come back.
        throw new CheckpointStoreUnavailable(
          Messages.cannotConnect(
            'SQLCheckpointStore',
            `${dialect} database`,
            asError(error).message,
          ),
          undefined,
          { cause: error, transient: true },
        );
      }
    }
    try {
      const names = sqlNames(dialect, this.options);
      const engine =
        dialect === 'postgres'
          ? new PostgresEngine(
              dataSource,
              names,
              this.options.preparedStatements ?? true,
            )
          : new SqliteEngine(dataSource, names);
      await prepareTables(
        engine,
        names,
        dialect,
        this.options.createTables ?? true,
      );
      this.ready = engine;
      return { engine, names, dataSource };
    } catch (error) {
      // A DataSource this store made is not left open by a failed start (a later call retries).
      if (this.owned && dataSource.isInitialized)
        await dataSource.destroy().catch(() => undefined);
      throw error;
    }
  }

  save(checkpoint: CheckpointRecord, options: SaveOptions = {}): Promise<void> {
    try {
      checkBatch(checkpoint.runId, options.calls ?? []);
    } catch (error) {
      return Promise.reject(asError(error));
    }
    return this.saveChecked(checkpoint, options);
  }

  /** `guarded`'s mapping inline (see `interrupted`): this runs on every checkpoint. */
  private async saveChecked(
    checkpoint: CheckpointRecord,
    options: SaveOptions,
  ): Promise<void> {
    const { runId } = checkpoint;
    try {
      const engine = (!this.closed && this.ready) || (await this.open()).engine;
      let matched: boolean;
      try {
        matched = await engine.save(checkpoint, options, Date.now());
      } catch (error) {
        throw duplicateOr(error, runId);
      }
      if (!matched)
        throw await this.whyRefused(runId, { save: checkpoint, options });
    } catch (error) {
      throw interrupted(STORE, runId, error);
    }
  }

  enqueue(
    checkpoint: CheckpointRecord,
    placement: QueuePlacement,
    options: Pick<SaveOptions, 'head'> = {},
  ): Promise<Enqueued> {
    return guarded(STORE, checkpoint.runId, async () => {
      const { engine } = await this.open();
      return enqueueRun(engine, checkpoint, placement, options.head);
    });
  }

  admit(query: AdmitQuery): Promise<RunHead[]> {
    return guarded(STORE, undefined, async () => {
      const { engine } = await this.open();
      return engine.admission(query.queue, admission(engine, query), []);
    });
  }

  async recordCall(
    runId: string,
    segment: number,
    records: CallRecord[],
    head?: string,
  ): Promise<void> {
    if (records.length === 0) return;
    checkBatch(runId, records, segment);
    try {
      const engine = (!this.closed && this.ready) || (await this.open()).engine;
      let matched: boolean;
      try {
        matched = await engine.recordCall(runId, segment, records, head);
      } catch (error) {
        throw duplicateOr(error, runId);
      }
      if (!matched)
        throw await this.whyRefused(runId, { segment, calls: records });
    } catch (error) {
      throw interrupted(STORE, runId, error);
    }
  }

  async appendStream(
    runId: string,
    segment: number,
    entries: readonly Omit<StreamRecord, 'offset'>[],
    keep: number,
  ): Promise<number> {
    if (!entries.length) throw new TypeError(Messages.streamEmptyAppend(runId));
    return guarded(STORE, runId, async () => {
      const { engine } = await this.open();
      const p = streamParams(runId, segment, entries, keep);
      const first = await engine.appendStream(p);
      if (first === undefined) throw await this.whyRefused(runId, { segment });
      return first;
    });
  }

  readStream(runId: string, query?: StreamQuery): Promise<StreamRecord[]> {
    return guarded(STORE, runId, async () => {
      const { engine, names } = await this.open();
      return readStreamRows(engine, names, runId, query);
    });
  }

  latest(runId: string): Promise<CheckpointRecord | undefined> {
    return guarded(STORE, runId, async () => {
      const { engine, names } = await this.open();
      const [row] = await engine.all<CheckpointRow>(
        `SELECT ${CHECKPOINT_COLUMNS} FROM ${names.checkpoints} WHERE run_id = $1 ORDER BY step DESC LIMIT 1`,
        [runId],
      );
      return row && toCheckpoint(row);
    });
  }

  head(runId: string): Promise<RunHead | undefined> {
    return guarded(STORE, runId, () => this.readHead(runId));
  }

  private async readHead(runId: string): Promise<RunHead | undefined> {
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
    return unfinishedHeads(engine, names, flow, options);
  }

  listDue(query: DueQuery): Promise<RunHead[]> {
    return guarded(STORE, undefined, async () => {
      const { engine, names } = await this.open();
      return dueHeads(engine, names, query);
    });
  }

  async delete(runId: string): Promise<boolean> {
    const { engine } = await this.open();
    return engine.deleteRun(runId);
  }

  calls(runId: string, superstep: number): Promise<CallRecord[]> {
    return guarded(STORE, runId, async () => {
      const { engine, names } = await this.open();
      return supersteps(engine, names, runId, superstep);
    });
  }

  async list(query: ListQuery = {}): Promise<RunPage> {
    const { engine, names } = await this.open();
    return headPage(engine, names, query);
  }

  listHeadless(query: HeadlessQuery = {}): Promise<HeadlessPage> {
    return guarded(STORE, undefined, async () => {
      const { engine, names } = await this.open();
      return headlessRuns(engine, names, query);
    });
  }

  async history(runId: string): Promise<HistoryPage> {
    const { engine, names } = await this.open();
    return runHistory(engine, names, runId);
  }

  async renewLeases(
    owner: string,
    leaseExpiresAt: number,
    runIds: readonly string[],
  ): Promise<number> {
    if (runIds.length === 0) return 0;
    const { engine, names } = await this.open();
    // One statement for all the runs this worker drives. Running ones only: a sleeping or paused
    // run's due time is its wake time or deadline, which a renewal landing after that save keeps.
    const listed =
      engine.dialect === 'postgres'
        ? 'run_id = ANY($3::varchar[])'
        : 'run_id IN (SELECT value FROM json_each($3))';
    return engine.change(
      `UPDATE ${names.runs} SET lease_expires_at = $1 WHERE owner = $2 AND ${listed} AND ${FOUND_RUNNING}`,
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

  /** After a refused write: why (a message only; the write did nothing). */
  private async whyRefused(
    runId: string,
    write: RefusedWrite,
  ): Promise<CheckpointConflict | CheckpointStoreCorrupt> {
    const { engine } = await this.open();
    return refusedBecause(engine, runId, write);
  }
}
