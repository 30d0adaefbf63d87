/**
 * Lua for RedisCheckpointStore. Two families, each touching ONE hash slot (Redis Cluster safe):
 *
 * - run scripts: KEYS = the run's head, cps and supersteps keys, all tagged `{prefix:runId}`;
 *   ARGV[1] is the name prefix of the run's call hashes (`{prefix:runId}:calls:`). The call hashes
 *   are named from the run's tag, so they live in KEYS[1]'s slot (Redis only refuses scripts that
 *   reach into another slot).
 * - index scripts: KEYS tagged `{prefix}` (unfinished index per flow, list index, creation times).
 *
 * Refusals are replies, not errors: `{code, ...details}`; the TypeScript side builds the message.
 * Scripts that stamp a time read the server's TIME; Redis 7 allows it in writing scripts
 * (effects replication), and every worker then agrees on one clock.
 */

const NOW = `
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
`;

const RUN = `
${NOW}
local function run_keys()
  local keys = {KEYS[1], KEYS[2], KEYS[3]}
  for _, s in ipairs(redis.call('SMEMBERS', KEYS[3])) do keys[#keys + 1] = ARGV[1] .. s end
  return keys
end

-- One DEL per key: unpack() of a long run's key list would overflow Lua's stack.
local function delete_run()
  local n = 0
  for _, k in ipairs(run_keys()) do n = n + redis.call('DEL', k) end
  return n
end

-- Every key of the run lives ttl seconds after its last write, never while it is paused.
local function touch(status, ttl)
  if ttl <= 0 then return end
  for _, k in ipairs(run_keys()) do
    if status == 'paused' then redis.call('PERSIST', k) else redis.call('EXPIRE', k, ttl) end
  end
end

-- Fencing and uniqueness of a call batch (ARGV[at] = count, then segment, superstep, seq, sealed
-- per call), checked before anything is written. Returns a refusal or nil.
local function check_calls(segment, current, status, foreign, at)
  if tonumber(segment) ~= tonumber(current) or status ~= 'running' then
    return {'fenced', segment, current}
  end
  local seen = {}
  for i = 1, tonumber(ARGV[at]) do
    local o = at + (i - 1) * 4
    local seg, superstep, seq = ARGV[o + 1], ARGV[o + 2], ARGV[o + 3]
    if i == foreign or tonumber(seg) ~= tonumber(current) then return {'fenced', seg, current} end
    local id = superstep .. '/' .. seg .. ':' .. seq
    if seen[id] or redis.call('HEXISTS', ARGV[1] .. superstep, seg .. ':' .. seq) == 1 then
      return {'duplicate', seg, superstep, seq}
    end
    seen[id] = true
  end
end

local function write_calls(at)
  local n = tonumber(ARGV[at])
  for i = 1, n do
    local o = at + (i - 1) * 4
    redis.call('HSET', ARGV[1] .. ARGV[o + 2], ARGV[o + 1] .. ':' .. ARGV[o + 3], ARGV[o + 4])
    redis.call('SADD', KEYS[3], ARGV[o + 2])
  end
  return n
end
`;

/**
 * ARGV: 1 calls prefix, 2 write token, 3 ttl, 4 step, 5 status, 6 segment, 7 flow, 8 sealed,
 * 9 checkpoint columns (JSON), 10 owner, 11 lease, 12 expectCalls, 13 created, 14 intent ms,
 * 15 max intent age ms, 16 foreign call index, 17 call count, 18.. calls ('' = absent).
 */
export const SAVE_LUA = `${RUN}
local head = redis.call('HMGET', KEYS[1], 'step', 'status', 'segment', 'calls', 'w')
-- Our own write, resent by the client after its reply was lost: it is already applied.
if head[5] == ARGV[2] then return {'ok'} end
local step = tonumber(ARGV[4])
if step == 0 then
  if head[1] then return {'step', head[1]} end
  -- The index entry was written at ARGV[14]; an index cleaner only drops entries whose head is
  -- still missing long after that, so a creation must not land late.
  if now_ms() - tonumber(ARGV[14]) > tonumber(ARGV[15]) then return {'late'} end
  -- Leftovers of an expired incarnation (keys expire one by one) must not leak into the new run.
  delete_run()
  local refused = check_calls(ARGV[6], ARGV[6], 'running', tonumber(ARGV[16]), 17)
  if refused then return refused end
else
  if not head[1] or tonumber(head[1]) ~= step - 1 then return {'step', head[1]} end
  if head[2] ~= 'running' and head[2] ~= 'paused' then return {'ended', head[2]} end
  -- A checkpoint keeps the run's segment or claims the next one; anything else is a worker of
  -- another incarnation of this run id, or a stale one.
  local seg, cur = tonumber(ARGV[6]), tonumber(head[3])
  if seg ~= cur and seg ~= cur + 1 then return {'fenced', ARGV[6], head[3]} end
  if ARGV[12] ~= '' and tonumber(head[4] or 0) ~= tonumber(ARGV[12]) then return {'moved'} end
  if tonumber(ARGV[17]) > 0 then
    local refused = check_calls(head[3], head[3], head[2], tonumber(ARGV[16]), 17)
    if refused then return refused end
  end
end
local calls = tonumber(head[4] or 0) + write_calls(17)
redis.call('HSET', KEYS[2], ARGV[4], ARGV[8], ARGV[4] .. ':cols', ARGV[9])
redis.call('HSET', KEYS[1], 'step', ARGV[4], 'status', ARGV[5], 'segment', ARGV[6], 'flow', ARGV[7],
  'updatedAt', now_ms(), 'calls', calls, 'w', ARGV[2])
if step == 0 then redis.call('HSET', KEYS[1], 'created', ARGV[13]) end
if ARGV[10] ~= '' then redis.call('HSET', KEYS[1], 'owner', ARGV[10]) else redis.call('HDEL', KEYS[1], 'owner') end
if ARGV[11] ~= '' then redis.call('HSET', KEYS[1], 'lease', ARGV[11]) else redis.call('HDEL', KEYS[1], 'lease') end
touch(ARGV[5], tonumber(ARGV[3]))
return {'ok'}
`;

/** ARGV: 1 calls prefix, 2 write token, 3 ttl, 4 segment, 5 foreign call index, 6 count, 7.. calls. */
export const RECORD_LUA = `${RUN}
local head = redis.call('HMGET', KEYS[1], 'segment', 'status', 'calls', 'w')
if head[4] == ARGV[2] then return {'ok'} end
if not head[1] then return {'fenced', ARGV[4], false} end
local refused = check_calls(ARGV[4], head[1], head[2], tonumber(ARGV[5]), 6)
if refused then return refused end
local n = write_calls(6)
if n > 0 then
  redis.call('HSET', KEYS[1], 'calls', tonumber(head[3] or 0) + n, 'w', ARGV[2])
  touch(head[2], tonumber(ARGV[3]))
end
return {'ok'}
`;

/** Refreshes the TTL of a live run's keys (lease renewal of a long superstep). ARGV: 1 calls prefix, 2 ttl. */
export const TOUCH_LUA = `${RUN}
local status = redis.call('HGET', KEYS[1], 'status')
if status == 'running' then touch(status, tonumber(ARGV[2])) end
return 1
`;

/** The latest checkpoint: head columns and the sealed text of the head's step, read together. */
export const LATEST_LUA = `
local h = redis.call('HMGET', KEYS[1], 'step', 'flow', 'status', 'segment')
if not h[1] then return false end
return {h[1], h[2], h[3], h[4], redis.call('HGET', KEYS[2], h[1])}
`;

/** Every checkpoint and call hash of a run: {cps, superstep, calls, superstep, calls, ...}. */
export const HISTORY_LUA = `
local out = {redis.call('HGETALL', KEYS[2])}
for _, s in ipairs(redis.call('SMEMBERS', KEYS[3])) do
  out[#out + 1] = s
  out[#out + 1] = redis.call('HGETALL', ARGV[1] .. s)
end
return out
`;

/** Deletes every key of the run; returns {deleted count, flow, owner} for the index cleanup. */
export const DELETE_LUA = `${RUN}
local h = redis.call('HMGET', KEYS[1], 'flow', 'owner')
return {delete_run(), h[1], h[2]}
`;

/**
 * Before a step-0 save. KEYS: unfinished(flow), born, runs, seq; ARGV: runId.
 * Returns {now ms, created}: an existing list entry keeps its place.
 */
export const INDEX_CREATE_LUA = `${NOW}
redis.call('ZADD', KEYS[1], 'NX', 0, ARGV[1])
local t = now_ms()
redis.call('HSET', KEYS[2], ARGV[1], t)
local created = redis.call('ZSCORE', KEYS[3], ARGV[1])
if not created then
  created = redis.call('INCR', KEYS[4])
  redis.call('ZADD', KEYS[3], created, ARGV[1])
end
return {t, tostring(created)}
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
 * Removes index entries. KEYS: born, then the sorted sets to remove from. ARGV: 1 '1' to forget
 * the creation time too, then (runId, expected born time) pairs: an entry is removed only if its
 * creation time is still the one the caller saw ('' = none, '*' = any), so a run created again
 * meanwhile keeps its entry.
 */
export const INDEX_DROP_LUA = `
for i = 2, #ARGV, 2 do
  local id, expected = ARGV[i], ARGV[i + 1]
  if expected == '*' or (redis.call('HGET', KEYS[1], id) or '') == expected then
    for k = 2, #KEYS do redis.call('ZREM', KEYS[k], id) end
    if ARGV[1] == '1' then redis.call('HDEL', KEYS[1], id) end
  end
end
return 1
`;

/** Registered on the client with `defineCommand` (EVALSHA, falling back to EVAL on NOSCRIPT). */
export const REDIS_SCRIPTS = {
  aaSave: SAVE_LUA,
  aaRecord: RECORD_LUA,
  aaLatest: LATEST_LUA,
  aaHistory: HISTORY_LUA,
  aaDelete: DELETE_LUA,
  aaTouch: TOUCH_LUA,
  aaIndexCreate: INDEX_CREATE_LUA,
  aaScanUnfinished: SCAN_UNFINISHED_LUA,
  aaScanRuns: SCAN_RUNS_LUA,
  aaIndexDrop: INDEX_DROP_LUA,
} as const;
