// Exported only by 'agent-adapter/typeorm' (src/typeorm), never by the core entry: loading this file
// loads typeorm.
import {
  EntitySchema,
  type EntitySchemaColumnOptions,
  type EntitySchemaOptions,
} from 'typeorm';
import {
  ADMITTED_SQL,
  DEDUPE_SQL,
  ENDED_SQL,
  DUE_SQL,
  WAITING_SQL,
  sqlNames,
  LISTED_UNFINISHED_SQL,
  type SqlDialect,
  type SqlTableOptions,
} from './sql.schema';

/** @publicApi */
export interface AgentAdapterEntitiesOptions extends SqlTableOptions {
  /**
   * The DataSource's `type`. The two dialects differ in how the runs table numbers its rows
   * (an identity column on Postgres, AUTOINCREMENT on SQLite).
   */
  type: 'postgres' | 'better-sqlite3';
}

/**
 * One row of the runs table (the run's head), as TypeORM reads it. BIGINT columns come back as
 * strings from Postgres and as numbers from SQLite.
 * @publicApi
 */
export interface AgentAdapterRunRow {
  id: string | number;
  run_id: string;
  flow: string;
  step: number;
  status: string;
  segment: number;
  calls: number;
  /** How many entries the run's stream has had (the next entry's offset). */
  streamed: number;
  /** The head seal (see the store port's `RunHead.sealed`). */
  sealed: string;
  owner: string | null;
  /** Epoch milliseconds. */
  lease_expires_at: string | number | null;
  /** Epoch milliseconds. */
  updated_at: string | number;
  /** Epoch milliseconds of the save that ended the run; null while it is unfinished. */
  ended_at: string | number | null;
  /** A queued run's queue (`enqueue`); null for a run started directly. */
  queue: string | null;
  /** Its concurrency key. */
  queue_key: string | null;
  /** Its dedupe key: one unfinished run per (queue, dedupe key). */
  dedupe_key: string | null;
  priority: number;
  /** Epoch milliseconds from which it may be admitted; null once admitted (or never queued). */
  available_at: string | number | null;
  /** Epoch milliseconds of its admission. */
  admitted_at: string | number | null;
  /** The key of the run's last call record (segment, superstep, seq; zeros before the first). */
  last_segment: number;
  last_superstep: number;
  last_seq: number;
}

/** One queue: the row an admission locks (Postgres). @publicApi */
export interface AgentAdapterQueueRow {
  name: string;
}

/** One checkpoint (sealed envelope) of a run. @publicApi */
export interface AgentAdapterCheckpointRow {
  run_id: string;
  step: number;
  flow: string;
  status: string;
  segment: number;
  sealed: string;
  /**
   * The call records saved with this checkpoint (each a header line `superstep segment seq length`
   * and then its sealed envelope); null for none. The calls table keeps the others.
   */
  calls: string | null;
  /** The first and the last superstep of those records (null for none). */
  calls_from: number | null;
  calls_to: number | null;
}

/** One call record (sealed envelope). @publicApi */
export interface AgentAdapterCallRow {
  run_id: string;
  superstep: number;
  segment: number;
  seq: number;
  sealed: string;
}

/** One entry of a run's stream (sealed envelope). @publicApi */
export interface AgentAdapterStreamRow {
  run_id: string;
  /** Its offset in the run's stream. BIGINT: a string from Postgres, a number from SQLite. */
  entry_no: string | number;
  superstep: number;
  place: string;
  sealed: string;
}

/** The store's key/value table (its schema version). @publicApi */
export interface AgentAdapterMetaRow {
  key: string;
  value: string;
}

/** @publicApi */
export type AgentAdapterEntities = [
  EntitySchema<AgentAdapterRunRow>,
  EntitySchema<AgentAdapterCheckpointRow>,
  EntitySchema<AgentAdapterCallRow>,
  EntitySchema<AgentAdapterStreamRow>,
  EntitySchema<AgentAdapterMetaRow>,
  EntitySchema<AgentAdapterQueueRow>,
];

/**
 * TypeORM entity definitions of the SQL store's tables, exactly as `agentAdapterMigrations()` and
 * the store itself create them (a test holds the three to each other), for `entities: [...]` of
 * your DataSource. Register them so TypeORM's schema tooling (`synchronize`, `migration:generate`)
 * knows these tables and leaves them alone, or to read runs with repositories. Write only through
 * the store: it signs, compare-and-sets and fences every write.
 *
 * Pass the same `schema`/`tablePrefix` as to the store; each tenant's entities get their own names.
 * @publicApi
 */
export function agentAdapterEntities(
  options: AgentAdapterEntitiesOptions,
): AgentAdapterEntities {
  const dialect: SqlDialect =
    options.type === 'postgres' ? 'postgres' : 'sqlite';
  const pg = dialect === 'postgres';
  const { prefix, schema } = sqlNames(dialect, options); // validates the names
  const table = (name: string) => ({
    name: `agent_adapter:${schema === undefined ? '' : `${schema}.`}${prefix}${name}`,
    tableName: `${prefix}${name}`,
    ...(schema !== undefined && { schema }),
  });
  const index = (name: string) => `${prefix}${name}`;
  // Marks a column as one of the table's primary key, under the DDL's own constraint name
  // (sql.schema.ts leaves it to the database) so TypeORM sees it unchanged: Postgres names a
  // primary key "<table>_pkey".
  const keyOf =
    (name: string) =>
    <C extends EntitySchemaColumnOptions>(column: C) => ({
      ...column,
      primary: true,
      ...(pg && { primaryKeyConstraintName: `${prefix}${name}_pkey` }),
    });

  type ColumnExtras = Omit<EntitySchemaColumnOptions, 'type'>;
  const varchar = (length: number, extra: ColumnExtras = {}) =>
    ({ type: 'varchar', length, ...extra }) satisfies EntitySchemaColumnOptions;
  const integer = { type: 'integer' } satisfies EntitySchemaColumnOptions;
  const bigint = { type: 'bigint' } satisfies EntitySchemaColumnOptions;
  const text = { type: 'text' } satisfies EntitySchemaColumnOptions;

  const runs = new EntitySchema<AgentAdapterRunRow>({
    ...table('runs'),
    columns: {
      id: keyOf('runs')({
        // The DDL's types: BIGINT identity on Postgres; SQLite's AUTOINCREMENT needs INTEGER.
        type: pg ? 'bigint' : 'integer',
        // EntitySchema's typing lacks 'identity' (TypeORM's @PrimaryGeneratedColumn has it); the
        // strategy is passed through as is. SQLite has no identity: AUTOINCREMENT, as the DDL.
        generated: (pg ? 'identity' : 'increment') as 'increment',
      }),
      // Postgres: the constraint named as the DDL's inline UNIQUE names it ("<table>_run_id_key").
      // SQLite names no unique constraint (an autoindex): the column flag, as TypeORM reads it.
      run_id: varchar(200, pg ? {} : { unique: true }),
      flow: varchar(128),
      step: integer,
      status: varchar(8),
      segment: integer,
      calls: { ...integer, default: 0 },
      streamed: { ...integer, default: 0 },
      sealed: text,
      owner: varchar(200, { nullable: true }),
      lease_expires_at: { ...bigint, nullable: true },
      updated_at: bigint,
      ended_at: { ...bigint, nullable: true },
      queue: varchar(128, { nullable: true }),
      queue_key: varchar(200, { nullable: true }),
      dedupe_key: varchar(200, { nullable: true }),
      priority: { ...integer, default: 0 },
      available_at: { ...bigint, nullable: true },
      admitted_at: { ...bigint, nullable: true },
      last_segment: { ...integer, default: 0 },
      last_superstep: { ...integer, default: 0 },
      last_seq: { ...integer, default: 0 },
    },
    ...(pg && {
      uniques: [{ name: `${prefix}runs_run_id_key`, columns: ['run_id'] }],
    }),
    indices: [
      {
        name: index('runs_unfinished'),
        columns: ['flow', 'run_id'],
        where: LISTED_UNFINISHED_SQL,
      },
      {
        name: index('runs_due'),
        columns: ['lease_expires_at'],
        where: DUE_SQL,
      },
      { name: index('runs_flow_id'), columns: ['flow', 'id'] },
      {
        name: index('runs_waiting'),
        columns: ['queue', 'priority', 'available_at', 'id'],
        where: WAITING_SQL,
      },
      {
        name: index('runs_admitted'),
        columns: ['queue', 'admitted_at'],
        where: ADMITTED_SQL,
      },
      {
        name: index('runs_ended'),
        columns: ['queue', 'ended_at'],
        where: ENDED_SQL,
      },
      {
        name: index('runs_dedupe'),
        columns: ['queue', 'dedupe_key'],
        unique: true,
        where: DEDUPE_SQL,
      },
      { name: index('runs_status_id'), columns: ['status', 'id'] },
      { name: index('runs_flow_status_id'), columns: ['flow', 'status', 'id'] },
    ],
  });

  // A run's log table (checkpoints, calls): keyed by the run id, then by the columns `columns`
  // marks with `key`.
  const runLog = <Row extends { run_id: string }>(
    name: string,
    columns: (
      key: ReturnType<typeof keyOf>,
    ) => EntitySchemaOptions<Row>['columns'],
  ) => {
    const key = keyOf(name);
    return new EntitySchema<Row>({
      ...table(name),
      columns: { run_id: key(varchar(200)), ...columns(key) },
    });
  };

  const checkpoints = runLog<AgentAdapterCheckpointRow>(
    'checkpoints',
    (key) => ({
      step: key(integer),
      flow: varchar(128),
      status: varchar(8),
      segment: integer,
      sealed: text,
      calls: { ...text, nullable: true },
      calls_from: { ...integer, nullable: true },
      calls_to: { ...integer, nullable: true },
    }),
  );

  const calls = runLog<AgentAdapterCallRow>('calls', (key) => ({
    superstep: key(integer),
    segment: key(integer),
    seq: key(integer),
    sealed: text,
  }));

  const stream = new EntitySchema<AgentAdapterStreamRow>({
    ...table('stream'),
    columns: {
      run_id: keyOf('stream')(varchar(200)),
      entry_no: keyOf('stream')(bigint),
      superstep: integer,
      place: varchar(300),
      sealed: text,
    },
    indices: [
      { name: index('stream_superstep'), columns: ['run_id', 'superstep'] },
    ],
  });

  const meta = new EntitySchema<AgentAdapterMetaRow>({
    ...table('meta'),
    columns: {
      key: keyOf('meta')(varchar(64)),
      value: text,
    },
  });

  const queues = new EntitySchema<AgentAdapterQueueRow>({
    ...table('queues'),
    columns: { name: keyOf('queues')(varchar(128)) },
  });

  return [runs, checkpoints, calls, stream, meta, queues];
}
