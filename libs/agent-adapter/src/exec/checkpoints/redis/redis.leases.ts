/**
 * Owner leases in Redis: each owner keeps a sorted set of the runs it drives (`RedisKeys.owned`,
 * run id → lease expiry ms), so one write renews them all. A run's effective lease is the later
 * of the one saved with its checkpoint and its score in its owner's set.
 */
import type { RunHead } from '../checkpoint-store';
import { guarded } from '../transient-errors';
import { STORE, storeScript, type RedisClient } from './redis.client';
import type { RedisKeys } from './redis.layout';

/** Owner lease keys and owned-run sets outlive the lease they carry by this much. */
const OWNER_KEEP_MS = 24 * 3600_000;

/**
 * One owner's renewal: its sorted set of driven runs gets each of `runIds` with the new expiry as
 * its score (ZADD, additive: several runners of one worker id, e.g. a flow runner and tool loops
 * in one process, each renew their own runs without dropping the others'), entries that expired
 * long ago are pruned, and the set outlives the lease (one MULTI). A run's lease is the later of
 * the one saved with its checkpoint and its score in its owner's set, while it is running (the set
 * may score a run that no longer is: a renewal landing after the save that put it to sleep). With
 * a TTL, the driven running runs' keys are refreshed too, so a long superstep cannot expire a live
 * run; a release (lease 0) also lowers the lease saved with each running run's checkpoint.
 */
export async function renewLeases(
  client: RedisClient,
  keys: RedisKeys,
  ttl: number,
  owner: string,
  leaseExpiresAt: number,
  runIds: readonly string[],
): Promise<void> {
  const keep =
    Math.max(Math.ceil(leaseExpiresAt - Date.now()), 0) + OWNER_KEEP_MS;
  const owned = keys.owned(owner);
  const tx = client.multi().zremrangebyscore(owned, '-inf', Date.now() - keep);
  if (runIds.length)
    tx.zadd(owned, ...runIds.flatMap((id) => [leaseExpiresAt, id]));
  tx.pexpire(owned, keep);
  const run = (name: 'aaTouch' | 'aaRelease', args: Array<string | number>) =>
    runIds.map((id) => storeScript(client, name, keys.run(id), args));
  await Promise.all([
    guarded(STORE, undefined, () => tx.exec()),
    ...(ttl > 0 ? run('aaTouch', [ttl]) : []),
    ...(leaseExpiresAt === 0 ? run('aaRelease', [owner, 0]) : []),
  ]);
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
