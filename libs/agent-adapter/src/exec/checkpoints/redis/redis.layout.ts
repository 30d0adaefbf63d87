/**
 * The Redis store's key layout, in one place: the store, the key lists its scripts get and the
 * benches that read the store raw all take their key and field names from here.
 *
 * P = prefix (a tenant).
 * - A run's keys, tagged `{P:runId}` (one slot per run, so every write is one Lua script):
 *   - `{P:runId}:run` hash: the head's fields (`HEAD_FIELDS`, among them `sealed`, the head seal;
 *     plus `w`, the last write's token, `created`, the run's place in `{P}:runs`, and a queued
 *     run's `placement` and `admission`: redis.heal.ts), every checkpoint (`cp:<step>` → sealed,
 *     `cols:<step>` → its columns) and every call record (`call:<superstep>:<segment>:<seq>` →
 *     sealed). A save reads what it checks with one HMGET and writes with one HSET.
 *   - `{P:runId}:index` sorted set: those `<superstep>:<segment>:<seq>` by superstep, so one
 *     superstep's records are a range read.
 *   - `{P:runId}:stream` hash: the run's stream entries (see `RunKeys`). Three keys however long
 *     the run: a TTL refresh is O(1).
 * - Index keys, tagged `{P}` so one script updates them together: `{P}:unfinished:<flow>` sorted
 *   set (score 0, paged by run id), `{P}:runs` sorted set (by a creation sequence, `{P}:seq`),
 *   `{P}:born` hash (run id → when its step 0 was announced), `{P}:due` sorted set (each
 *   unfinished run → when it may be due: its lease expiry as last renewed, its wake time, its
 *   deadline; see redis.due.ts), `{P}:indexed` string (the replication id of the `{P}` master
 *   under which these were last known whole: see redis.heal.ts), `{P}:promoted` hash (the
 *   promotion log: the replication ids masters were promoted from; see redis.failover.ts).
 * - `{P:owner:<owner>}:leases` sorted set (run id → lease expiry ms) of the runs an owner drives:
 *   one write renews them all, and several runners of one worker id add to it side by side.
 * - Queues, tagged `{P}` too: `{P}:queued` hash (run id → its queue's name) and, per queue,
 *   `{P}:q:<queue>:<part>` (`QUEUE_PARTS`): `delayed` sorted set (waiting run → availableAt),
 *   `ready` sorted set (score priority, member `<availableAt>:<seq>:<runId>`, both fixed width: an
 *   equal score sorts by member, so the set is in admission order), `active` sorted set (admitted,
 *   unfinished run → admittedAt), `keys` hash (concurrency key → its active count), `admitted`
 *   sorted set (run → admittedAt: the rate window), `dedupe` hash (dedupe key → run id), `runs`
 *   hash (run id → its placement, JSON: see redis.queues.ts), `ended` string (when an admitted run
 *   last left `active` by ending: no admission is stamped before it). The run hash names its queue
 *   (`queue` field). Why `{P}` and not a tag per queue: an admission must count the queue, admit,
 *   and enter the admitted runs in `{P}:due` and `{P}:unfinished:<flow>` in one script, so in one
 *   slot; the scripts that end or drop a run (in `{P}` already) clean its queue in the same call.
 *   Those scripts name a queue's keys (and `{P}:unfinished:<flow>` of an admitted run's flow) from
 *   the queue's name they read, by the prefixes below: the same `{P}` tag, so the same slot.
 */

import { DurableSetupError } from '../../../errors';
import { Messages } from '../../../errors/messages';

/** A queued run's placement as its enqueue gave it (JSON), kept in its hash (redis.heal.ts). */
export const PLACEMENT_FIELD = 'placement';

/**
 * A queued run's admission, kept in its hash by its admitter before it drives the run
 * (`<lease expiry ms>|<owner>`): the healing counts a run at step 0 that has one under a live
 * lease as admitted, not as waiting, and one past step 0 if it has one or another sign of an
 * admission (an operator's mark moves a waiting run past step 0: redis.heal.ts). The admission
 * itself is in `{P}`, which a failover can lose.
 */
export const ADMISSION_FIELD = 'admission';

/**
 * An admitter drives only the runs whose admission it kept in their hashes within this long of
 * sending the admission; a healing reads the hashes of the runs it found waiting this long after
 * it saw the `{P}` master change. So every lost admission whose run is driven is seen by then.
 * Short, as a healing that finds runs waiting waits it out; a round trip or two is far less, and
 * a late admitter only hands its runs to the next look.
 */
export const ADMISSION_TRACE_MS = 250;

/** The head field holding the key of the run's last call record ('segment:superstep:seq'). */
export const LAST_CALL_FIELD = 'lastCall';

/** The head's fields of the run hash, in the order the store reads them (HMGET). */
export const HEAD_FIELDS = [
  'step',
  'flow',
  'status',
  'segment',
  'updatedAt',
  'calls',
  'sealed',
  'owner',
  'lease',
  'queue',
  LAST_CALL_FIELD,
] as const;

/** The keys of one queue, `{P}:q:<queue>:<part>` (see the header). */
export const QUEUE_PARTS = [
  'delayed',
  'ready',
  'active',
  'keys',
  'admitted',
  'dedupe',
  'runs',
  'ended',
] as const;

export type QueueKeys = Record<(typeof QUEUE_PARTS)[number], string>;

/** Field prefixes of the run hash: `cp:<step>`, `cols:<step>`, `call:<superstep>:<segment>:<seq>`. */
export const CHECKPOINT_FIELD = 'cp:';
export const COLUMNS_FIELD = 'cols:';
export const CALL_FIELD = 'call:';

/** The run hash's field holding the sealed checkpoint of `step`. */
export function checkpointField(step: number | string): string {
  return CHECKPOINT_FIELD + String(step);
}

/**
 * A run's keys in the order every run script takes them as KEYS: the run hash, the call index,
 * the stream hash (`n` its entry count, `drop` the first offset kept, `s:<offset>` an entry,
 * `ss:<superstep>` the first offset of a superstep's entries: they are contiguous).
 */
export type RunKeys = [run: string, index: string, stream: string];

/** Every key of one tenant (prefix), checked once. */
export class RedisKeys {
  /** Index keys, tagged `{prefix}` so one script can update them together. */
  readonly runs: string;
  readonly born: string;
  readonly seq: string;
  /** Due work: every unfinished run by when it may be due (redis.due.ts). */
  readonly due: string;
  /** Run id → the name of its queue, for the scripts that drop a run from every index. */
  readonly queued: string;
  /** The replication id under which the indexes were last known whole (redis.heal.ts). */
  readonly indexed: string;
  /** Replication id a master was promoted from → the id it was promoted to (redis.failover.ts). */
  readonly promoted: string;
  /** `queue(name)` keys are this, the name, `:`, the part; the scripts build them the same way. */
  readonly queuePrefix: string;

  constructor(readonly prefix: string) {
    if (!/^[^{}:]+$/.test(prefix)) {
      throw new DurableSetupError(Messages.redisPrefix(prefix));
    }
    this.runs = `{${prefix}}:runs`;
    this.born = `{${prefix}}:born`;
    this.seq = `{${prefix}}:seq`;
    this.due = `{${prefix}}:due`;
    this.queued = `{${prefix}}:queued`;
    this.indexed = `{${prefix}}:indexed`;
    this.promoted = `{${prefix}}:promoted`;
    this.queuePrefix = `{${prefix}}:q:`;
  }

  /** One queue's keys. A part has no `:`, so two queues' keys never meet, whatever their names. */
  queue(name: string): QueueKeys {
    const keys = {} as QueueKeys;
    for (const part of QUEUE_PARTS)
      keys[part] = `${this.queuePrefix}${name}:${part}`;
    return keys;
  }

  /** The KEYS of a run script: every key of the run, in one slot. */
  run(runId: string): RunKeys {
    const tag = this.tag(runId);
    return [`${tag}:run`, `${tag}:index`, `${tag}:stream`];
  }

  /**
   * A key in the run's slot that the `replicas` option writes to confirm, with WAIT, what the
   * slot holds (redis.replicas.ts); it expires on its own.
   */
  replicaMarker(runId: string): string {
    return `${this.tag(runId)}:acked`;
  }

  /** The same for the tenant's `{P}` slot (indexes, queues): see `RunWrites.confirmTenant`. */
  get tenantMarker(): string {
    return `{${this.prefix}}:acked`;
  }

  /** The run hash alone (head, checkpoints, call records). */
  runHash(runId: string): string {
    return `${this.tag(runId)}:run`;
  }

  unfinished(flow: string): string {
    return `{${this.prefix}}:unfinished:${flow}`;
  }

  owned(owner: string): string {
    return `{${this.prefix}:owner:${owner}}:leases`;
  }

  /** The KEYS of an enqueue's index write (ENQUEUE_LUA). */
  enqueue(queue: string): string[] {
    const q = this.queue(queue);
    // prettier-ignore
    return [this.queued, q.dedupe, q.delayed, q.runs, this.runs, this.seq, this.born, this.indexed];
  }

  /** The KEYS of the step-0 announcement (INDEX_CREATE_LUA): unfinished(flow), born, runs, seq, due. */
  announce(flow: string): string[] {
    return [this.unfinished(flow), this.born, this.runs, this.seq, this.due];
  }

  private tag(runId: string): string {
    if (/[{}]/.test(runId)) {
      throw new TypeError(Messages.redisRunId(runId));
    }
    return `{${this.prefix}:${runId}}`;
  }
}
