import {
  createStatements,
  dropStatements,
  sqlNames,
  type SqlTableOptions,
} from '../sql.schema';

/** The part of TypeORM's QueryRunner a migration uses (typed here so typeorm stays optional). */
export interface MigrationQueryRunner {
  query(sql: string): Promise<unknown>;
  connection: { options: { type: string } };
}

/** A TypeORM migration (structurally: `MigrationInterface`). */
export interface AgentAdapterMigration {
  name: string;
  up(queryRunner: MigrationQueryRunner): Promise<void>;
  down(queryRunner: MigrationQueryRunner): Promise<void>;
}

/**
 * TypeORM migrations that create the SQL store's tables, for `migrations: [...]` of your
 * DataSource (then `migrationsRun` or `typeorm migration:run`). Pass the same table options as to
 * the store, and `createTables: false` to the store so it only checks the tables are there.
 * @publicApi
 */
export function agentAdapterMigrations(
  options: SqlTableOptions = {},
): Array<new () => AgentAdapterMigration> {
  const dialectOf = (qr: MigrationQueryRunner) =>
    qr.connection.options.type === 'postgres' ? 'postgres' : 'sqlite';
  // TypeORM orders and records migrations by class name; the timestamp suffix is required.
  const suffix =
    `${options.schema ?? ''}${options.tablePrefix ?? 'aa_'}`.replace(
      /[^A-Za-z0-9]/g,
      '',
    );
  const name = `AgentAdapterInit${suffix}1795900000000`;
  const migration = class {
    name = name;
    async up(qr: MigrationQueryRunner): Promise<void> {
      const dialect = dialectOf(qr);
      for (const sql of createStatements(dialect, sqlNames(dialect, options)))
        await qr.query(sql);
    }
    async down(qr: MigrationQueryRunner): Promise<void> {
      for (const sql of dropStatements(sqlNames(dialectOf(qr), options)))
        await qr.query(sql);
    }
  };
  Object.defineProperty(migration, 'name', { value: name });
  return [migration];
}
