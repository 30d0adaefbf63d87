import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SQLCheckpointStore, type SqlTableOptions } from 'agent-adapter';
import {
  agentAdapterEntities,
  agentAdapterMigrations,
} from 'agent-adapter/typeorm';
import { DataSource, type DataSourceOptions } from 'typeorm';
import { DATABASE_URL, describeWithService, suiteId } from '../utils/services';

/**
 * The shipped entities, the shipped migration and the store's own DDL describe one set of tables.
 * Both directions are checked on both dialects: after the migration TypeORM's schema builder finds
 * nothing to change for the entities, and tables made by `synchronize` from the entities have the
 * same catalog (columns, keys, indexes with their WHERE clauses) as the migrated ones, and the store
 * runs on them. Changing one side without the other fails here.
 */

/** Where one tenant's tables live, and how to read their catalog. */
interface Dialect {
  type: 'postgres' | 'better-sqlite3';
  /** A DataSource's options for a fresh, empty tenant, and its table options. */
  tenant(): { options: DataSourceOptions; tables: SqlTableOptions };
  /** Everything about the tenant's tables that the two ways of making them must agree on. */
  catalog(ds: DataSource, tables: SqlTableOptions): Promise<unknown>;
  /** The store-specific table options (reloptions), which entities cannot declare. */
  storage(ds: DataSource, tables: SqlTableOptions): Promise<unknown>;
  cleanup(): Promise<void>;
}

const PREFIX = 'ent_';

function entitySuite(dialect: Dialect): void {
  const migrated = async () => {
    const { options, tables } = dialect.tenant();
    const ds = new DataSource({
      ...options,
      migrations: agentAdapterMigrations(tables),
      migrationsTableName: 'typeorm_migrations',
    });
    await ds.initialize();
    if (tables.schema)
      await ds.query(`CREATE SCHEMA IF NOT EXISTS "${tables.schema}"`);
    await ds.runMigrations();
    await ds.destroy();
    return { options, tables };
  };
  const withEntities = async (
    options: DataSourceOptions,
    tables: SqlTableOptions,
    synchronize = false,
  ) => {
    const ds = new DataSource({
      ...options,
      entities: agentAdapterEntities({ type: dialect.type, ...tables }),
      synchronize,
    });
    await ds.initialize();
    return ds;
  };
  const pendingChanges = async (ds: DataSource) =>
    (await ds.driver.createSchemaBuilder().log()).upQueries.map((q) => q.query);

  afterAll(() => dialect.cleanup());

  it('after the shipped migration, TypeORM finds nothing to change for the entities', async () => {
    const { options, tables } = await migrated();
    const ds = await withEntities(options, tables);
    try {
      expect(await pendingChanges(ds)).toEqual([]);
    } finally {
      await ds.destroy();
    }
  });

  it('the check is not vacuous: tables that drift from the entities are reported', async () => {
    const { options, tables } = await migrated();
    const ds = await withEntities(options, tables);
    try {
      const table = tables.schema
        ? `"${tables.schema}"."${PREFIX}calls"`
        : `"${PREFIX}calls"`;
      const index = tables.schema
        ? `"${tables.schema}"."${PREFIX}runs_flow_id"`
        : `"${PREFIX}runs_flow_id"`;
      await ds.query(`DROP INDEX ${index}`);
      await ds.query(`ALTER TABLE ${table} ADD COLUMN extra INTEGER`);
      const changes = (await pendingChanges(ds)).join('\n');
      expect(changes).toMatch(/CREATE INDEX "ent_runs_flow_id"/);
      // Postgres drops the column; SQLite rebuilds the table without it.
      expect(changes).toMatch(/DROP COLUMN "extra"|INTO "temporary_ent_calls"/);
    } finally {
      await ds.destroy();
    }
  });

  it("synchronize from the entities makes the migration's tables, and the store stamps and runs on them", async () => {
    const reference = await migrated();
    const referenceDs = new DataSource(reference.options);
    await referenceDs.initialize();
    const { options, tables } = dialect.tenant();
    if (tables.schema) {
      // TypeORM's synchronize does not create schemas; the application does (or the migration).
      const admin = new DataSource(options);
      await admin.initialize();
      await admin.query(`CREATE SCHEMA "${tables.schema}"`);
      await admin.destroy();
    }
    const ds = await withEntities(options, tables, true);
    try {
      expect(await dialect.catalog(ds, tables)).toEqual(
        await dialect.catalog(referenceDs, reference.tables),
      );

      // The entities carry no rows: the meta table has no version yet. A store that may not create
      // tables refuses them with a clear reason, and changes nothing.
      const strict = new SQLCheckpointStore(ds, {
        ...tables,
        createTables: false,
      });
      await expect(strict.head('r')).rejects.toThrow(
        /carry no schema version.*createTables: true/,
      );

      const store = new SQLCheckpointStore(ds, tables);
      await store.save({
        runId: 'r',
        step: 0,
        flow: 'f',
        status: 'running',
        segment: 1,
        sealed: 's0',
      });
      await store.recordCall('r', 1, [
        { runId: 'r', segment: 1, superstep: 0, seq: 1, sealed: 'c1' },
      ]);
      expect((await store.latest('r'))?.sealed).toBe('s0');
      expect((await store.calls('r', 0)).map((c) => c.sealed)).toEqual(['c1']);
      expect((await store.head('r'))?.calls).toBe(1);
      await store.close();

      // Stamped: now identical to the migrated tenant, storage options and meta row included.
      const meta = (d: DataSource, t: SqlTableOptions) =>
        d.query(
          `SELECT key, value FROM ${t.schema ? `"${t.schema}".` : ''}"${PREFIX}meta" ORDER BY key`,
        );
      expect(await meta(ds, tables)).toEqual(
        await meta(referenceDs, reference.tables),
      );
      expect(await dialect.storage(ds, tables)).toEqual(
        await dialect.storage(referenceDs, reference.tables),
      );
      expect(await dialect.catalog(ds, tables)).toEqual(
        await dialect.catalog(referenceDs, reference.tables),
      );
      // And the entities still see nothing to change after the store's DDL.
      expect(await pendingChanges(ds)).toEqual([]);
    } finally {
      await ds.destroy();
      await referenceDs.destroy();
    }
  });
}

describeWithService(
  'postgres',
  'agent-adapter/typeorm entities on Postgres',
  () => {
    const schemas: string[] = [];
    entitySuite({
      type: 'postgres',
      tenant: () => {
        const schema = suiteId('aa_ent');
        schemas.push(schema);
        return {
          options: { type: 'postgres', url: DATABASE_URL, schema, poolSize: 2 },
          tables: { schema, tablePrefix: PREFIX },
        };
      },
      catalog: async (ds, { schema }) => {
        const columns: unknown[] = await ds.query(
          `SELECT table_name, column_name, ordinal_position, data_type, character_maximum_length,
                  is_nullable, column_default, is_identity, identity_generation
           FROM information_schema.columns
           WHERE table_schema = $1 AND table_name LIKE 'ent\\_%'
           ORDER BY table_name, ordinal_position`,
          [schema],
        );
        // Index definitions name the schema: drop it so two tenants compare.
        const indexes: unknown[] = await ds.query(
          `SELECT tablename, indexname, replace(indexdef, $1 || '.', '') AS def
           FROM pg_indexes WHERE schemaname = $1 AND tablename LIKE 'ent\\_%'
           ORDER BY indexname`,
          [schema],
        );
        const constraints: unknown[] = await ds.query(
          `SELECT conrelid::regclass::text AS tbl, conname, contype, pg_get_constraintdef(c.oid) AS def
           FROM pg_constraint c JOIN pg_namespace n ON n.oid = c.connamespace
           WHERE n.nspname = $1 AND conname LIKE 'ent\\_%' ORDER BY conname`,
          [schema],
        );
        return {
          columns,
          indexes,
          constraints: constraints.map((c) => ({
            ...(c as { tbl: string }),
            tbl: (c as { tbl: string }).tbl.replace(`${schema!}.`, ''),
          })),
        };
      },
      storage: (ds, { schema }) =>
        ds.query(
          `SELECT c.relname, c.reloptions FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
           WHERE n.nspname = $1 AND c.relkind = 'r' AND c.relname LIKE 'ent\\_%' ORDER BY c.relname`,
          [schema],
        ),
      cleanup: async () => {
        const ds = new DataSource({ type: 'postgres', url: DATABASE_URL });
        await ds.initialize();
        for (const s of schemas)
          await ds.query(`DROP SCHEMA IF EXISTS "${s}" CASCADE`);
        await ds.destroy();
      },
    });
  },
);

describe('agent-adapter/typeorm entities on SQLite', () => {
  const dir = mkdtempSync(join(tmpdir(), 'aa-entities-'));
  let n = 0;
  entitySuite({
    type: 'better-sqlite3',
    tenant: () => ({
      options: { type: 'better-sqlite3', database: join(dir, `t${++n}.db`) },
      tables: { tablePrefix: PREFIX },
    }),
    catalog: async (ds) => {
      const pragma = (sql: string): Promise<Array<Record<string, unknown>>> =>
        ds.query(sql);
      const normal = (sql: string) =>
        sql.replace(/"/g, '').replace(/\s+/g, ' ').trim();
      const tables = await pragma(
        `SELECT name, sql FROM sqlite_master WHERE type = 'table' AND name LIKE 'ent\\_%' ESCAPE '\\' ORDER BY name`,
      );
      const out = [];
      for (const { name, sql } of tables as Array<{
        name: string;
        sql: string;
      }>) {
        const columns = (await pragma(`PRAGMA table_xinfo("${name}")`)).map(
          (c) => ({
            name: c.name,
            type: String(c.type).toLowerCase(),
            notnull: c.notnull,
            // TypeORM writes DEFAULT (0), the DDL DEFAULT 0: the same default.
            default:
              c.dflt_value === null
                ? null
                : String(c.dflt_value as string).replace(/^\((.*)\)$/, '$1'),
            pk: c.pk,
          }),
        );
        const indexes = [];
        for (const index of await pragma(`PRAGMA index_list("${name}")`)) {
          const indexName = String(index.name);
          const [definition] = await pragma(
            `SELECT sql FROM sqlite_master WHERE type = 'index' AND name = '${indexName}'`,
          );
          const where = /\bWHERE\b(.*)$/is.exec(
            String((definition?.sql as string | undefined) ?? ''),
          )?.[1];
          indexes.push({
            // An autoindex is named by the table's declaration order, not by either tool.
            name: indexName.startsWith('sqlite_autoindex') ? 'auto' : indexName,
            unique: index.unique,
            origin: index.origin,
            partial: index.partial,
            columns: (await pragma(`PRAGMA index_info("${indexName}")`)).map(
              (c) => c.name,
            ),
            where: where === undefined ? null : normal(where),
          });
        }
        indexes.sort((a, b) => a.name.localeCompare(b.name));
        out.push({
          name,
          withoutRowid: /WITHOUT ROWID/i.test(sql),
          autoincrement: /AUTOINCREMENT/i.test(sql),
          columns,
          indexes,
        });
      }
      return out;
    },
    storage: async () => null, // SQLite tables have no storage options
    cleanup: async () => {
      rmSync(dir, { recursive: true, force: true });
    },
  });
});
