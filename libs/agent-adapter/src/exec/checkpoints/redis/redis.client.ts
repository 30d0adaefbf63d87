/** The ioredis client the Redis store drives: its type, the store's scripts on it, closing it. */
// Type-only: the user's factory creates the client, so `require('agent-adapter')` never loads ioredis.
import { Messages } from '../../../errors/messages';
import type { Cluster, Redis } from 'ioredis';
import type { RedisClientLike } from './redis.client-like';
import { interrupted } from '../transient-errors';
import { promised } from '../../promised';
import { REDIS_SCRIPTS } from './redis.scripts';

export type RedisClient = Redis | Cluster;

/** The client the factory makes, with every script of the store defined on it. */
export function connectWithScripts(
  connect: () => RedisClientLike,
): RedisClient {
  const client = connect() as RedisClient;
  for (const [name, lua] of Object.entries(REDIS_SCRIPTS)) {
    client.defineCommand(name, { lua });
  }
  return client;
}

/** A client of one server (which may hold keys of every slot in one script), not a Cluster's. */
export function oneServer(client: RedisClient): client is Redis {
  return !('nodes' in client);
}

/** The nodes holding the tenant's run hashes: every master of a Cluster, or the one server. */
export function masters(client: RedisClient): Redis[] {
  return oneServer(client) ? [client] : client.nodes('master');
}

/** Runs one of the store's scripts (EVALSHA, falling back to EVAL on NOSCRIPT). */
export function runScript(
  client: RedisClient,
  name: keyof typeof REDIS_SCRIPTS,
  keys: readonly string[],
  args: Array<string | number>,
): Promise<unknown> {
  type Command = (...a: Array<string | number>) => Promise<unknown>;
  // Defined without numberOfKeys, so the key count goes first (some scripts take a key list).
  const command = (client as unknown as Record<string, Command>)[name]!;
  return command.call(client, keys.length, ...keys, ...args);
}

/** The store's name in its errors. */
export const STORE = 'RedisCheckpointStore';

/**
 * One of the store's scripts, its failures as the store's (as `guarded` maps them), in one promise
 * more than the driver's: every run write goes through here.
 */
export function storeScript(
  client: RedisClient,
  name: keyof typeof REDIS_SCRIPTS,
  keys: readonly string[],
  args: Array<string | number>,
): Promise<unknown> {
  return promised(() => runScript(client, name, keys, args)).catch(
    (error: unknown) => {
      throw interrupted(STORE, undefined, error);
    },
  );
}

/**
 * QUIT when the server answers (pending replies arrive first); when it does not (down,
 * reconnecting), or QUIT takes longer than 2 s, the connection is dropped: a shutdown never hangs
 * on an unreachable Redis. Nothing is lost either way: every write was one script, applied or not.
 */
export async function quitOrDrop(client: RedisClient): Promise<void> {
  if (client.status !== 'ready') {
    client.disconnect();
    return;
  }
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      client.quit(),
      new Promise((_, reject) => {
        timer = setTimeout(
          () => reject(new Error(Messages.redisQuitTimedOut())),
          2_000,
        );
      }),
    ]);
  } catch {
    client.disconnect();
  } finally {
    clearTimeout(timer);
  }
}
