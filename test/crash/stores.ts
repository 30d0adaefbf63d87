/**
 * The persistent backends the crash tests run against, each opened the same way in a worker process
 * and in the test: `openStore(kind, env)` reads the store's location from the environment.
 *
 * Adding a backend (or fixing how one is constructed) is a change to its entry in BACKENDS only.
 */
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import {
  RedisCheckpointStore,
  SQLCheckpointStore,
  SQLiteCheckpointStore,
  type CheckpointStore,
} from 'agent-adapter';
import { dropPrefix } from '../utils/redis-keys';
import { DATABASE_URL, REDIS_URL } from '../utils/services';

export const STORE_KINDS = ['redis', 'sqlite', 'postgres'] as const;
export type StoreKind = (typeof STORE_KINDS)[number];
/**
 * Every backend a worker can open: the kinds the crash suites iterate, and a Redis Cluster (the
 * chaos test's; its nodes in REDIS_CLUSTER_NODES, `host:port,host:port...`).
 */
export type BackendKind = StoreKind | 'redis-cluster';

export interface OpenedStore {
  store: CheckpointStore;
  /** Releases the connection(s); the data stays. */
  close(): Promise<void>;
}

/** Where one test's runs live, as environment variables for the worker processes. */
export type StoreEnv = Record<string, string>;

interface Backend {
  /** Needs a server (reachability is checked with describeWithService). */
  service?: 'redis' | 'postgres';
  /** A fresh location for one test: `id` is unique, `dir` a private temp directory. */
  location(id: string, dir: string): StoreEnv;
  open(env: NodeJS.ProcessEnv): Promise<OpenedStore>;
  /** Removes everything the location holds. */
  drop(env: StoreEnv): Promise<void>;
}

const BACKENDS: Record<BackendKind, Backend> = {
  'redis-cluster': {
    location: (id) => ({
      REDIS_CLUSTER_NODES: need(process.env, 'REDIS_CLUSTER_NODES'),
      REDIS_PREFIX: id,
    }),
    async open(env) {
      const { Cluster } = await import('ioredis');
      const nodes = need(env, 'REDIS_CLUSTER_NODES')
        .split(',')
        .map((n) => {
          const [host, port] = n.split(':');
          return { host: host!, port: Number(port) };
        });
      const store = new RedisCheckpointStore(() => new Cluster(nodes), {
        prefix: need(env, 'REDIS_PREFIX'),
      });
      return { store, close: () => store.close() };
    },
    // The cluster is the test's own, stopped (data and all) when the test ends.
    drop: async () => undefined,
  },
  redis: {
    service: 'redis',
    location: (id) => ({ REDIS_URL, REDIS_PREFIX: id }),
    async open(env) {
      const { default: Redis } = await import('ioredis');
      const url = need(env, 'REDIS_URL');
      const store = new RedisCheckpointStore(() => new Redis(url), {
        prefix: need(env, 'REDIS_PREFIX'),
      });
      return { store, close: () => store.close() };
    },
    async drop(env) {
      const { default: Redis } = await import('ioredis');
      const admin = new Redis(need(env, 'REDIS_URL'));
      try {
        await dropPrefix(admin, need(env, 'REDIS_PREFIX'));
      } finally {
        await admin.quit();
      }
    },
  },
  sqlite: {
    location: (_id, dir) => ({ SQLITE_PATH: join(dir, 'runs.db') }),
    async open(env) {
      const store = new SQLiteCheckpointStore(need(env, 'SQLITE_PATH'));
      return { store, close: () => store.close() };
    },
    async drop(env) {
      const path = need(env, 'SQLITE_PATH');
      await Promise.all(
        ['', '-wal', '-shm', '-journal'].map((s) =>
          rm(path + s, { force: true }),
        ),
      );
    },
  },
  postgres: {
    service: 'postgres',
    location: (id) => ({ DATABASE_URL, PG_SCHEMA: id }),
    async open(env) {
      // Connection options: the store creates, owns and (on close) destroys the DataSource.
      const store = new SQLCheckpointStore(
        { type: 'postgres', url: need(env, 'DATABASE_URL') },
        { schema: need(env, 'PG_SCHEMA') },
      );
      return { store, close: () => store.close() };
    },
    async drop(env) {
      const { Client } = await import('pg');
      const client = new Client({
        connectionString: need(env, 'DATABASE_URL'),
      });
      await client.connect();
      try {
        const schema = need(env, 'PG_SCHEMA');
        if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(schema))
          throw new Error(`bad schema name ${schema}`);
        await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      } finally {
        await client.end();
      }
    },
  },
};

export function serviceOf(kind: BackendKind): 'redis' | 'postgres' | undefined {
  return BACKENDS[kind].service;
}

export function isStoreKind(value: string): value is StoreKind {
  return (STORE_KINDS as readonly string[]).includes(value);
}

export function isBackendKind(value: string): value is BackendKind {
  return value in BACKENDS;
}

/** Opens the store of `kind` at the location `env` names (REDIS_URL+REDIS_PREFIX, SQLITE_PATH, DATABASE_URL+PG_SCHEMA). */
export async function openStore(
  kind: BackendKind,
  env: NodeJS.ProcessEnv = process.env,
): Promise<OpenedStore> {
  return BACKENDS[kind].open(env);
}

export function storeLocation(
  kind: BackendKind,
  id: string,
  dir: string,
): StoreEnv {
  return BACKENDS[kind].location(id, dir);
}

export function dropStore(kind: BackendKind, env: StoreEnv): Promise<void> {
  return BACKENDS[kind].drop(env);
}

function need(env: NodeJS.ProcessEnv, name: string): string {
  const value = env[name];
  if (!value) throw new Error(`${name} must be set`);
  return value;
}
