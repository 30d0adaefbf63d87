/**
 * Lua for RedisCheckpointStore (the TypeScript side of its arguments and replies: redis.args.ts).
 * Two families, each touching ONE hash slot (Redis Cluster safe) but for a run's first and last
 * save on one server (SAVE_LUA); the keys and fields are redis.layout.ts's:
 *
 * - run scripts: KEYS = the run's keys (`RedisKeys.run`): 1 the run hash (the head's fields,
 *   every checkpoint and every call record), 2 the calls' index (by superstep, so one superstep's
 *   records are a range read), 3 the stream (redis.stream-scripts.ts). One hash, so a save reads what it checks with one HMGET and writes
 *   everything with one HSET.
 * - index scripts: KEYS tagged `{prefix}` (unfinished index per flow, list index, creation times,
 *   due work: redis.index-scripts.ts; the queues: redis.queue-scripts.ts).
 *
 * Refusals are replies, not errors: `{code, ...details}`; `refusal` below builds the message.
 * Scripts that stamp a time read the server's TIME; Redis 7 allows it in writing scripts
 * (effects replication), and every worker then agrees on one clock.
 */
import {
  FAILOVER_LUA,
  REPLICATION_FIELD,
  REPLICATION_LUA,
} from './redis.failover';
import {
  ADMISSION_FIELD,
  CALL_FIELD,
  LAST_CALL_FIELD,
  CHECKPOINT_FIELD,
  COLUMNS_FIELD,
  HEAD_FIELDS,
  PLACEMENT_FIELD,
} from './redis.layout';
import {
  ANNOUNCE,
  INDEX_CREATE_LUA,
  INDEX_DROP_LUA,
  INDEX_RESTORE_LUA,
  INDEX_STAMP_LUA,
  INDEX_STAMP_SET_LUA,
  NOW,
  SCAN_DUE_LUA,
  SCAN_RUNS_LUA,
  SCAN_UNFINISHED_LUA,
} from './redis.index-scripts';
import {
  ADMIT_LUA,
  ENQUEUE_LUA,
  LEAVE_QUEUE_LUA,
  QUEUE_RECOUNT_LUA,
} from './redis.queue-scripts';
import { APPEND_STREAM_LUA, READ_STREAM_LUA } from './redis.stream-scripts';

const RUN = `
${NOW}
${ANNOUNCE}
${LEAVE_QUEUE_LUA}
${REPLICATION_LUA}
local function delete_run()
  return redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
end

-- The run's keys live ttl seconds after its last write, never while it is paused or sleeping:
-- it waits for a person or a time, however long.
local function touch(status, ttl)
  if ttl <= 0 then return end
  local waits = status == 'paused' or status == 'sleeping'
  for i = 1, 3 do
    if waits then redis.call('PERSIST', KEYS[i]) else redis.call('EXPIRE', KEYS[i], ttl) end
  end
end

-- A call batch is ARGV[at] = count, then segment, superstep, seq, sealed per call. Its index
-- members ('superstep:segment:seq') and its records' fields in the run hash ('call:' .. member),
-- made once per script: string building is most of the Lua a save runs.
local function batch(at)
  local members, fields = {}, {}
  for i = 1, tonumber(ARGV[at]) do
    local o = at + (i - 1) * 4
    local m = ARGV[o + 2] .. ':' .. ARGV[o + 1] .. ':' .. ARGV[o + 3]
    members[i] = m
    fields[i] = '${CALL_FIELD}' .. m
  end
  return members, fields
end

-- The run hash's \`head\` fields in one HMGET: each redis.call costs far more than the Lua around
-- it.
local function read(head)
  return redis.call('HMGET', KEYS[1], unpack(head))
end

-- A key 'segment:superstep:seq' as three numbers; nil for a value that is not one.
local function key_of(s)
  local g, p, q = string.match(s, '^(%d+):(%d+):(%d+)$')
  if not g then return nil end
  return tonumber(g), tonumber(p), tonumber(q)
end

-- Fencing and order of the batch (\`last\`: the run's last record, the head's '${LAST_CALL_FIELD}'
-- field; \`stored\`: the head's call count), checked before anything is written: every record
-- comes after the one before it, so none is stored twice (call-order.ts). A run with records but
-- no readable last key was edited below the store: refused, since order could not be checked.
-- Returns a refusal or nil.
local function check_calls(segment, current, status, foreign, at, count, last, stored)
  if tonumber(segment) ~= tonumber(current) or status ~= 'running' then
    return {'fenced', segment, current}
  end
  local pg, pp, pq = 0, 0, 0
  if last then
    pg, pp, pq = key_of(last)
    if not pg then return {'lastCall', last} end
  elseif tonumber(stored or 0) > 0 then
    return {'lastCall', ''}
  end
  for i = 1, count do
    local o = at + (i - 1) * 4
    local g, p, q = tonumber(ARGV[o + 1]), tonumber(ARGV[o + 2]), tonumber(ARGV[o + 3])
    if i == foreign or g ~= tonumber(current) then return {'fenced', ARGV[o + 1], current} end
    if g < pg or (g == pg and (p < pp or (p == pp and q <= pq))) then
      return {'order', g, p, q, pg, pp, pq}
    end
    pg, pp, pq = g, p, q
  end
end

-- The batch's last key, for the head's '${LAST_CALL_FIELD}' field (nil for an empty batch).
local function last_of(at)
  local n = tonumber(ARGV[at])
  if n == 0 then return nil end
  local o = at + (n - 1) * 4
  return ARGV[o + 1] .. ':' .. ARGV[o + 2] .. ':' .. ARGV[o + 3]
end

-- \`head\` (field/value pairs of the run hash) and the batch's records in one HSET, their index
-- entries in one ZADD (more in chunks).
local function write(head, at, members, fields)
  local last = last_of(at)
  if last then head[#head + 1] = '${LAST_CALL_FIELD}'; head[#head + 1] = last end
  local index = {}
  for i = 1, #members do
    head[#head + 1] = fields[i]
    head[#head + 1] = ARGV[at + i * 4]
    index[#index + 1] = ARGV[at + (i - 1) * 4 + 2]
    index[#index + 1] = members[i]
  end
  for s = 1, #head, 2000 do
    redis.call('HSET', KEYS[1], unpack(head, s, math.min(s + 1999, #head)))
  end
  for s = 1, #index, 1000 do
    redis.call('ZADD', KEYS[2], unpack(index, s, math.min(s + 999, #index)))
  end
end
`;

/**
 * ARGV: 1 write token, 2 ttl, 3 step, 4 status, 5 segment, 6 flow, 7 sealed, 8 checkpoint
 * columns (JSON), 9 owner, 10 lease, 11 expectCalls, 12 created, 13 intent ms, 14 max intent age
 * ms, 15 head seal, 16 queue (step 0 of an enqueue), 17 replication mode (redis.failover.ts),
 * 18 the run id when this script writes the run's index entry too ('' when not), 19 its due score,
 * 20 the queue key prefix, 21 foreign call index, 22 call count, 23.. calls ('' = absent). On one
 * server, KEYS 4-8 are then `RedisKeys.announce(flow)` and 9 `queued`: step 0 makes the entry
 * (`ANNOUNCE`: no created nor intent) and an end drops it (`leave_queue` too). An enqueue gives no
 * created nor intent: its index entry follows its hash.
 */
export const SAVE_LUA = `${RUN}
local members, calls = batch(22)
local head = read({'step', 'status', 'segment', 'calls', 'w', '${REPLICATION_FIELD}', '${LAST_CALL_FIELD}'})
-- Our own write, resent by the client after its reply was lost: it is already applied.
if head[5] == ARGV[1] then return {'ok'} end
local step = tonumber(ARGV[3])
-- A run last written before a failover that may have lost its last writes (redis.failover.ts).
local lost, stamp = replication_check(step > 0 and head[6] or nil, ARGV[17], ARGV[4])
if lost then return lost end
if step == 0 then
  if head[1] then return {'step', head[1]} end
  -- The index entry was written at ARGV[13]; an index cleaner only drops entries whose head is
  -- still missing long after that, so a creation must not land late.
  if ARGV[13] ~= '' and now_ms() - tonumber(ARGV[13]) > tonumber(ARGV[14]) then return {'late'} end
  -- Leftovers of an expired incarnation (keys expire one by one) must not leak into the new run:
  -- deleted, so what read() found of them does not count.
  delete_run()
  head = {}
  local refused = check_calls(ARGV[5], ARGV[5], 'running', tonumber(ARGV[21]), 22, #members, nil, 0)
  if refused then return refused end
else
  if not head[1] or tonumber(head[1]) ~= step - 1 then return {'step', head[1]} end
  if head[2] ~= 'running' and head[2] ~= 'paused' and head[2] ~= 'sleeping' then return {'ended', head[2]} end
  -- A checkpoint keeps the run's segment or claims the next one; anything else is a worker of
  -- another incarnation of this run id, or a stale one.
  local seg, cur = tonumber(ARGV[5]), tonumber(head[3])
  if seg ~= cur and seg ~= cur + 1 then return {'fenced', ARGV[5], head[3]} end
  if ARGV[11] ~= '' and tonumber(head[4] or 0) ~= tonumber(ARGV[11]) then return {'moved'} end
  if tonumber(ARGV[22]) > 0 then
    local refused = check_calls(head[3], head[3], head[2], tonumber(ARGV[21]), 22, #members, head[7], head[4])
    if refused then return refused end
  end
end
-- The head, the checkpoint and the call records: one HSET (and an HDEL only when the run loses
-- its owner or lease).
local fields = {'step', ARGV[3], 'status', ARGV[4], 'segment', ARGV[5], 'flow', ARGV[6],
  'updatedAt', now_ms(), 'calls', tonumber(head[4] or 0) + tonumber(ARGV[22]), 'w', ARGV[1], 'sealed', ARGV[15],
  '${REPLICATION_FIELD}', stamp,
  '${CHECKPOINT_FIELD}' .. ARGV[3], ARGV[7], '${COLUMNS_FIELD}' .. ARGV[3], ARGV[8]}
local gone = {}
local created = ARGV[12]
-- Checked, so announced: the index entry and the run appear together (one server holds both).
if step == 0 and ARGV[18] ~= '' then
  local _
  _, created = announce(4, ARGV[18], ARGV[19])
end
if step == 0 and created ~= '' then fields[#fields + 1] = 'created'; fields[#fields + 1] = created end
if step == 0 and ARGV[16] ~= '' then fields[#fields + 1] = 'queue'; fields[#fields + 1] = ARGV[16] end
if ARGV[9] ~= '' then fields[#fields + 1] = 'owner'; fields[#fields + 1] = ARGV[9] else gone[#gone + 1] = 'owner' end
if ARGV[10] ~= '' then fields[#fields + 1] = 'lease'; fields[#fields + 1] = ARGV[10] else gone[#gone + 1] = 'lease' end
write(fields, 22, members, calls)
if #gone > 0 then redis.call('HDEL', KEYS[1], unpack(gone)) end
-- A run waiting on a queue gets no TTL (a fresh hash has none): like a paused run, it may wait
-- longer than that. Its first save once admitted sets it.
if step > 0 or ARGV[16] == '' then touch(ARGV[4], tonumber(ARGV[2])) end
-- Ended: out of its flow's unfinished set, the due set and its queue's counts with the end itself.
-- Best effort, as the drop a Cluster sends after the end: the end is written, and an entry a
-- failure here leaves behind is what readers clean.
local s = ARGV[4]
if ARGV[18] ~= '' and s ~= 'running' and s ~= 'paused' and s ~= 'sleeping' then
  pcall(function()
    redis.call('ZREM', KEYS[4], ARGV[18])
    redis.call('ZREM', KEYS[8], ARGV[18])
    leave_queue(KEYS[9], ARGV[20], ARGV[18], false)
  end)
end
return {'ok'}
`;

/**
 * ARGV: 1 write token, 2 ttl, 3 segment, 4 head seal, 5 replication mode, 6 foreign call index, 7
 * count, 8.. calls.
 */
export const RECORD_LUA = `${RUN}
local members, calls = batch(7)
local head = read({'segment', 'status', 'calls', 'w', '${REPLICATION_FIELD}', '${LAST_CALL_FIELD}'})
if head[4] == ARGV[1] then return {'ok'} end
if not head[1] then return {'fenced', ARGV[3], false} end
local lost, stamp = replication_check(head[5], ARGV[5], '')
if lost then return lost end
local refused = check_calls(ARGV[3], head[1], head[2], tonumber(ARGV[6]), 7, #members, head[6], head[3])
if refused then return refused end
local n = #members
if n > 0 then
  write({'calls', tonumber(head[3] or 0) + n, 'w', ARGV[1], 'sealed', ARGV[4], '${REPLICATION_FIELD}', stamp}, 7, members, calls)
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
 * One superstep's call records: {member, sealed, member, sealed, ...}. ARGV: 1 superstep. Reads
 * only that superstep's entries (a range of the index), however long the run's history.
 */
export const CALLS_LUA = `
local members = redis.call('ZRANGEBYSCORE', KEYS[2], ARGV[1], ARGV[1])
local out = {}
for s = 1, #members, 1000 do
  local fields = {}
  for i = s, math.min(s + 999, #members) do fields[#fields + 1] = '${CALL_FIELD}' .. members[i] end
  local got = redis.call('HMGET', KEYS[1], unpack(fields))
  for j = 1, #got do
    -- A record lost from the hash is left out; the head's call count tells it is missing.
    if got[j] then
      out[#out + 1] = members[s + j - 1]
      out[#out + 1] = got[j]
    end
  end
end
return out
`;

/** The latest checkpoint: head columns and the sealed text of the head's step, read together. */
export const LATEST_LUA = `
local h = redis.call('HMGET', KEYS[1], 'step', 'flow', 'status', 'segment')
if not h[1] then return false end
-- A head whose checkpoint is gone has no latest checkpoint: the reader calls that corrupt.
local cp = redis.call('HGET', KEYS[1], '${CHECKPOINT_FIELD}' .. h[1])
if not cp then return false end
return {h[1], h[2], h[3], h[4], cp}
`;

/**
 * A release (a lease renewed to 0): the lease saved with the checkpoint goes to 0 too, or it
 * would still hold the run (a run's lease is the later of it and its owner's score). Only down: a
 * saved lease already earlier stays. Running runs only: a sleeping or paused run's `lease` is its
 * wake time or deadline. ARGV: owner, lease ms.
 */
export const RELEASE_LUA = `
local h = redis.call('HMGET', KEYS[1], 'owner', 'status', 'lease')
if h[1] ~= ARGV[1] or h[2] ~= 'running' then return 0 end
if h[3] and tonumber(h[3]) <= tonumber(ARGV[2]) then return 0 end
redis.call('HSET', KEYS[1], 'lease', ARGV[2])
return 1
`;

/**
 * An enqueue's placement, kept in its run hash once its queue took it (redis.heal.ts): only if the
 * hash is still there. ARGV: the placement JSON.
 */
export const PLACE_LUA = `
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], '${PLACEMENT_FIELD}', ARGV[1])
return 1
`;

/**
 * An admission kept in the admitted run's hash (redis.heal.ts), and its head read back: at step 0
 * (an admitted run not yet claimed) of a running run, not over another admitter's live lease (two
 * admissions of one run: the run lost its admission with `{P}` and was admitted again; the first
 * one's admitter drives it), for the admitter to drive. Past step 0 only where the hash has none:
 * an operator's mark (`runs restored`) moved the run on while it waited, and the field is what
 * tells a healing it was admitted since; whoever finds it due drives it. ARGV: the admitter ('' none),
 * its lease expiry ms ('0' none). Returns {1 if kept for the admitter to drive, then the head's fields}.
 */
export const ADMISSION_LUA = `${NOW}
local h = redis.call('HMGET', KEYS[1], ${HEAD_FIELDS.map((f) => `'${f}'`).join(', ')}, '${ADMISSION_FIELD}')
local n = ${HEAD_FIELDS.length}
local kept = 0
local step, status, trace = h[${HEAD_FIELDS.indexOf('step') + 1}], h[${HEAD_FIELDS.indexOf('status') + 1}], h[n + 1]
if step == '0' and status == 'running' then
  local free = true
  if trace then
    local sep = string.find(trace, '|', 1, true) or 0
    local owner = string.sub(trace, sep + 1)
    free = owner == ARGV[1] or (tonumber(string.sub(trace, 1, sep - 1)) or 0) <= now_ms()
  end
  if free then
    redis.call('HSET', KEYS[1], '${ADMISSION_FIELD}', ARGV[2] .. '|' .. ARGV[1])
    kept = 1
  end
elseif step and not trace and (status == 'running' or status == 'paused' or status == 'sleeping') then
  redis.call('HSET', KEYS[1], '${ADMISSION_FIELD}', ARGV[2] .. '|' .. ARGV[1])
end
local out = {kept}
for i = 1, n do out[i + 1] = h[i] end
return out
`;

/** Every field of the run hash: the head, every checkpoint and every call record. */
export const HISTORY_LUA = `
return redis.call('HGETALL', KEYS[1])
`;

/** Deletes every key of the run; returns {deleted count, flow, owner} for the index cleanup. */
export const DELETE_LUA = `${RUN}
local h = redis.call('HMGET', KEYS[1], 'flow', 'owner')
return {delete_run(), h[1], h[2]}
`;

export const REDIS_SCRIPTS = {
  aaSave: SAVE_LUA,
  aaRecord: RECORD_LUA,
  aaLatest: LATEST_LUA,
  aaCalls: CALLS_LUA,
  aaHistory: HISTORY_LUA,
  aaFailover: FAILOVER_LUA,
  aaDelete: DELETE_LUA,
  aaTouch: TOUCH_LUA,
  aaRelease: RELEASE_LUA,
  aaPlace: PLACE_LUA,
  aaAdmission: ADMISSION_LUA,
  aaIndexCreate: INDEX_CREATE_LUA,
  aaScanUnfinished: SCAN_UNFINISHED_LUA,
  aaScanRuns: SCAN_RUNS_LUA,
  aaIndexDrop: INDEX_DROP_LUA,
  aaScanDue: SCAN_DUE_LUA,
  aaIndexStamp: INDEX_STAMP_LUA,
  aaIndexRestore: INDEX_RESTORE_LUA,
  aaIndexStampSet: INDEX_STAMP_SET_LUA,
  aaEnqueue: ENQUEUE_LUA,
  aaAdmit: ADMIT_LUA,
  aaQueueRecount: QUEUE_RECOUNT_LUA,
  aaAppendStream: APPEND_STREAM_LUA,
  aaReadStream: READ_STREAM_LUA,
} as const;
