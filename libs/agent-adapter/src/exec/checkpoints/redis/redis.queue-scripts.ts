/**
 * Lua of the Redis store's queues (keys: redis.layout.ts's header). Every script here runs in the
 * tenant's `{P}` slot: the queue's keys, `{P}:due`, `{P}:unfinished:<flow>` and the list of runs
 * share that tag. A queue's keys are named from `{P}:q:`, the queue's name and the part, as
 * `RedisKeys.queue` names them (a flow's unfinished set likewise): same tag, same slot.
 *
 * A placement (the `runs` hash's values) is JSON of strings only: `f` flow, `k` concurrency key,
 * `d` dedupe key, `p` priority, `a` availableAt while waiting, `t` admittedAt once admitted, `m`
 * the run's member in `ready` while waiting. Strings, so cjson's re-encoding keeps every digit.
 */
import { REPLICATION_IDS } from './redis.failover';

const NOW = `
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
`;

/**
 * `leave_queue(queued, qp, id, forget)`: the run leaves its queue (it ended, or its hash is gone):
 * out of the waiting sets, the admitted count and its key's count, and the dedupe key if that
 * still names it (an enqueue may have taken the key over once the run ended). An admitted run
 * that ended moves the queue's `ended` time to now (after its end write, so not before its
 * `updatedAt`): the place it frees is never taken by an admission stamped earlier. `forget` (a
 * delete, a hash gone) also drops its placement, its admission (the rate window) and its queue's
 * name. Idempotent: `active` says whether its counts still hold it.
 */
export const LEAVE_QUEUE_LUA = `
local function leave_queue(queued, qp, id, forget)
  local name = redis.call('HGET', queued, id)
  if not name then return end
  local q = qp .. name .. ':'
  local raw = redis.call('HGET', q .. 'runs', id)
  if raw then
    local p = cjson.decode(raw)
    redis.call('ZREM', q .. 'delayed', id)
    if p.m then redis.call('ZREM', q .. 'ready', p.m) end
    if redis.call('ZREM', q .. 'active', id) == 1 then
      if p.k and redis.call('HINCRBY', q .. 'keys', p.k, -1) <= 0 then redis.call('HDEL', q .. 'keys', p.k) end
      if not forget then
        local t = redis.call('TIME')
        local ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
        if ms > tonumber(redis.call('GET', q .. 'ended') or '0') then redis.call('SET', q .. 'ended', ms) end
      end
    end
    if p.d and redis.call('HGET', q .. 'dedupe', p.d) == id then redis.call('HDEL', q .. 'dedupe', p.d) end
  end
  if forget then
    redis.call('HDEL', q .. 'runs', id)
    redis.call('ZREM', q .. 'admitted', id)
    redis.call('HDEL', queued, id)
  end
end
`;

/**
 * An enqueue's index write, after its run hash (step 0) is stored. KEYS: queued, dedupe, delayed,
 * runs (placements), the list of runs, seq, born, the tenant's `indexed` stamp. ARGV: 1 run id,
 * 2 queue, 3 dedupe key ('' none), 4 the key's holder the caller saw ('' none), 5 placement JSON,
 * 6 availableAt (16 digits), 7 '1' when the healing itself queues a run again (then nothing is
 * done if the queue holds the run).
 * Returns {'ok'}; {'held', holder} when the dedupe key names another run than the caller saw;
 * {'heal'} for a dedupe key while the tenant's master is not the one its index was last known
 * whole under (the key may be lost: redis.heal.ts), so no second run starts for one key.
 */
export const ENQUEUE_LUA = `${NOW}
${REPLICATION_IDS}
if ARGV[3] ~= '' and ARGV[7] ~= '1' and redis.call('GET', KEYS[8]) ~= (replication_ids()) then
  return {'heal'}
end
-- The healing's enqueue of a run its queue holds already: another look's healing put it back, and
-- it may have moved on since (admitted, ended, its key taken over). Nothing to do.
if ARGV[7] == '1' and redis.call('HEXISTS', KEYS[4], ARGV[1]) == 1 then return {'ok'} end
if ARGV[3] ~= '' then
  local holder = redis.call('HGET', KEYS[2], ARGV[3]) or ''
  -- Our own write, resent after its reply was lost: applied already.
  if holder == ARGV[1] then return {'ok'} end
  if holder ~= ARGV[4] then return {'held', holder} end
  redis.call('HSET', KEYS[2], ARGV[3], ARGV[1])
end
local seq = redis.call('INCR', KEYS[6])
local p = cjson.decode(ARGV[5])
-- Fixed width, so members of one priority sort by availableAt, then by enqueue order.
p.m = ARGV[6] .. ':' .. string.format('%016d', seq) .. ':' .. ARGV[1]
redis.call('HSET', KEYS[4], ARGV[1], cjson.encode(p))
redis.call('ZADD', KEYS[3], p.a, ARGV[1])
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('HSET', KEYS[7], ARGV[1], now_ms())
redis.call('ZADD', KEYS[5], seq, ARGV[1])
return {'ok'}
`;

/** Ready members start with the run id at this (1-based) position: `<16 digits>:<16 digits>:`. */
const ID_AT = 35;

/**
 * One admission. KEYS: the queue's delayed, ready, active, keys, admitted, runs, dedupe, then
 * queued, due, then the queue's ended, then the tenant's `indexed` stamp. With a concurrency or
 * per-key limit, the admitted runs are stamped with the later of now and `ended` (see
 * `leave_queue`). ARGV: 1 queue key prefix, 2 queue, 3 unfinished key prefix, 4 now, 5 limit,
 * 6 concurrency, 7 perKey, 8 rate limit ('' = none), 9 rate window start (exclusive), 10 drop
 * admissions at or before this, 11 when the admitted runs fall due (the admitter's lease, or 0),
 * 12.. admitted runs found ended (repaired first).
 * Returns {runId, placement JSON, ...} of the runs admitted, in order; 'heal' while the tenant's
 * master is not the one its index was last known whole under (it may have lost admissions:
 * redis.heal.ts), so no admission goes past a limit, or admits again a run that is driven.
 */
export const ADMIT_LUA = `${LEAVE_QUEUE_LUA}
${REPLICATION_IDS}
if redis.call('GET', KEYS[11]) ~= (replication_ids()) then
  return 'heal'
end
for i = 12, #ARGV do leave_queue(KEYS[8], ARGV[1], ARGV[i], false) end
local now = ARGV[4]
-- Runs whose time has come join the ready set (at most 1000 a look; the rest at the next one).
local available = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, 1000)
for _, id in ipairs(available) do
  local raw = redis.call('HGET', KEYS[6], id)
  if raw then
    local p = cjson.decode(raw)
    if p.m then redis.call('ZADD', KEYS[2], p.p, p.m) end
  end
  redis.call('ZREM', KEYS[1], id)
end
redis.call('ZREMRANGEBYSCORE', KEYS[5], '-inf', ARGV[10])
local room = tonumber(ARGV[5])
if ARGV[6] ~= '' then room = math.min(room, tonumber(ARGV[6]) - redis.call('ZCARD', KEYS[3])) end
if ARGV[8] ~= '' then
  room = math.min(room, tonumber(ARGV[8]) - redis.call('ZCOUNT', KEYS[5], '(' .. ARGV[9], '+inf'))
end
if room <= 0 then return {} end
local perKey = tonumber(ARGV[7])
-- Strings, as placements keep them; the end time only where a place is counted.
local at = now
if ARGV[6] ~= '' or perKey then
  local ended = redis.call('GET', KEYS[10])
  if ended and tonumber(ended) > tonumber(now) then at = ended end
end
-- Per key, saturated keys are walked past (bounded: 1000 ready runs a look).
local walk = 1000
if not perKey then walk = math.min(room, walk) end
local out, counts = {}, {}
for _, m in ipairs(redis.call('ZRANGE', KEYS[2], 0, walk - 1)) do
  if room <= 0 then break end
  local id = string.sub(m, ${ID_AT})
  local raw = redis.call('HGET', KEYS[6], id)
  local p = raw and cjson.decode(raw)
  if not p or p.m ~= m then
    redis.call('ZREM', KEYS[2], m)
  else
    local fits = true
    if perKey and p.k then
      counts[p.k] = counts[p.k] or tonumber(redis.call('HGET', KEYS[4], p.k) or '0')
      fits = counts[p.k] < perKey
    end
    if fits then
      if p.k then
        redis.call('HINCRBY', KEYS[4], p.k, 1)
        if counts[p.k] then counts[p.k] = counts[p.k] + 1 end
      end
      redis.call('ZREM', KEYS[2], m)
      p.a = nil
      p.m = nil
      p.t = at
      local placed = cjson.encode(p)
      redis.call('HSET', KEYS[6], id, placed)
      redis.call('ZADD', KEYS[3], at, id)
      redis.call('ZADD', KEYS[5], at, id)
      -- Due once the admitter's lease expires (at once without one), and unfinished for recovery;
      -- NX: a run driven already (admitted again, its admission lost) keeps its own due time.
      redis.call('ZADD', KEYS[9], 'NX', ARGV[11], id)
      redis.call('ZADD', ARGV[3] .. p.f, 0, id)
      out[#out + 1] = id
      out[#out + 1] = placed
      room = room - 1
    end
  end
end
return out
`;

/**
 * Admitted runs that the queue no longer counts (their admission was lost with the tenant's
 * master: redis.heal.ts) while their hashes say they run: counted again, as admitted now. KEYS: queued,
 * then the queue's runs, ready, delayed, active, keys, admitted, dedupe. ARGV: 1 the queue, then
 * (run id, the placement its hash keeps) pairs; the queue's own placement wins where it has one.
 */
export const QUEUE_RECOUNT_LUA = `${NOW}
local now = tostring(now_ms())
for i = 2, #ARGV, 2 do
  local id = ARGV[i]
  local placed = redis.call('HGET', KEYS[2], id)
  local raw = placed or ARGV[i + 1]
  if raw ~= '' and not redis.call('ZSCORE', KEYS[5], id) then
    local p = cjson.decode(raw)
    redis.call('ZREM', KEYS[4], id)
    if p.m then redis.call('ZREM', KEYS[3], p.m) end
    p.a = nil
    p.m = nil
    p.t = now
    redis.call('HSET', KEYS[2], id, cjson.encode(p))
    redis.call('HSET', KEYS[1], id, ARGV[1])
    redis.call('ZADD', KEYS[5], now, id)
    redis.call('ZADD', KEYS[7], now, id)
    if p.k then redis.call('HINCRBY', KEYS[6], p.k, 1) end
    -- Its enqueue lost too: the key is its own (an enqueue takes a key only from a run that ended,
    -- and the lost state may still name that one); else only a free key.
    if p.d and (not placed or not redis.call('HGET', KEYS[8], p.d)) then redis.call('HSET', KEYS[8], p.d, id) end
  end
end
return 1
`;
