/**
 * Lua for RedisCheckpointStore. Two families, each touching ONE hash slot (Redis Cluster safe):
 *
 * - run scripts: KEYS = the run's four keys, all tagged `{prefix:runId}`: 1 head, 2 cps,
 *   3 calls (one hash for every call record of the run, field `superstep:segment:seq`), 4 the
 *   calls' index (sorted set of those fields, score = superstep, so one superstep's records are a
 *   range read). A run has these four keys however long it runs: refreshing its TTL is O(1).
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
local function delete_run()
  return redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4])
end

-- Every key of the run lives ttl seconds after its last write, never while it is paused. The run
-- has four keys whatever its length: this costs the same at superstep 1 and superstep 10000.
local function touch(status, ttl)
  if ttl <= 0 then return end
  for i = 1, 4 do
    if status == 'paused' then redis.call('PERSIST', KEYS[i]) else redis.call('EXPIRE', KEYS[i], ttl) end
  end
end

-- Fencing and uniqueness of a call batch (ARGV[at] = count, then segment, superstep, seq, sealed
-- per call), checked before anything is written. Returns a refusal or nil. The stored records are
-- looked up with one HMGET (in chunks: unpack takes a few thousand values at most), not one call
-- per record: each redis.call costs far more than the Lua around it.
local function check_calls(segment, current, status, foreign, at)
  if tonumber(segment) ~= tonumber(current) or status ~= 'running' then
    return {'fenced', segment, current}
  end
  local n = tonumber(ARGV[at])
  local seen, fields = {}, {}
  for i = 1, n do
    local o = at + (i - 1) * 4
    local seg, superstep, seq = ARGV[o + 1], ARGV[o + 2], ARGV[o + 3]
    if i == foreign or tonumber(seg) ~= tonumber(current) then return {'fenced', seg, current} end
    local field = superstep .. ':' .. seg .. ':' .. seq
    if seen[field] then return {'duplicate', seg, superstep, seq} end
    seen[field] = true
    fields[i] = field
  end
  for s = 1, n, 1000 do
    local stored = redis.call('HMGET', KEYS[3], unpack(fields, s, math.min(s + 999, n)))
    for j = 1, #stored do
      if stored[j] then
        local o = at + (s + j - 2) * 4
        return {'duplicate', ARGV[o + 1], ARGV[o + 2], ARGV[o + 3]}
      end
    end
  end
end

-- The batch's records in one HSET and their index entries in one ZADD (per chunk of 500).
local function write_calls(at)
  local n = tonumber(ARGV[at])
  for s = 1, n, 500 do
    local records, index = {}, {}
    for i = s, math.min(s + 499, n) do
      local o = at + (i - 1) * 4
      local field = ARGV[o + 2] .. ':' .. ARGV[o + 1] .. ':' .. ARGV[o + 3]
      records[#records + 1] = field
      records[#records + 1] = ARGV[o + 4]
      index[#index + 1] = ARGV[o + 2]
      index[#index + 1] = field
    end
    redis.call('HSET', KEYS[3], unpack(records))
    redis.call('ZADD', KEYS[4], unpack(index))
  end
  return n
end
`;

/**
 * ARGV: 1 write token, 2 ttl, 3 step, 4 status, 5 segment, 6 flow, 7 sealed, 8 checkpoint
 * columns (JSON), 9 owner, 10 lease, 11 expectCalls, 12 created, 13 intent ms, 14 max intent age
 * ms, 15 foreign call index, 16 call count, 17.. calls ('' = absent).
 */
export const SAVE_LUA = `${RUN}
local head = redis.call('HMGET', KEYS[1], 'step', 'status', 'segment', 'calls', 'w')
-- Our own write, resent by the client after its reply was lost: it is already applied.
if head[5] == ARGV[1] then return {'ok'} end
local step = tonumber(ARGV[3])
if step == 0 then
  if head[1] then return {'step', head[1]} end
  -- The index entry was written at ARGV[13]; an index cleaner only drops entries whose head is
  -- still missing long after that, so a creation must not land late.
  if now_ms() - tonumber(ARGV[13]) > tonumber(ARGV[14]) then return {'late'} end
  -- Leftovers of an expired incarnation (keys expire one by one) must not leak into the new run.
  delete_run()
  local refused = check_calls(ARGV[5], ARGV[5], 'running', tonumber(ARGV[15]), 16)
  if refused then return refused end
else
  if not head[1] or tonumber(head[1]) ~= step - 1 then return {'step', head[1]} end
  if head[2] ~= 'running' and head[2] ~= 'paused' then return {'ended', head[2]} end
  -- A checkpoint keeps the run's segment or claims the next one; anything else is a worker of
  -- another incarnation of this run id, or a stale one.
  local seg, cur = tonumber(ARGV[5]), tonumber(head[3])
  if seg ~= cur and seg ~= cur + 1 then return {'fenced', ARGV[5], head[3]} end
  if ARGV[11] ~= '' and tonumber(head[4] or 0) ~= tonumber(ARGV[11]) then return {'moved'} end
  if tonumber(ARGV[16]) > 0 then
    local refused = check_calls(head[3], head[3], head[2], tonumber(ARGV[15]), 16)
    if refused then return refused end
  end
end
local calls = tonumber(head[4] or 0) + write_calls(16)
redis.call('HSET', KEYS[2], ARGV[3], ARGV[7], ARGV[3] .. ':cols', ARGV[8])
-- One HSET (and an HDEL only when the run loses its owner or lease): each redis.call costs.
local fields = {'step', ARGV[3], 'status', ARGV[4], 'segment', ARGV[5], 'flow', ARGV[6],
  'updatedAt', now_ms(), 'calls', calls, 'w', ARGV[1]}
local gone = {}
if step == 0 then fields[#fields + 1] = 'created'; fields[#fields + 1] = ARGV[12] end
if ARGV[9] ~= '' then fields[#fields + 1] = 'owner'; fields[#fields + 1] = ARGV[9] else gone[#gone + 1] = 'owner' end
if ARGV[10] ~= '' then fields[#fields + 1] = 'lease'; fields[#fields + 1] = ARGV[10] else gone[#gone + 1] = 'lease' end
redis.call('HSET', KEYS[1], unpack(fields))
if #gone > 0 then redis.call('HDEL', KEYS[1], unpack(gone)) end
touch(ARGV[4], tonumber(ARGV[2]))
return {'ok'}
`;

/** ARGV: 1 write token, 2 ttl, 3 segment, 4 foreign call index, 5 count, 6.. calls. */
export const RECORD_LUA = `${RUN}
local head = redis.call('HMGET', KEYS[1], 'segment', 'status', 'calls', 'w')
if head[4] == ARGV[1] then return {'ok'} end
if not head[1] then return {'fenced', ARGV[3], false} end
local refused = check_calls(ARGV[3], head[1], head[2], tonumber(ARGV[4]), 5)
if refused then return refused end
local n = write_calls(5)
if n > 0 then
  redis.call('HSET', KEYS[1], 'calls', tonumber(head[3] or 0) + n, 'w', ARGV[1])
  touch(head[2], tonumber(ARGV[2]))
end
return {'ok'}
`;

/** Refreshes the TTL of a live run's keys (lease renewal of a long superstep). ARGV: 1 ttl. */
export const TOUCH_LUA = `${RUN}
local status = redis.call('HGET', KEYS[1], 'status')
if status == 'running' then touch(status, tonumber(ARGV[1])) end
return 1
`;

/**
 * One superstep's call records: {field, sealed, field, sealed, ...}. ARGV: 1 superstep. Reads only
 * that superstep's entries (a range of the index), however long the run's history.
 */
export const CALLS_LUA = `
local fields = redis.call('ZRANGEBYSCORE', KEYS[4], ARGV[1], ARGV[1])
local out = {}
for _, f in ipairs(fields) do
  -- A record lost from the hash (eviction) is left out; the head's call count tells it is missing.
  local sealed = redis.call('HGET', KEYS[3], f)
  if sealed then
    out[#out + 1] = f
    out[#out + 1] = sealed
  end
end
return out
`;

/** The latest checkpoint: head columns and the sealed text of the head's step, read together. */
export const LATEST_LUA = `
local h = redis.call('HMGET', KEYS[1], 'step', 'flow', 'status', 'segment')
if not h[1] then return false end
return {h[1], h[2], h[3], h[4], redis.call('HGET', KEYS[2], h[1])}
`;

/** Every checkpoint and call record of a run: {cps fields, calls fields}. */
export const HISTORY_LUA = `
return {redis.call('HGETALL', KEYS[2]), redis.call('HGETALL', KEYS[3])}
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
  aaCalls: CALLS_LUA,
  aaHistory: HISTORY_LUA,
  aaDelete: DELETE_LUA,
  aaTouch: TOUCH_LUA,
  aaIndexCreate: INDEX_CREATE_LUA,
  aaScanUnfinished: SCAN_UNFINISHED_LUA,
  aaScanRuns: SCAN_RUNS_LUA,
  aaIndexDrop: INDEX_DROP_LUA,
} as const;
