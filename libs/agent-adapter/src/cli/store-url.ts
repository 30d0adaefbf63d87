import { existsSync } from 'node:fs';
import type { CheckpointStore } from '../exec/checkpoints/checkpoint-store';
import {
  openCheckpointStore,
  type StoreDescriptor,
} from '../exec/checkpoints/create-store';
import { CliError } from './cli.error';
import { CliMessages } from './cli.messages';
import { redisStoreFor } from './redis-store';

export const STORE_URL_HELP = [
  'sqlite:<path>[?tablePrefix=aa_]           a SQLite file (sqlite:data/runs.db, sqlite:///abs/runs.db)',
  'postgres://user@host:5432/db[?schema=s&tablePrefix=aa_]',
  'redis://host:6379[/db][?prefix=aa&ttlSeconds=N]   (rediss:// for TLS)',
].join('\n');

/**
 * A store URL → the store descriptor the library's factory opens. The tenant options are query
 * parameters, removed before the URL reaches the driver. The operator's SQL store never creates
 * tables (a mistyped schema or file is an error, not an empty tenant).
 */
export function descriptorFromUrl(url: string): StoreDescriptor {
  const scheme = /^([a-z][a-z0-9+.-]*):/i.exec(url)?.[1]?.toLowerCase();
  switch (scheme) {
    case 'sqlite': {
      let rest = url.slice('sqlite:'.length);
      if (rest.startsWith('//')) rest = rest.slice(2);
      const [path = '', query = ''] = splitOnce(rest, '?');
      const params = new URLSearchParams(query);
      only(params, ['tablePrefix'], url);
      if (path === '') throw new CliError(CliMessages.sqlitePathMissing(url));
      if (!existsSync(path))
        throw new CliError(CliMessages.noSuchFile(url, path));
      const tablePrefix = params.get('tablePrefix');
      return {
        type: 'sqlite',
        path,
        createTables: false,
        ...(tablePrefix !== null && { tablePrefix }),
      };
    }
    case 'postgres':
    case 'postgresql': {
      const parsed = parse(url);
      only(parsed.searchParams, ['schema', 'tablePrefix'], url, true);
      const schema = take(parsed.searchParams, 'schema');
      const tablePrefix = take(parsed.searchParams, 'tablePrefix');
      return {
        type: 'postgres',
        url: parsed.toString(),
        createTables: false,
        ...(schema !== undefined && { schema }),
        ...(tablePrefix !== undefined && { tablePrefix }),
      };
    }
    case 'redis':
    case 'rediss': {
      const parsed = parse(url);
      only(parsed.searchParams, ['prefix', 'ttlSeconds'], url);
      const prefix = take(parsed.searchParams, 'prefix');
      const ttl = take(parsed.searchParams, 'ttlSeconds');
      const ttlSeconds = ttl === undefined ? undefined : Number(ttl);
      if (
        ttlSeconds !== undefined &&
        !(Number.isInteger(ttlSeconds) && ttlSeconds > 0)
      )
        throw new CliError(CliMessages.ttlSeconds(url));
      return {
        type: 'redis',
        url: parsed.toString(),
        // An operator's command fails fast on an unreachable server: no reconnection after the
        // first failure (the error is one line, see redis-store.ts).
        clientOptions: {
          maxRetriesPerRequest: 0,
          connectTimeout: 5000,
          retryStrategy: () => null,
        },
        ...(prefix !== undefined && { prefix }),
        ...(ttlSeconds !== undefined && { ttlSeconds }),
      };
    }
    default:
      throw new CliError(
        CliMessages.unknownScheme(url, scheme, STORE_URL_HELP),
      );
  }
}

/** Opens the store a URL names (connecting on first use). */
export function storeFromUrl(url: string): CheckpointStore {
  const descriptor = descriptorFromUrl(url);
  if (descriptor.type === 'redis') return redisStoreFor(descriptor);
  return openCheckpointStore(descriptor).store;
}

function parse(url: string): URL {
  try {
    return new URL(url);
  } catch {
    throw new CliError(CliMessages.invalidUrl(url));
  }
}

/** Refuses unknown query parameters (a typo must not silently pick the default tenant). */
function only(
  params: URLSearchParams,
  known: string[],
  url: string,
  passThrough = false,
): void {
  for (const name of params.keys()) {
    if (known.includes(name)) continue;
    // Postgres URLs carry driver options (sslmode, ...) that pg understands.
    if (passThrough) continue;
    throw new CliError(CliMessages.unknownParameter(url, name, known));
  }
}

function take(params: URLSearchParams, name: string): string | undefined {
  const value = params.get(name);
  params.delete(name);
  return value === null ? undefined : value;
}

function splitOnce(s: string, sep: string): [string, string] {
  const i = s.indexOf(sep);
  return i < 0 ? [s, ''] : [s.slice(0, i), s.slice(i + 1)];
}
