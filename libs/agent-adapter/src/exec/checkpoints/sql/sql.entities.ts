// Exported only by 'agent-adapter/typeorm' (src/typeorm), never by the core entry: loading this file
// loads typeorm.
import { EntitySchema, type EntitySchemaColumnOptions } from 'typeorm';
import {
  sqlNames,
  UNFINISHED_SQL,
  type SqlDialect,
  type SqlTableOptions,
} from './sql.schema';

/** @publicApi */
export interface AgentAdapterEntitiesOptions extends SqlTableOptions {
  /**
   * The DataSource's `type`. The two dialects differ in how the runs table numbers its rows
   * (an identity column on Postgres, AUTOINCREMENT on SQLite) and in SQLite's WITHOUT ROWID tables.
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
  /** The head seal (see the store port's `RunHead.sealed`). */
  sealed: string;
  owner: string | null;
  /** Epoch milliseconds. */
  lease_expires_at: string | number | null;
  /** Epoch milliseconds. */
  updated_at: string | number;
}

/** One checkpoint (sealed envelope) of a run. @publicApi */
export interface AgentAdapterCheckpointRow {
  run_id: string;
  step: number;
  flow: string;
  status: string;
  segment: number;
  sealed: string;
}

/** One call record (sealed envelope). @publicApi */
export interface AgentAdapterCallRow {
  run_id: string;
  superstep: number;
  segment: number;
  seq: number;
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
  EntitySchema<AgentAdapterMetaRow>,
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
  // The DDL's own constraint names (sql.schema.ts leaves them to the database), so TypeORM sees
  // them as unchanged: Postgres names a primary key "<table>_pkey".
  const primaryKey = (name: string) =>
    pg ? { primaryKeyConstraintName: `${prefix}${name}_pkey` } : {};

  type ColumnExtras = Omit<EntitySchemaColumnOptions, 'type'>;
  const varchar = (length: number, extra: ColumnExtras = {}) =>
    ({ type: 'varchar', length, ...extra }) satisfies EntitySchemaColumnOptions;
  const integer = { type: 'integer' } satisfies EntitySchemaColumnOptions;
  const bigint = { type: 'bigint' } satisfies EntitySchemaColumnOptions;
  const text = { type: 'text' } satisfies EntitySchemaColumnOptions;

  const runs = new EntitySchema<AgentAdapterRunRow>({
    ...table('runs'),
    columns: {
      id: {
        // The DDL's types: BIGINT identity on Postgres; SQLite's AUTOINCREMENT needs INTEGER.
        type: pg ? 'bigint' : 'integer',
        primary: true,
        ...primaryKey('runs'),
        // EntitySchema's typing lacks 'identity' (TypeORM's @PrimaryGeneratedColumn has it); the
        // strategy is passed through as is. SQLite has no identity: AUTOINCREMENT, as the DDL.
        generated: (pg ? 'identity' : 'increment') as 'increment',
      },
      // Postgres: the constraint named as the DDL's inline UNIQUE names it ("<table>_run_id_key").
      // SQLite names no unique constraint (an autoindex): the column flag, as TypeORM reads it.
      run_id: varchar(200, pg ? {} : { unique: true }),
      flow: varchar(128),
      step: integer,
      status: varchar(8),
      segment: integer,
      calls: { ...integer, default: 0 },
      sealed: text,
      owner: varchar(200, { nullable: true }),
      lease_expires_at: { ...bigint, nullable: true },
      updated_at: bigint,
    },
    ...(pg && {
      uniques: [{ name: `${prefix}runs_run_id_key`, columns: ['run_id'] }],
    }),
    indices: [
      {
        name: index('runs_unfinished'),
        columns: ['flow', 'run_id'],
        where: UNFINISHED_SQL,
      },
      { name: index('runs_owner'), columns: ['owner'], where: UNFINISHED_SQL },
      { name: index('runs_flow_id'), columns: ['flow', 'id'] },
      { name: index('runs_status_id'), columns: ['status', 'id'] },
      { name: index('runs_flow_status_id'), columns: ['flow', 'status', 'id'] },
    ],
  });

  const withoutRowid = pg ? {} : { withoutRowid: true };
  const checkpoints = new EntitySchema<AgentAdapterCheckpointRow>({
    ...table('checkpoints'),
    ...withoutRowid,
    columns: {
      run_id: varchar(200, { primary: true, ...primaryKey('checkpoints') }),
      step: { ...integer, primary: true, ...primaryKey('checkpoints') },
      flow: varchar(128),
      status: varchar(8),
      segment: integer,
      sealed: text,
    },
  });

  const calls = new EntitySchema<AgentAdapterCallRow>({
    ...table('calls'),
    ...withoutRowid,
    columns: {
      run_id: varchar(200, { primary: true, ...primaryKey('calls') }),
      superstep: { ...integer, primary: true, ...primaryKey('calls') },
      segment: { ...integer, primary: true, ...primaryKey('calls') },
      seq: { ...integer, primary: true, ...primaryKey('calls') },
      sealed: text,
    },
  });

  const meta = new EntitySchema<AgentAdapterMetaRow>({
    ...table('meta'),
    columns: {
      key: varchar(64, { primary: true, ...primaryKey('meta') }),
      value: text,
    },
  });

  return [runs, checkpoints, calls, meta];
}
