import type { CheckpointStore } from '../exec/checkpoints/checkpoint-store';
import {
  openCheckpointStore,
  type RedisStoreDescriptor,
} from '../exec/checkpoints/create-store';
import type { RedisClientLike } from '../exec/checkpoints/redis/redis.store';
import { requirePackage } from '../peers/optional-packages';
import { CliError } from './cli.error';
import { CliMessages } from './cli.messages';

/** The exit code of an unusable store (EXIT.failure in program.ts). */
const UNAVAILABLE = 3;

interface CliRedis extends RedisClientLike {
  on(event: 'error', listener: (error: Error) => void): unknown;
  exists(...keys: string[]): Promise<number>;
}

/**
 * The operator's Redis store: the client fails fast and its `error` events become one line, and
 * the first command checks that the prefix holds agent-adapter data (`{P}:seq`, counted up by every
 * run's creation and never expired, or `{P}:runs`), as the SQL stores check their tables: a
 * mistyped prefix is an error, not an empty tenant.
 */
export function redisStoreFor(
  descriptor: RedisStoreDescriptor,
): CheckpointStore {
  const { url, clientOptions, ...rest } = descriptor;
  const shown = redacted(url ?? 'redis://127.0.0.1:6379');
  const prefix = descriptor.prefix ?? 'aa';
  let client: CliRedis | undefined;
  let connectError: Error | undefined;
  const store = openCheckpointStore({
    ...rest,
    client: () => {
      const { Redis } = requirePackage<{
        Redis: new (url: string, options?: Record<string, unknown>) => CliRedis;
      }>('ioredis', 'redis', 'RedisCheckpointStore');
      client = new Redis(url ?? 'redis://127.0.0.1:6379', clientOptions);
      client.on('error', (error) => (connectError ??= error));
      return client;
    },
  }).store;
  const check = async () => {
    let found: number;
    try {
      found = await client!.exists(`{${prefix}}:seq`, `{${prefix}}:runs`);
    } catch (error) {
      const why = (connectError ?? (error as Error)).message;
      throw new CliError(CliMessages.redisUnreachable(shown, why), UNAVAILABLE);
    }
    if (found === 0)
      throw new CliError(CliMessages.redisEmpty(prefix, shown), UNAVAILABLE);
  };
  return checkedFirst(store, check);
}

/** `store` whose methods (but `close`) wait for `check` (run once) before their first call. */
function checkedFirst(
  store: CheckpointStore,
  check: () => Promise<void>,
): CheckpointStore {
  let checked: Promise<void> | undefined;
  return new Proxy(store, {
    get(target, name) {
      const value: unknown = Reflect.get(target, name, target);
      if (typeof value !== 'function' || name === 'close') return value;
      return async (...args: unknown[]) => {
        await (checked ??= check());
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
}

function redacted(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    u.search = '';
    return u.toString().replace(/\/$/, '');
  } catch {
    return url;
  }
}
