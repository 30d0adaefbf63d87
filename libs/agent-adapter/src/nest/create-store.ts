// Framework-free on purpose (no @nestjs import): it belongs beside the stores
// (exec/checkpoints/create-store.ts in DESIGN.md's layout) and can move there unchanged.
import { DriverNotInstalledError } from '../errors';
import { CheckpointStore } from '../exec/checkpoints/checkpoint-store';
import { MemoryCheckpointStore } from '../exec/checkpoints/memory.store';
import {
  RedisCheckpointStore,
  type RedisClientLike,
} from '../exec/checkpoints/redis.store';
import { SQLCheckpointStore } from '../exec/checkpoints/sql.store';
import { SQLiteCheckpointStore } from '../exec/checkpoints/sqlite.store';
import { DurableSetupError } from './errors/durable-setup.error';
import { NestMessages } from './durable.messages';
import type {
  CheckpointStoreDescriptor,
  CheckpointStoreType,
} from './interfaces/durable-module-options.interface';

/** Every `type` a store descriptor may have. @publicApi */
export const CHECKPOINT_STORE_TYPES: readonly CheckpointStoreType[] = [
  'memory',
  'sqlite',
  'postgres',
  'redis',
];

/** A store and whether its creator must close it. */
export interface CreatedStore {
  store: CheckpointStore;
  /** True when the store was created from a descriptor (its connections are ours to close). */
  owned: boolean;
}

/**
 * Turns the `store` option into a store. A `CheckpointStore` instance is used as it is (the caller
 * keeps owning it); a descriptor creates one, loading only that store's driver (checked now, so
 * a missing package fails at bootstrap with the install command).
 */
export function createCheckpointStore(
  option: CheckpointStore | CheckpointStoreDescriptor | undefined,
): CreatedStore {
  if (isStore(option)) return { store: option, owned: false };
  if (typeof option !== 'object' || option === null) {
    throw new DurableSetupError(NestMessages.noStore(CHECKPOINT_STORE_TYPES));
  }
  const descriptor = option;
  switch (descriptor.type) {
    case 'memory':
      return { store: new MemoryCheckpointStore(), owned: true };
    case 'sqlite': {
      if (typeof descriptor.path !== 'string' || descriptor.path === '') {
        throw new DurableSetupError(
          NestMessages.storeOption(
            'sqlite',
            'give "path", the database file (its folder must exist)',
          ),
        );
      }
      requireInstalled('SQLiteCheckpointStore', 'typeorm', 'better-sqlite3');
      return {
        store: new SQLiteCheckpointStore(descriptor.path, {
          ...(descriptor.tablePrefix !== undefined && {
            tablePrefix: descriptor.tablePrefix,
          }),
        }),
        owned: true,
      };
    }
    case 'postgres': {
      const { dataSource, url } = descriptor;
      if ((dataSource === undefined) === (url === undefined)) {
        throw new DurableSetupError(
          NestMessages.storeOption(
            'postgres',
            'give exactly one of "dataSource" (your TypeORM DataSource) or "url"',
          ),
        );
      }
      const tables = {
        ...(descriptor.schema !== undefined && { schema: descriptor.schema }),
        ...(descriptor.tablePrefix !== undefined && {
          tablePrefix: descriptor.tablePrefix,
        }),
      };
      if (dataSource !== undefined) {
        // The application's DataSource: it opens and closes it, the store only uses it. The store
        // itself is still ours (it holds nothing to release but a reference).
        return {
          store: new SQLCheckpointStore(dataSource, tables),
          owned: false,
        };
      }
      requireInstalled('SQLCheckpointStore (Postgres)', 'typeorm', 'pg');
      return {
        store: new SQLCheckpointStore({ type: 'postgres', url }, tables),
        owned: true,
      };
    }
    case 'redis': {
      const { client, url } = descriptor;
      if (client !== undefined && url !== undefined) {
        throw new DurableSetupError(
          NestMessages.storeOption('redis', 'give "url" or "client", not both'),
        );
      }
      if (client !== undefined && typeof client !== 'function') {
        throw new DurableSetupError(
          NestMessages.storeOption(
            'redis',
            '"client" must be a function returning a client, e.g. () => new Redis(url)',
          ),
        );
      }
      const connect = client ?? (() => newRedis(url));
      return {
        store: new RedisCheckpointStore(connect, {
          ...(descriptor.prefix !== undefined && { prefix: descriptor.prefix }),
          ...(descriptor.ttlSeconds !== undefined && {
            ttlSeconds: descriptor.ttlSeconds,
          }),
        }),
        owned: true,
      };
    }
    default:
      throw new DurableSetupError(
        NestMessages.unknownStoreType(
          (descriptor as { type?: unknown }).type,
          CHECKPOINT_STORE_TYPES,
        ),
      );
  }
}

/** A store instance, also from another copy of the package (duplicated in node_modules). */
function isStore(value: unknown): value is CheckpointStore {
  if (value instanceof CheckpointStore) return true;
  if (typeof value !== 'object' || value === null) return false;
  const store = value as Record<string, unknown>;
  return ['save', 'latest', 'listUnfinished', 'recordCall', 'calls'].every(
    (method) => typeof store[method] === 'function',
  );
}

function requireInstalled(store: string, ...packages: string[]): void {
  for (const name of packages) {
    try {
      require.resolve(name);
    } catch {
      throw new DriverNotInstalledError(store, name);
    }
  }
}

function newRedis(url: string | undefined): RedisClientLike {
  requireInstalled('RedisCheckpointStore', 'ioredis');
  // Loaded only for a Redis store the module creates itself.
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const { Redis } = require('ioredis') as {
    Redis: new (url?: string) => RedisClientLike;
  };
  return url === undefined ? new Redis() : new Redis(url);
}
