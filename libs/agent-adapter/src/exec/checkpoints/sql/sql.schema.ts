import { DurableSetupError } from '../../../errors';
import { Messages } from '../../../errors/messages';
/**
 * The SQL store's tables, for Postgres and SQLite: one DDL, used both by the store when it creates
 * its tables on first use and by the shipped TypeORM migration.
 */

export type SqlDialect = 'postgres' | 'sqlite';

/**
 * The runs an index or a query of unfinished runs covers (the partial indexes' predicate), as
 * comparisons: no `IN (...)` list here or in any predicate a head write evaluates. SQLite evaluates
 * such a list, in a statement that writes a row, through an ephemeral table with a page cache of
 * its own, made anew per list per row. The save that ends a run took 0.24 ms with the lists and
 * 0.21 without (bench/RESULTS.md, thirty-first session), and in a process whose allocator hands
 * that cache's memory back to the system each time, the head update alone took 0.38 ms against
 * 0.008.
 */
export const unfinishedSql = (operand: string): string =>
  `(${operand} = 'running' OR ${operand} = 'paused' OR ${operand} = 'sleeping')`;

export const UNFINISHED_SQL = unfinishedSql('status');

/** The schema version these tables have; stored in the meta table. */
export const SCHEMA_VERSION = 13;
/** Earlier versions, refused by name (development builds; nothing migrates). */
export const RETIRED_SCHEMA_VERSIONS: ReadonlyMap<string, string> = new Map([
  ['1', 'run heads without a seal'],
  ['2', 'no index of due work (running runs by lease expiry)'],
  ['3', 'no queues'],
  ['4', 'no sleeping runs; due work only of running runs'],
  ['5', 'no run streams; no index of the ended runs of a queue'],
  [
    '6',
    'ended runs indexed by their last update (no HOT update of a running head)',
  ],
  ['7', 'an index of unfinished runs by owner that no query reads'],
  [
    '8',
    'an index of unfinished runs that a head write could pick to find its run',
  ],
  [
    '9',
    'SQLite log tables clustered by run id (WITHOUT ROWID): several pages rewritten per insert',
  ],
  [
    '10',
    'partial indexes on IN lists (SQLite built an ephemeral table for each on every head write)',
  ],
  [
    '11',
    'every call record in a row of its own (no call records in checkpoint rows, no last record on the head)',
  ],
  [
    '12',
    "checkpoint rows without their call records' superstep range (calls_from, calls_to)",
  ],
]);

/** @publicApi */
export interface SqlTableOptions {
  /** Prefix of every table and index name (a tenant). Letters, digits and "_". @default 'aa_' */
  tablePrefix?: string;
  /** Postgres schema holding the tables (a tenant); created if missing. @default the connection's */
  schema?: string;
}

export interface SqlNames {
  runs: string;
  checkpoints: string;
  calls: string;
  /** Stream entries (`ctx.publish`), by run and offset. */
  stream: string;
  meta: string;
  /** One row per queue: the lock an admission takes (Postgres). */
  queues: string;
  /** For index names (unquoted, prefixed). */
  prefix: string;
  schema?: string;
}

const IDENT = /^[A-Za-z_][A-Za-z0-9_]{0,40}$/;

export function sqlNames(
  dialect: SqlDialect,
  options: SqlTableOptions = {},
): SqlNames {
  const prefix = options.tablePrefix ?? 'aa_';
  if (!/^[A-Za-z0-9_]{0,30}$/.test(prefix)) {
    throw new DurableSetupError(Messages.tablePrefix(prefix));
  }
  const schema = options.schema;
  if (schema !== undefined) {
    if (dialect !== 'postgres')
      throw new DurableSetupError(Messages.schemaOnSqlite());
    if (!IDENT.test(schema))
      throw new DurableSetupError(Messages.schemaName(schema));
  }
  const q = (table: string) =>
    schema ? `"${schema}"."${prefix}${table}"` : `"${prefix}${table}"`;
  return {
    runs: q('runs'),
    checkpoints: q('checkpoints'),
    calls: q('calls'),
    stream: q('stream'),
    meta: q('meta'),
    queues: q('queues'),
    prefix,
    ...(schema !== undefined && { schema }),
  };
}

/**
 * The runs that may be due work (`runs_due`, by due time): not waiting on a queue, and running, or
 * sleeping or paused with a due time. A sleeping run without one is due at once like a running one
 * (listDue keeps `lease_expires_at IS NULL`); a paused one without one waits for a person, so it
 * stays out of the index and a look never reads it.
 */
export const DUE_SQL = `available_at IS NULL AND (status = 'running' OR status = 'sleeping' OR (status = 'paused' AND lease_expires_at IS NOT NULL))`;

/** A queue's waiting runs (`runs_waiting`). */
export const WAITING_SQL = `available_at IS NOT NULL`;

/** A queue's admitted runs (`runs_admitted`): counted by its rate limit. */
export const ADMITTED_SQL = `admitted_at IS NOT NULL`;

/**
 * A queue's admitted runs that have ended (`runs_ended`, by `ended_at`): an admission's time is
 * never before the latest of them (see `CheckpointStore.admit`). `ended_at` is written once, by the
 * save that ends the run: a save of a running run changes no indexed column (the lease keeps its
 * value within a lease quantum, see `leaseEnd`), so Postgres updates its head in place (HOT).
 */
export const ENDED_SQL = `admitted_at IS NOT NULL AND NOT ${UNFINISHED_SQL}`;

/**
 * The runs recovery lists (`runs_unfinished`, by flow and run id): unfinished and not waiting on a
 * queue. `available_at IS NULL` also keeps the index out of every head write's reach: a write finds
 * its run by `run_id` under a status check that implies `UNFINISHED_SQL`, and with that predicate
 * alone Postgres could plan the write as a scan of this whole index (it does on a young table, and
 * keeps the plan per connection: each write then walks every entry, dead ones too).
 */
export const LISTED_UNFINISHED_SQL = `${UNFINISHED_SQL} AND available_at IS NULL`;

/** Runs that hold their dedupe key (`runs_dedupe`): unfinished ones. */
export const DEDUPE_SQL = `dedupe_key IS NOT NULL AND ${UNFINISHED_SQL}`;

/** Statements that create every table and index if missing (idempotent). */
export function createStatements(dialect: SqlDialect, n: SqlNames): string[] {
  const pg = dialect === 'postgres';
  const idx = (name: string) => `"${n.prefix}${name}"`;
  return [
    ...(pg && n.schema ? [`CREATE SCHEMA IF NOT EXISTS "${n.schema}"`] : []),
    // One row per run: the head. `calls` counts call records (see RunHead.calls), `sealed` is the
    // head seal (RunHead.sealed), `last_*` the key of the last call record (call-order.ts: every
    // append comes after it, which is what refuses a duplicate); fillfactor leaves
    // room for HOT updates, since every call and checkpoint updates this row. "id" is quoted and
    // NOT NULL because TypeORM's SQLite schema reader finds the AUTOINCREMENT column by its quoted
    // name and reads nullability from the declaration: so the entities see no difference.
    `CREATE TABLE IF NOT EXISTS ${n.runs} (
      "id" ${pg ? 'BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY' : 'INTEGER PRIMARY KEY AUTOINCREMENT NOT NULL'},
      run_id VARCHAR(200) NOT NULL UNIQUE,
      flow VARCHAR(128) NOT NULL,
      step INTEGER NOT NULL,
      status VARCHAR(8) NOT NULL,
      segment INTEGER NOT NULL,
      calls INTEGER NOT NULL DEFAULT 0,
      streamed INTEGER NOT NULL DEFAULT 0,
      sealed TEXT NOT NULL,
      owner VARCHAR(200),
      lease_expires_at BIGINT,
      updated_at BIGINT NOT NULL,
      ended_at BIGINT,
      queue VARCHAR(128),
      queue_key VARCHAR(200),
      dedupe_key VARCHAR(200),
      priority INTEGER NOT NULL DEFAULT 0,
      available_at BIGINT,
      admitted_at BIGINT,
      last_segment INTEGER NOT NULL DEFAULT 0,
      last_superstep INTEGER NOT NULL DEFAULT 0,
      last_seq INTEGER NOT NULL DEFAULT 0
    )${pg ? ' WITH (fillfactor = 70)' : ''}`,
    // Also for a runs table made by TypeORM's synchronize (entities cannot say fillfactor).
    ...(pg ? [`ALTER TABLE ${n.runs} SET (fillfactor = 70)`] : []),
    // listUnfinished only ever looks at unfinished runs not on a queue: a partial index stays small,
    // and no head write can use it (see LISTED_UNFINISHED_SQL). (Leases are
    // renewed by run id: no index by owner, so a run's creation writes one entry less.)
    `CREATE INDEX IF NOT EXISTS ${idx('runs_unfinished')} ON ${n.runs} (flow, run_id) WHERE ${LISTED_UNFINISHED_SQL}`,
    // Due work (listDue): runs by due time (lease expiry, wake time, deadline), so a look reads
    // only what is due.
    `CREATE INDEX IF NOT EXISTS ${idx('runs_due')} ON ${n.runs} (lease_expires_at) WHERE ${DUE_SQL}`,
    `CREATE INDEX IF NOT EXISTS ${idx('runs_flow_id')} ON ${n.runs} (flow, id)`,
    // Queues: each waiting run in admission order, the admitted ones by admission time (the
    // limits count them), and one unfinished run per dedupe key. Runs of no queue are in none.
    `CREATE INDEX IF NOT EXISTS ${idx('runs_waiting')} ON ${n.runs} (queue, priority, available_at, id) WHERE ${WAITING_SQL}`,
    `CREATE INDEX IF NOT EXISTS ${idx('runs_admitted')} ON ${n.runs} (queue, admitted_at) WHERE ${ADMITTED_SQL}`,
    `CREATE INDEX IF NOT EXISTS ${idx('runs_ended')} ON ${n.runs} (queue, ended_at) WHERE ${ENDED_SQL}`,
    `CREATE UNIQUE INDEX IF NOT EXISTS ${idx('runs_dedupe')} ON ${n.runs} (queue, dedupe_key) WHERE ${DEDUPE_SQL}`,
    // Operators list by status (failed, paused...), with or without a flow.
    `CREATE INDEX IF NOT EXISTS ${idx('runs_status_id')} ON ${n.runs} (status, id)`,
    `CREATE INDEX IF NOT EXISTS ${idx('runs_flow_status_id')} ON ${n.runs} (flow, status, id)`,
    // Not WITHOUT ROWID on SQLite: clustered by the key, every interior page of the b-tree holds
    // whole rows (sealed texts), so a few rows fill one and each insert rewrote 3-4 pages. A rowid
    // table and its key's index: about 2. A checkpoint row also keeps the call records saved with
    // it (`calls`, their supersteps from `calls_from` to `calls_to`; see sql.call-batches.ts).
    `CREATE TABLE IF NOT EXISTS ${n.checkpoints} (
      run_id VARCHAR(200) NOT NULL,
      step INTEGER NOT NULL,
      flow VARCHAR(128) NOT NULL,
      status VARCHAR(8) NOT NULL,
      segment INTEGER NOT NULL,
      sealed TEXT NOT NULL,
      calls TEXT,
      calls_from INTEGER,
      calls_to INTEGER,
      PRIMARY KEY (run_id, step)
    )`,
    `CREATE TABLE IF NOT EXISTS ${n.calls} (
      run_id VARCHAR(200) NOT NULL,
      superstep INTEGER NOT NULL,
      segment INTEGER NOT NULL,
      seq INTEGER NOT NULL,
      sealed TEXT NOT NULL,
      PRIMARY KEY (run_id, superstep, segment, seq)
    )`,
    // A run's stream: entries numbered by the head's `streamed` count, read by offset or by the
    // superstep that published them (what a re-run of it looks up).
    `CREATE TABLE IF NOT EXISTS ${n.stream} (
      run_id VARCHAR(200) NOT NULL,
      entry_no BIGINT NOT NULL,
      superstep INTEGER NOT NULL,
      place VARCHAR(300) NOT NULL,
      sealed TEXT NOT NULL,
      PRIMARY KEY (run_id, entry_no)
    )`,
    `CREATE INDEX IF NOT EXISTS ${idx('stream_superstep')} ON ${n.stream} (run_id, superstep)`,
    `CREATE TABLE IF NOT EXISTS ${n.meta} (key VARCHAR(64) NOT NULL PRIMARY KEY, value TEXT NOT NULL)`,
    `CREATE TABLE IF NOT EXISTS ${n.queues} (name VARCHAR(128) NOT NULL PRIMARY KEY)`,
    `INSERT INTO ${n.meta} (key, value) VALUES ('schema_version', '${SCHEMA_VERSION}') ON CONFLICT (key) DO NOTHING`,
  ];
}

export function dropStatements(n: SqlNames): string[] {
  return [n.stream, n.calls, n.checkpoints, n.runs, n.queues, n.meta].map(
    (t) => `DROP TABLE IF EXISTS ${t}`,
  );
}
