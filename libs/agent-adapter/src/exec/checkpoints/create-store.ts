import { DurableError } from '../../errors/durable.error';
import {
  requirePackage,
  type OptionalFeature,
} from '../../peers/optional-packages';
import type { CheckpointStore } from './checkpoint-store';
import { MemoryCheckpointStore } from './memory.store';
import {
  RedisCheckpointStore,
  type RedisClientLike,
  type RedisReplicaAcks,
} from './redis/redis.store';
import { SQLCheckpointStore, type DataSourceLike } from './sql/sql.store';
import { SQLiteCheckpointStore } from './sql/sqlite.store';
import { Messages } from '../../errors/messages';

/*
 * Store descriptors → store instances, framework-free (DESIGN.md puts this file beside the stores).
 * The Nest module (nest/create-store.ts) and the operator CLI (cli/store-url.ts) both use it. Each
 * store's driver is loaded only when a descriptor of that type is opened (TypeORM's DriverFactory),
 * and checked installed when its store is created (the store constructors do it).
 */

/** A store in this process only. @publicApi */
export interface MemoryStoreDescriptor {
  type: 'memory';
}

/** One SQLite file (WAL). Needs `typeorm` + `better-sqlite3`. @publicApi */
export interface SqliteStoreDescriptor {
  type: 'sqlite';
  /** The database file; its folder must exist. */
  path: string;
  /** Prefix of every table name (a tenant). @default 'aa_' */
  tablePrefix?: string;
  /** Create missing tables on first use. @default true */
  createTables?: boolean;
}

/** Postgres through TypeORM: an application's DataSource or a URL. Needs `typeorm` + `pg`. @publicApi */
export interface PostgresStoreDescriptor {
  type: 'postgres';
  /** A TypeORM DataSource the application owns (the store does not close it). */
  dataSource?: DataSourceLike;
  /** A connection URL, for a DataSource the store creates and closes. */
  url?: string;
  /**
   * Connections in the pool of the DataSource made from `url` (pg's `max`). Each run in flight
   * holds one only while a write is on its way; lease renewal needs one. With `dataSource`, size
   * that DataSource's own pool instead. @default 10 (pg's default)
   */
  poolSize?: number;
  /**
   * Name the hot-path statements so the server plans them once per connection. Turn off behind a
   * pooler that cannot keep prepared statements (PgBouncer in transaction mode before 1.21).
   * @default true
   */
  preparedStatements?: boolean;
  /** Schema holding the tables (a tenant). @default the connection's */
  schema?: string;
  /** Prefix of every table name (a tenant). @default 'aa_' */
  tablePrefix?: string;
  /** Create missing tables on first use. @default true */
  createTables?: boolean;
}

/** Redis (one server or a Cluster). Needs `ioredis` unless `client` is given. @publicApi */
export interface RedisStoreDescriptor {
  type: 'redis';
  /** Connection URL for a client the store creates. @default ioredis' default (127.0.0.1:6379) */
  url?: string;
  /** Creates the client instead (`() => new Redis(url)` or `() => new Cluster(nodes)`). */
  client?: () => RedisClientLike;
  /** ioredis options for a client made from `url` (timeouts, retries). */
  clientOptions?: Record<string, unknown>;
  /** Key namespace (a tenant). @default 'aa' */
  prefix?: string;
  /** Keys of a run expire this long after its last write (never while paused). @default no expiry */
  ttlSeconds?: number;
  /** Confirm every run write on replicas with WAIT (see `RedisCheckpointStoreOptions.replicas`). */
  replicas?: RedisReplicaAcks;
}

/** @publicApi */
export type StoreDescriptor =
  | MemoryStoreDescriptor
  | SqliteStoreDescriptor
  | PostgresStoreDescriptor
  | RedisStoreDescriptor;

/** Every `type` a store descriptor may have. */
export const STORE_TYPES: readonly StoreDescriptor['type'][] = [
  'memory',
  'sqlite',
  'postgres',
  'redis',
];

/**
 * A descriptor that names no known store type (`problem` undefined) or misses what its type needs.
 * Callers word it for their setting (the Nest module, the CLI).
 */
export class StoreDescriptorError extends DurableError {
  constructor(
    readonly type: unknown,
    readonly problem?: string,
  ) {
    super(
      problem === undefined
        ? Messages.storeTypeUnknown(type, STORE_TYPES)
        : Messages.storeDescriptor(String(type), problem),
    );
  }
}

/** A store and whether its creator must close it. */
export interface OpenedStore {
  store: CheckpointStore;
  /** True when the store's connections are the creator's to close. */
  owned: boolean;
}

/**
 * The optional features (packages) the store a descriptor names needs: none for memory, a given
 * DataSource or a given Redis client factory (the application has their packages).
 */
export function storeFeatures(descriptor: StoreDescriptor): OptionalFeature[] {
  switch (descriptor.type) {
    case 'sqlite':
      return ['sqlite'];
    case 'postgres':
      return descriptor.dataSource === undefined ? ['postgres'] : [];
    case 'redis':
      return descriptor.client === undefined ? ['redis'] : [];
    default:
      return [];
  }
}

/**
 * Creates the store a descriptor names, loading only that store's driver. Every package the store
 * needs is checked now (one error names them all, with the install command). Connects lazily, on
 * first use.
 */
export function openCheckpointStore(descriptor: StoreDescriptor): OpenedStore {
  switch (descriptor.type) {
    case 'memory':
      return { store: new MemoryCheckpointStore(), owned: true };
    case 'sqlite': {
      if (typeof descriptor.path !== 'string' || descriptor.path === '') {
        throw new StoreDescriptorError(
          descriptor.type,
          Messages.sqliteDescriptorPath(),
        );
      }
      return {
        store: new SQLiteCheckpointStore(descriptor.path, {
          ...(descriptor.tablePrefix !== undefined && {
            tablePrefix: descriptor.tablePrefix,
          }),
          ...(descriptor.createTables !== undefined && {
            createTables: descriptor.createTables,
          }),
        }),
        owned: true,
      };
    }
    case 'postgres': {
      const { dataSource, url } = descriptor;
      if ((dataSource === undefined) === (url === undefined)) {
        throw new StoreDescriptorError(
          descriptor.type,
          Messages.postgresDescriptorSource(),
        );
      }
      const { poolSize, preparedStatements } = descriptor;
      if (poolSize !== undefined) {
        if (dataSource !== undefined) {
          throw new StoreDescriptorError(
            descriptor.type,
            Messages.postgresPoolSizeWithDataSource(),
          );
        }
        if (!Number.isSafeInteger(poolSize) || poolSize < 1) {
          throw new StoreDescriptorError(
            descriptor.type,
            Messages.postgresPoolSize(poolSize),
          );
        }
      }
      if (
        preparedStatements !== undefined &&
        typeof preparedStatements !== 'boolean'
      ) {
        throw new StoreDescriptorError(
          descriptor.type,
          Messages.postgresPreparedStatements(preparedStatements),
        );
      }
      const options = {
        ...(preparedStatements !== undefined && { preparedStatements }),
        ...(descriptor.schema !== undefined && { schema: descriptor.schema }),
        ...(descriptor.tablePrefix !== undefined && {
          tablePrefix: descriptor.tablePrefix,
        }),
        ...(descriptor.createTables !== undefined && {
          createTables: descriptor.createTables,
        }),
      };
      if (dataSource !== undefined) {
        // The application's DataSource: it opens and closes it, the store only uses it.
        return {
          store: new SQLCheckpointStore(dataSource, options),
          owned: false,
        };
      }
      return {
        store: new SQLCheckpointStore(
          {
            type: 'postgres',
            url,
            ...(poolSize !== undefined && { poolSize }),
          },
          options,
        ),
        owned: true,
      };
    }
    case 'redis': {
      const { client, url } = descriptor;
      if (client !== undefined && url !== undefined) {
        throw new StoreDescriptorError(
          descriptor.type,
          Messages.redisUrlAndClient(),
        );
      }
      if (client !== undefined && typeof client !== 'function') {
        throw new StoreDescriptorError(
          descriptor.type,
          Messages.redisClientFactory(),
        );
      }
      const connect = client ?? (() => newRedis(url, descriptor.clientOptions));
      return {
        store: new RedisCheckpointStore(connect, {
          ...(descriptor.prefix !== undefined && { prefix: descriptor.prefix }),
          ...(descriptor.ttlSeconds !== undefined && {
            ttlSeconds: descriptor.ttlSeconds,
          }),
          ...(descriptor.replicas !== undefined && {
            replicas: descriptor.replicas,
          }),
        }),
        owned: true,
      };
    }
    default:
      throw new StoreDescriptorError((descriptor as { type?: unknown }).type);
  }
}

function newRedis(
  url: string | undefined,
  options: Record<string, unknown> = {},
): RedisClientLike {
  // Loaded only for a Redis store made from a URL (RedisCheckpointStore calls this at once).
  const { Redis } = requirePackage<{
    Redis: new (
      url: string | Record<string, unknown>,
      options?: Record<string, unknown>,
    ) => RedisClientLike;
  }>('ioredis', 'redis', 'RedisCheckpointStore');
  return url === undefined ? new Redis(options) : new Redis(url, options);
}
