/**
 * Lua for the tenant's indexes, every key in its `{P}` slot (redis.layout.ts): a run's entry made
 * and dropped, the scans that page through them (redis.index.ts, redis.due.ts), and their healing
 * after the slot's master changed (redis.heal.ts). KEYS and ARGV as each script says.
 */
import { REPLICATION_IDS } from './redis.failover';
import { LEAVE_QUEUE_LUA } from './redis.queue-scripts';

/**
 * A step-0 save must follow its index entry within half of this; index readers clean an entry
 * whose head is missing only once the entry is older than this (see `unfinished`).
 */
export const CREATE_WINDOW_MS = 60_000;
/** How late a step-0 save may land after its index entry (the save script's ARGV[14]). */
export const HALF_CREATE_WINDOW = String(CREATE_WINDOW_MS / 2);

export const NOW = `
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
`;

/**
 * A run's index entry, made before (or, on one server, within: SAVE_LUA) its step-0 save: in its
 * flow's unfinished set, the due set (score: when it may be due, its lease expiry ms, 0 for none),
 * its announce time in born, and its place in the list of every run (an existing place is kept).
 * KEYS from `k` on: unfinished(flow), born, runs, seq, due (`RedisKeys.announce`). Returns the
 * announce time (server ms) and the place.
 */
export const ANNOUNCE = `
local function announce(k, id, due)
  redis.call('ZADD', KEYS[k], 'NX', 0, id)
  redis.call('ZADD', KEYS[k + 4], due, id)
  local t = now_ms()
  redis.call('HSET', KEYS[k + 1], id, t)
  local created = redis.call('ZSCORE', KEYS[k + 2], id)
  if not created then
    created = redis.call('INCR', KEYS[k + 3])
    redis.call('ZADD', KEYS[k + 2], created, id)
  end
  return t, tostring(created)
end
`;

/** Before a step-0 save (`ANNOUNCE`). ARGV: runId, when it may be due. Returns {now ms, created}. */
export const INDEX_CREATE_LUA = `${NOW}${ANNOUNCE}
local t, created = announce(1, ARGV[1], ARGV[2])
return {t, created}
`;

/** KEYS: unfinished(flow), born; ARGV: min (ZRANGEBYLEX), count. Returns {now, ids, born times}. */
export const SCAN_UNFINISHED_LUA = `${NOW}
local ids = redis.call('ZRANGEBYLEX', KEYS[1], ARGV[1], '+', 'LIMIT', 0, tonumber(ARGV[2]))
local born = {}
if #ids > 0 then born = redis.call('HMGET', KEYS[2], unpack(ids)) end
return {now_ms(), ids, born}
`;

/** KEYS: runs, born; ARGV: max score, count. Returns {now, [id, score, ...], born times}. */
export const SCAN_RUNS_LUA = `${NOW}
local page = redis.call('ZREVRANGEBYSCORE', KEYS[1], ARGV[1], '-inf', 'WITHSCORES', 'LIMIT', 0, tonumber(ARGV[2]))
local ids = {}
for i = 1, #page, 2 do ids[#ids + 1] = page[i] end
local born = {}
if #ids > 0 then born = redis.call('HMGET', KEYS[2], unpack(ids)) end
return {now_ms(), page, born}
`;

/**
 * Due candidates: run ids of {P}:due (KEYS[1]) due before ARGV[1] ms, from offset ARGV[2], at most
 * ARGV[3], with their born times (KEYS[2]).
 */
export const SCAN_DUE_LUA = `${NOW}
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[1], 'LIMIT', tonumber(ARGV[2]), tonumber(ARGV[3]))
local born = {}
if #ids > 0 then born = redis.call('HMGET', KEYS[2], unpack(ids)) end
return {now_ms(), ids, born}
`;

/**
 * Removes index entries. KEYS: born, queued, then the sorted sets to remove from. ARGV: 1 mode:
 * 'index' (those sets only), 'ended' (the run ended: it leaves its queue's counts too), 'forget'
 * (deleted or gone: its creation time and every trace on its queue too); 2 the queue key prefix;
 * then (runId, expected born time) pairs: an entry is removed only if its creation time is still
 * the one the caller saw ('' = none, '*' = any), so a run created again meanwhile keeps its entry.
 */
export const INDEX_DROP_LUA = `${LEAVE_QUEUE_LUA}
local mode = ARGV[1]
for i = 3, #ARGV, 2 do
  local id, expected = ARGV[i], ARGV[i + 1]
  if expected == '*' or (redis.call('HGET', KEYS[1], id) or '') == expected then
    for k = 3, #KEYS do redis.call('ZREM', KEYS[k], id) end
    if mode ~= 'index' then leave_queue(KEYS[2], ARGV[2], id, mode == 'forget') end
    if mode == 'forget' then redis.call('HDEL', KEYS[1], id) end
  end
end
return 1
`;

/** Registered on the client with `defineCommand` (EVALSHA, falling back to EVAL on NOSCRIPT). */

/** KEYS: the tenant's `indexed` stamp. Returns {current replication id, stamp or false}. */
export const INDEX_STAMP_LUA = `${REPLICATION_IDS}
return {(replication_ids()), redis.call('GET', KEYS[1]) or false}
`;

/**
 * Puts runs back in the indexes, leaving every entry that is there as it is. KEYS: born, runs, seq,
 * due, then the unfinished sets of the runs' flows. ARGV: 1 the highest place in the list seen
 * (the sequence is raised to it, so a new run never takes a lost one's place), then per run its
 * id, its place in the list ('' if unknown), its due score ('' if never due) and the KEYS index of
 * its flow's unfinished set ('' for a run that is not unfinished: it goes back in the list only).
 */
export const INDEX_RESTORE_LUA = `${NOW}
local now = now_ms()
for i = 2, #ARGV, 4 do
  local id, created, due, set = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
  if created ~= '' then redis.call('ZADD', KEYS[2], 'NX', created, id) end
  if set ~= '' then
    redis.call('HSETNX', KEYS[1], id, now)
    redis.call('ZADD', KEYS[tonumber(set)], 'NX', 0, id)
    if due ~= '' then redis.call('ZADD', KEYS[4], 'NX', due, id) end
  end
end
if tonumber(ARGV[1]) > tonumber(redis.call('GET', KEYS[3]) or '0') then
  redis.call('SET', KEYS[3], ARGV[1])
end
return 1
`;

/**
 * KEYS: the `indexed` stamp. ARGV: the replication id the rebuild started under. Stamps it only if
 * the master still has that id (another change meanwhile needs another rebuild). Returns 1 if set.
 */
export const INDEX_STAMP_SET_LUA = `${REPLICATION_IDS}
if (replication_ids()) ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[1])
return 1
`;
