import type { CanActivate, Type } from '@nestjs/common';
import type { CheckpointStore } from '../../exec/checkpoints/checkpoint-store';
import type { RedisClientLike } from '../../exec/checkpoints/redis.store';
import type { DataSourceLike } from '../../exec/checkpoints/sql.store';
import type { CheckpointKey } from '../../exec/durable/key-ring';

/** A store in this process only: runs do not survive a restart. For tests and demos. @publicApi */
export interface MemoryStoreDescriptor {
  type: 'memory';
}

/** One SQLite file (WAL), shared by every process on one host. Needs `typeorm` + `better-sqlite3`. @publicApi */
export interface SqliteStoreDescriptor {
  type: 'sqlite';
  /** The database file; its folder must exist. */
  path: string;
  /** Prefix of every table name (a tenant). @default 'aa_' */
  tablePrefix?: string;
}

/**
 * Postgres through TypeORM. Give your application's `DataSource` (with `@nestjs/typeorm`:
 * `forRootAsync({ inject: [DataSource], useFactory: (dataSource) => ({ store: { type: 'postgres',
 * dataSource }, key }) })`) or a `url` for a connection the module opens and closes. Needs
 * `typeorm` + `pg`.
 * @publicApi
 */
export interface PostgresStoreDescriptor {
  type: 'postgres';
  /** A TypeORM DataSource the application owns (it is not closed by the module). */
  dataSource?: DataSourceLike;
  /** A connection URL, for a DataSource the module creates and closes. */
  url?: string;
  /** Schema holding the tables (a tenant); created if missing. @default the connection's */
  schema?: string;
  /** Prefix of every table name (a tenant). @default 'aa_' */
  tablePrefix?: string;
}

/** Redis (one server or a Cluster). Needs `ioredis` unless `client` is given. @publicApi */
export interface RedisStoreDescriptor {
  type: 'redis';
  /** Connection URL for a client the module creates. @default ioredis' default (127.0.0.1:6379) */
  url?: string;
  /** Creates the client instead (`() => new Redis(url)` or `() => new Cluster(nodes)`). */
  client?: () => RedisClientLike;
  /** Key namespace (a tenant). @default 'aa' */
  prefix?: string;
  /** Keys of a run expire this long after its last write (never while paused). @default no expiry */
  ttlSeconds?: number;
}

/** A store the module creates (and closes on shutdown). @publicApi */
export type CheckpointStoreDescriptor =
  | MemoryStoreDescriptor
  | SqliteStoreDescriptor
  | PostgresStoreDescriptor
  | RedisStoreDescriptor;

/** The store types a descriptor may name. @publicApi */
export type CheckpointStoreType = CheckpointStoreDescriptor['type'];

/**
 * Options of `DurableModule.forRoot()` / what a `forRootAsync()` factory returns.
 * @publicApi
 */
export interface DurableModuleOptions {
  /**
   * Where checkpoints and call logs go: a store instance (the application owns it and closes it)
   * or a descriptor (the module creates the store and closes it on shutdown).
   */
  store: CheckpointStore | CheckpointStoreDescriptor;
  /**
   * Signs every checkpoint and call record: a secret of at least 32 bytes, or a key ring for
   * rotation; the same on every worker. Required for every store but the memory one.
   */
  key?: CheckpointKey;
  /**
   * Encrypts run data at rest (state, arguments, results; AES-256-GCM) before it is sealed: a
   * secret of 32+ bytes or a key ring, the same on every worker. @default no encryption
   */
  encryptionKey?: CheckpointKey;
  /** This worker's id in run leases; a stable id lets a restarted worker take its runs back at once. @default `${hostname}:${pid}:${random}` */
  workerId?: string;
  /** How long a run stays owned after this worker's last sign of life. @default 15000 */
  leaseMs?: number;
  /** Runs recovered at the same time on bootstrap. @default 4 */
  recoveryConcurrency?: number;
  /**
   * Parks a run (flow or tool loop) as `failed` once it has been recovered this many times without
   * completing a superstep, instead of recovering it on every boot: a run that crashes its worker
   * each time becomes a dead letter to inspect. @default none: recovered every time
   */
  maxRecoveryAttempts?: number;
}

/**
 * The run viewer: a web page (and its JSON API) listing runs, showing each one's checkpoints and
 * tool calls, and approving, denying or rerunning in-doubt calls. Off unless given.
 * @publicApi
 */
export interface DurableViewerOptions {
  /** Where it is mounted (under the application's global prefix). @default '/runs' */
  path?: string;
  /**
   * Who may see and act: a guard class or instance (`CanActivate`). Required when
   * `NODE_ENV=production`, unless `privateNetwork` says the app is not reachable from outside.
   */
  guard?: Type<CanActivate> | CanActivate;
  /** Acknowledges that, without a guard, anyone who reaches the app may approve and rerun calls. */
  privateNetwork?: boolean;
}

/**
 * Options that shape the module itself (stripped from the injected options).
 * @publicApi
 */
export interface DurableModuleExtras {
  /** Register the module globally, so `FlowRunner` can be injected anywhere. @default true */
  isGlobal: boolean;
  /**
   * Recover every unfinished run of every discovered flow in `onApplicationBootstrap`. Turn off
   * to recover yourself (`RecoveryOrchestrator.sweep()`, `FlowRunner.recoverAll()`). @default true
   */
  recoverOnBoot: boolean;
  /** The run viewer (off unless given). */
  viewer?: DurableViewerOptions;
}

/**
 * A class whose `createDurableOptions()` gives the options (`forRootAsync({ useClass })`).
 * @publicApi
 */
export interface DurableOptionsFactory {
  createDurableOptions(): DurableModuleOptions | Promise<DurableModuleOptions>;
}
