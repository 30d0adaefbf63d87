/**
 * What the bench suites share to open and remove their stores and their floors: a Postgres
 * DataSource on the bench database and its pg pool, the floor tables (one raw single-row write per
 * record: `floor (id, run_id, payload)`), the Redis store on a key prefix, and the removal of a
 * schema, a key prefix or a temporary directory. Each suite still chooses its own pool sizes and
 * session settings; nothing here runs on a measured path.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import Redis from 'ioredis';
import { Client, type Pool } from 'pg';
import { DataSource } from 'typeorm';
import { RedisCheckpointStore } from 'agent-adapter';
import { dropPrefix } from '../../test/utils/redis-keys';
import { DATABASE_URL, REDIS_URL, suffix } from './util';

/** A fresh name for a suite's schema, key prefix or run: `prefix` and 8 hex digits. */
export function benchId(prefix: string): string {
  return `${prefix}${suffix()}`;
}

/** An initialized TypeORM DataSource on the bench's Postgres database. */
export async function postgresDataSource(options: {
  poolSize: number;
  /** Names the connections in pg_stat_activity. */
  applicationName?: string;
  /** Passed to the pg pool (e.g. session options). */
  extra?: Record<string, unknown>;
}): Promise<DataSource> {
  const ds = new DataSource({
    type: 'postgres',
    url: DATABASE_URL,
    ...options,
  });
  await ds.initialize();
  return ds;
}

/** The DataSource's own pg pool: the floor's client path (prepared statements on it). */
export function pgPool(ds: DataSource): Pool {
  return (ds.driver as unknown as { master: Pool }).master;
}

/** The Postgres floor table, in `schema` beside the store's tables. */
export function pgFloorTable(schema: string): string {
  return `CREATE TABLE "${schema}".floor (id BIGSERIAL PRIMARY KEY, run_id VARCHAR(200), payload TEXT)`;
}

/** Drops `schema` with everything in it, through `ds` or a connection of its own. */
export async function dropSchema(
  schema: string,
  ds?: DataSource,
): Promise<void> {
  const sql = `DROP SCHEMA IF EXISTS "${schema}" CASCADE`;
  if (ds) {
    await ds.query(sql);
    return;
  }
  const pg = new Client({ connectionString: DATABASE_URL });
  await pg.connect();
  try {
    await pg.query(sql);
  } finally {
    await pg.end();
  }
}

/**
 * The SQLite floor: `file` opened with the store's settings (WAL, synchronous = FULL, one
 * transaction per write) and the floor table made in it.
 */
export function sqliteFloor(
  file: string,
  options: { timeout?: number } = {},
): Database.Database {
  const db = new Database(file, options);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = FULL');
  db.exec(
    'CREATE TABLE floor (id INTEGER PRIMARY KEY, run_id TEXT, payload TEXT)',
  );
  return db;
}

/** The Redis store on `prefix`, each of its connections a new ioredis client. */
export function redisStore(prefix: string): RedisCheckpointStore {
  return new RedisCheckpointStore(() => new Redis(REDIS_URL), { prefix });
}

/** Removes every key of `prefix`, through `client` or a connection of its own. */
export async function dropRedisPrefix(
  prefix: string,
  client?: Redis,
): Promise<void> {
  if (client) return dropPrefix(client, prefix);
  const redis = new Redis(REDIS_URL);
  try {
    await dropPrefix(redis, prefix);
  } finally {
    redis.disconnect();
  }
}

/** A new temporary directory and its removal. */
export function tempDir(prefix: string): { dir: string; remove(): void } {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  return {
    dir,
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}
