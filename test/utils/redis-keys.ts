import type Redis from 'ioredis';

/** Every key matching `pattern` (SCAN, never KEYS: fine for tests and cleanup, not for hot paths). */
export async function scanKeys(
  client: Redis,
  pattern: string,
): Promise<string[]> {
  const found: string[] = [];
  let cursor = '0';
  do {
    const [next, keys] = await client.scan(
      cursor,
      'MATCH',
      pattern,
      'COUNT',
      1000,
    );
    found.push(...keys);
    cursor = next;
  } while (cursor !== '0');
  return found;
}

/** Deletes every key a test prefix made (the prefix appears in run keys, tags and indexes). */
export async function dropPrefix(client: Redis, prefix: string): Promise<void> {
  const keys = await scanKeys(client, `*${prefix}*`);
  for (let i = 0; i < keys.length; i += 500)
    await client.del(...keys.slice(i, i + 500));
}
