/**
 * Lua of the Redis store's run streams (run scripts: KEYS = `RedisKeys.run`, the stream hash is
 * KEYS[3]; its fields are described at `RunKeys`), and the encoding of an entry's value.
 */
import type { StreamRecord } from '../checkpoint-store';

/**
 * Fenced append. ARGV: 1 segment, 2 entries kept, 3 the entries' superstep, 4 count, then one
 * value per entry. Refuses (`fenced`) unless the run is running in that segment. The stream hash
 * takes the run hash's expiry as it stands (a waiting run's has none). Returns {'ok', first offset}.
 */
export const APPEND_STREAM_LUA = `
local h = redis.call('HMGET', KEYS[1], 'segment', 'status')
if not h[1] then return {'fenced', ARGV[1], false} end
if tonumber(h[1]) ~= tonumber(ARGV[1]) or h[2] ~= 'running' then return {'fenced', ARGV[1], h[1]} end
local s = redis.call('HMGET', KEYS[3], 'n', 'drop')
local first, kept_from = tonumber(s[1] or 0), tonumber(s[2] or 0)
local n = tonumber(ARGV[4])
local fields = {'n', first + n}
for i = 1, n do
  fields[#fields + 1] = 's:' .. (first + i - 1)
  fields[#fields + 1] = ARGV[4 + i]
end
for c = 1, #fields, 2000 do
  redis.call('HSET', KEYS[3], unpack(fields, c, math.min(c + 1999, #fields)))
end
redis.call('HSETNX', KEYS[3], 'ss:' .. ARGV[3], first)
-- Drop the oldest beyond the newest ARGV[2], never the running superstep's (from its first on).
local current = tonumber(redis.call('HGET', KEYS[3], 'ss:' .. ARGV[3]))
local upto = math.min(first + n - tonumber(ARGV[2]), current)
if upto > kept_from then
  local gone = {}
  for o = kept_from, upto - 1 do gone[#gone + 1] = 's:' .. o end
  for c = 1, #gone, 1000 do
    redis.call('HDEL', KEYS[3], unpack(gone, c, math.min(c + 999, #gone)))
  end
  redis.call('HSET', KEYS[3], 'drop', upto)
end
local ttl = redis.call('PTTL', KEYS[1])
if ttl > 0 then redis.call('PEXPIRE', KEYS[3], ttl) else redis.call('PERSIST', KEYS[3]) end
return {'ok', first}
`;

/**
 * Entries from ARGV[1] on (from the first of superstep ARGV[2] on, unless ''), at most ARGV[3]:
 * {offset, value, offset, value, ...}. Dropped entries are not there.
 */
export const READ_STREAM_LUA = `
local s = redis.call('HMGET', KEYS[3], 'n', 'drop')
local n = tonumber(s[1] or 0)
local from = math.max(tonumber(ARGV[1]), tonumber(s[2] or 0))
if ARGV[2] ~= '' then
  local first = redis.call('HGET', KEYS[3], 'ss:' .. ARGV[2])
  if not first then return {} end
  from = math.max(from, tonumber(first))
end
local to = math.min(n, from + tonumber(ARGV[3])) - 1
if to < from then return {} end
local fields = {}
for o = from, to do fields[#fields + 1] = 's:' .. o end
local got = redis.call('HMGET', KEYS[3], unpack(fields))
local out = {}
for i = 1, #got do
  if got[i] then
    out[#out + 1] = tostring(from + i - 1)
    out[#out + 1] = got[i]
  end
end
return out
`;

/** An entry's value in the stream hash: `<superstep>:<place length>:<place><sealed>`. */
export function streamValue(e: Omit<StreamRecord, 'offset'>): string {
  return `${e.superstep}:${e.place.length}:${e.place}${e.sealed}`;
}

/** A value read back, as a record; undefined when it is not one `streamValue` made. */
export function fromStreamValue(
  runId: string,
  offset: number,
  value: string,
): StreamRecord | undefined {
  const m = /^(\d+):(\d+):/.exec(value);
  if (!m) return undefined;
  const start = m[0].length;
  const end = start + Number(m[2]);
  if (end > value.length) return undefined;
  return {
    runId,
    offset,
    superstep: Number(m[1]),
    place: value.slice(start, end),
    sealed: value.slice(end),
  };
}

/**
 * READ_STREAM_LUA's reply (offset, value pairs) as records. A value that is not an entry's still
 * comes back, to fail its signature check loudly. With `superstep`: that superstep's entries only
 * (contiguous: one superstep's end where the next one's begin).
 */
export function streamEntries(
  runId: string,
  flat: readonly string[],
  superstep: number | undefined,
): StreamRecord[] {
  const out: StreamRecord[] = [];
  for (let i = 0; i + 1 < flat.length; i += 2) {
    const offset = Number(flat[i]);
    const value = flat[i + 1]!;
    const r = fromStreamValue(runId, offset, value) ?? {
      runId,
      offset,
      superstep: superstep ?? -1,
      place: '',
      sealed: value,
    };
    if (superstep !== undefined && r.superstep !== superstep) break;
    out.push(r);
  }
  return out;
}
