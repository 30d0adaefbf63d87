/**
 * Owner leases in Redis: each owner keeps a sorted set of the runs it drives (`RedisKeys.owned`,
 * run id → lease expiry ms), so one write renews them all. A run's effective lease is the later
 * of the one saved with its checkpoint and its score in its owner's set.
 */
import type { RunHead } from '../checkpoint-store';
import type { RedisClient } from './redis.client';
import type { RedisKeys } from './redis.layout';

/** Owner lease keys and owned-run sets outlive the lease they carry by this much. */
const OWNER_KEEP_MS = 24 * 3600_000;

/**
 * One owner's renewal, one MULTI: each of `runIds` gets the new expiry as its score (ZADD,
 * additive: several runners of one worker id each renew their own runs without dropping the
 * others'), entries that expired long ago are pruned, and the set outlives the lease.
 */
export function renewOwnedRuns(
  client: RedisClient,
  keys: RedisKeys,
  owner: string,
  leaseExpiresAt: number,
  runIds: readonly string[],
): Promise<unknown> {
  const keep =
    Math.max(Math.ceil(leaseExpiresAt - Date.now()), 0) + OWNER_KEEP_MS;
  const owned = keys.owned(owner);
  const tx = client.multi().zremrangebyscore(owned, '-inf', Date.now() - keep);
  if (runIds.length)
    tx.zadd(owned, ...runIds.flatMap((id) => [leaseExpiresAt, id]));
  tx.pexpire(owned, keep);
  return tx.exec();
}

/**
 * Sets each running, owned head's lease to the later of the one saved with it and its score in
 * its owner's set of driven runs (renewed once per interval for all of that owner's runs). Not a
 * sleeping or paused head's: its `leaseExpiresAt` is its wake time or deadline, and its owner's set
 * may still score it from a renewal of before the save that put it to sleep.
 */
export async function withOwnerLeases(
  client: RedisClient,
  keys: RedisKeys,
  heads: RunHead[],
): Promise<RunHead[]> {
  const held = heads.filter(
    (h) => h.owner !== undefined && h.status === 'running',
  );
  const renewed = await Promise.all(
    held.map((h) => client.zscore(keys.owned(h.owner!), h.runId)),
  );
  held.forEach((head, i) => {
    const score = renewed[i];
    // The owner's set only speaks for the runs it said it drives.
    if (score != null)
      head.leaseExpiresAt = Math.max(head.leaseExpiresAt ?? -Infinity, +score);
  });
  return heads;
}
