/**
 * Failover detection for the run scripts. Redis replicates asynchronously: a master acknowledges a
 * write before its replica has it, so when the master dies and the replica is promoted, the last
 * writes it acknowledged may be gone. For a run that can be a call's `started` record whose tool
 * then ran: the surviving run looks as if the call never started, and recovery would run it again.
 *
 * What survives tells: every run write stamps the run hash (`repl`) with the replication id of the
 * master it was written on (`master_replid`, read in the script) and whether the store confirmed
 * it on replicas (WAIT, `replicas` option). A promoted replica starts a new replication id and
 * keeps the old one as `master_replid2`; a restart starts a new id with `master_replid2` zeroed.
 * So a write that finds the run stamped with another id, on a master that came from a promotion,
 * by a write that was not confirmed on replicas, may be missing writes after it: refused
 * (`failover`, FailoverNeedsDecision) unless it ends the run (nothing runs after an end) or an
 * operator accepted what the store holds (`rerunInDoubt`). What is found is kept: the stamp becomes
 * `<lost id>:L`, refused whatever the master's ids say from then on.
 *
 * A restart of the promoted master zeroes `master_replid2` (the evidence) before anything may have
 * touched a run (a sleeping run, a paused one): its stamp's id is then neither the master's id nor
 * the one it was promoted from, as after any restart. So the tenant keeps a promotion log,
 * `{P}:promoted` (an id a master was promoted from → the id it was promoted to): every due look
 * records what each master's INFO shows (at most once a second), and so does a refusal
 * (redis.promotions.ts). A write that finds an id it cannot place (`unfamiliar`) asks the log and
 * is sent again with the answer: refused and marked if the id was promoted from, stamped anew if
 * not (a plain restart: its data is the master's own). One round trip more for a run's first
 * write after a restart, none otherwise. Not seen: a promotion and a restart with no look between them, and a restart's own
 * loss (that is the persistence settings': appendfsync always loses nothing).
 */

/**
 * The run hash's field holding the stamp: `<replication id>:<a|w>` (async, or WAIT-confirmed), or
 * `<replication id>:L` once a failover that may have lost the run's writes was found.
 */
export const REPLICATION_FIELD = 'repl';

/**
 * The write's mode, one script argument: `a` (not confirmed on replicas) or `w` (the store waits
 * for them); `!` when an operator accepted writes a failover may have lost, else `.`; then, for a
 * write sent again after an `unfamiliar` answer, the log's verdict on that id: `-<id>` (a master
 * was promoted from it) or `+<id>` (none recorded).
 */
export function replicationMode(
  waits: boolean,
  acceptLost = false,
  verdict = '',
): string {
  return (waits ? 'w' : 'a') + (acceptLost ? '!' : '.') + verdict;
}

/**
 * Lua: `replication_ids()` → the replication id of the script's master now (`master_replid`) and
 * the one it was promoted from (`master_replid2`, zeros if none), from one INFO call.
 */
export const REPLICATION_IDS = `
local function replication_ids()
  local info = redis.call('INFO', 'replication')
  return string.match(info, 'master_replid:(%x+)') or '', string.match(info, 'master_replid2:(%x+)') or ''
end
`;

/**
 * Lua: `replication_check(stored stamp, mode, new status)` → refusal or nil, and the new stamp. A
 * refusal (`{'failover', lost id, current id, promoted from}`) marks the run hash (KEYS[1]) found;
 * `{'unfamiliar', id, current id}` asks the client for the promotion log's verdict (see above).
 */
export const REPLICATION_LUA = `${REPLICATION_IDS}
local function replication_check(stored, mode, status)
  local current, previous = replication_ids()
  local stamp = current .. ':' .. string.sub(mode, 1, 1)
  if not stored or string.sub(mode, 2, 2) == '!' or status == 'done' or status == 'failed' then
    return nil, stamp
  end
  local id, was = string.match(stored, '^(%x*):(%a)$')
  if not id or (id == current and was ~= 'L') or was == 'w' then return nil, stamp end
  local promoted = previous ~= '' and not string.match(previous, '^0+$')
  if was ~= 'L' and not promoted then
    if string.sub(mode, 4) ~= id then return {'unfamiliar', id, current}, nil end
    if string.sub(mode, 3, 3) == '+' then return nil, stamp end
  end
  if was ~= 'L' then redis.call('HSET', KEYS[1], '${REPLICATION_FIELD}', id .. ':L') end
  return {'failover', id, current, promoted and previous or ''}, nil
end
`;

/**
 * KEYS: the run hash. ARGV: 1 the mode (a verdict, see above). `{'failover', ...}` when a write to
 * the run now would be refused for a failover, `{'unfamiliar', ...}`, else false. Writes only the
 * mark of a failover it finds.
 */
export const FAILOVER_LUA = `${REPLICATION_LUA}
local h = redis.call('HMGET', KEYS[1], 'status', '${REPLICATION_FIELD}')
local lost = replication_check(h[2] or nil, ARGV[1], h[1] or '')
return lost or false
`;
