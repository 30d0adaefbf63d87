import { randomBytes } from 'node:crypto';
import {
  CheckpointStore,
  UNFINISHED,
  type CallRecord,
  type CheckpointRecord,
  type HistoryPage,
  type ListQuery,
  type ListUnfinishedOptions,
  type RunHead,
  type RunPage,
  type RunStatus,
  type SaveOptions,
} from '../checkpoint-store';
import {
  CALL_FIELD,
  CHECKPOINT_FIELD,
  COLUMNS_FIELD,
  HEAD_FIELDS,
  RedisKeys,
} from './redis.layout';
import {
  connectWithScripts,
  quitOrDrop,
  runScript,
  type RedisClient,
} from './redis.client';
import { guarded } from '../transient-errors';
import type { RedisClientLike } from './redis.client-like';
import { renewOwnedRuns, withOwnerLeases } from './redis.leases';
import {
  byCallKey,
  checkpointFromHash,
  pairs,
  toCalls,
  toCheckpoint,
  toHead,
} from './redis.rows';
import {
  pushCalls,
  refusal,
  type REDIS_SCRIPTS,
  type Reply,
} from './redis.scripts';

export type { RedisClientLike } from './redis.client-like';

export interface RedisCheckpointStoreOptions {
  /** Every key of a run expires this long after the run's last write; never while it is paused. */
  ttlSeconds?: number;
  /** Key namespace (tenant). No `{`, `}` or `:`. Default `aa`. */
  prefix?: string;
}

/** What an index scan returns: server time (ms), run ids (or id/score pairs), their born times. */
type Scan = [number, string[], Array<string | null>];

/**
 * A step-0 save must follow its index entry within half of this; index readers clean an entry
 * whose head is missing only once the entry is older than this (see `listUnfinished`).
 */
const STORE = 'RedisCheckpointStore';
const CREATE_WINDOW_MS = 60_000;
/** How late a step-0 save may land after its index entry (the save script's ARGV[14]). */
const HALF_CREATE_WINDOW = String(CREATE_WINDOW_MS / 2);

/**
 * Runs in Redis (one server or a Cluster), shared by any number of workers. Every write is one Lua
 * script on one run's keys (redis.scripts.ts); the key layout is in redis.layout.ts.
 * @publicApi
 */
export class RedisCheckpointStore extends CheckpointStore {
  readonly shared = true;
  readonly prefix: string;
  private readonly client: RedisClient;
  private readonly ttl: number;
  private readonly keys: RedisKeys;
  /** Write tokens: random per store instance, then counted (see `token`). */
  private readonly tokenBase = randomBytes(9).toString('base64');
  private writes = 0;

  constructor(
    connect: () => RedisClientLike,
    options: RedisCheckpointStoreOptions = {},
  ) {
    super();
    this.keys = new RedisKeys(options.prefix ?? 'aa');
    this.prefix = this.keys.prefix;
    this.ttl = Math.ceil(options.ttlSeconds ?? 0);
    this.client = connectWithScripts(connect);
  }

  async save(
    checkpoint: CheckpointRecord,
    options: SaveOptions = {},
  ): Promise<void> {
    const { runId, step, flow, status, segment } = checkpoint;
    const { owner, leaseExpiresAt: lease } = options;
    const keys = this.keys.run(runId);
    // Identifies this write, so a resend after a lost reply is recognised as already applied.
    const token = this.token();
    for (let attempt = 1; ; attempt++) {
      // Index first: a crash right after leaves an entry without a head (dropped by readers),
      // never a run that recovery cannot find.
      const [intent, created] =
        step === 0 ? await this.announce(runId, flow) : ['', ''];
      // One flat array of strings, built in place: this runs once per superstep, and spreads,
      // flatMap and ioredis's own number-to-string pass showed up in its CPU profile.
      // prettier-ignore
      const args = [
        token, String(this.ttl), String(step), status, String(segment), flow, checkpoint.sealed,
        JSON.stringify([flow, status, segment]), owner ?? '', lease == null ? '' : String(lease),
        options.expectCalls == null ? '' : String(options.expectCalls), created, intent,
        HALF_CREATE_WINDOW, options.head ?? '',
      ];
      pushCalls(args, runId, options.calls);
      const reply = (await this.script('aaSave', keys, args)) as Reply;
      if (reply[0] === 'late' && attempt < 3) continue;
      const refused = refusal(reply, runId, step);
      if (refused) throw refused;
      break;
    }
    if (!UNFINISHED.includes(status)) {
      // Only once the run has ended; a crash before this leaves an entry that readers clean.
      await this.drop([this.keys.unfinished(flow)], false, [runId, '*']);
    }
  }

  async recordCall(
    runId: string,
    segment: number,
    records: CallRecord[],
    head?: string,
  ): Promise<void> {
    const token = this.token();
    const args = [token, String(this.ttl), String(segment), head ?? ''];
    pushCalls(args, runId, records);
    const reply = await this.script('aaRecord', this.keys.run(runId), args);
    const refused = refusal(reply as Reply, runId);
    if (refused) throw refused;
  }

  /**
   * A token no other write carries: 72 random bits per store instance (fixed length) followed by
   * this instance's write count. Unique like a fresh random token per write, without asking the
   * system for randomness on every write.
   */
  private token(): string {
    return this.tokenBase + (++this.writes).toString(36);
  }

  async latest(runId: string): Promise<CheckpointRecord | undefined> {
    const r = await this.script('aaLatest', this.keys.run(runId), []);
    if (!r) return undefined;
    const [step, flow, status, segment, sealed] = r as [
      string,
      string,
      RunStatus,
      string,
      string,
    ];
    return toCheckpoint(runId, step, [flow, status, Number(segment)], sealed);
  }

  async head(runId: string): Promise<RunHead | undefined> {
    const [head] = await this.readHeadFields([runId]);
    // A second round trip only for an owned, unfinished run: its owner's lease key may be later.
    return head && (await this.withLeases([head]))[0];
  }

  async calls(runId: string, superstep: number): Promise<CallRecord[]> {
    const flat = (await this.script('aaCalls', this.keys.run(runId), [
      superstep,
    ])) as string[];
    return toCalls(runId, pairs(flat)).sort(byCallKey);
  }

  async history(runId: string): Promise<HistoryPage> {
    const flat = (await this.script(
      'aaHistory',
      this.keys.run(runId),
      [],
    )) as string[];
    const fields = new Map(pairs(flat));
    const checkpoints: CheckpointRecord[] = [];
    const callFields: Array<[string, string]> = [];
    for (const [field, sealed] of fields) {
      if (field.startsWith(CALL_FIELD))
        callFields.push([field.slice(CALL_FIELD.length), sealed]);
      if (!field.startsWith(CHECKPOINT_FIELD)) continue;
      const step = field.slice(CHECKPOINT_FIELD.length);
      const cols = fields.get(COLUMNS_FIELD + step);
      checkpoints.push(checkpointFromHash(runId, step, cols, sealed));
    }
    const calls = toCalls(runId, callFields);
    checkpoints.sort((a, b) => a.step - b.step);
    return { checkpoints, calls: calls.sort(byCallKey) };
  }

  async delete(runId: string): Promise<boolean> {
    const [deleted, flow] = (await this.script(
      'aaDelete',
      this.keys.run(runId),
      [],
    )) as Reply;
    if (!deleted) return false;
    const sets = [this.keys.runs];
    if (flow != null) sets.push(this.keys.unfinished(String(flow)));
    await this.drop(sets, true, [runId, '*']);
    return true;
  }

  /**
   * Pages through the flow's index by run id. Entries whose head has ended or is another flow's
   * are skipped and removed. So are entries whose head is missing (expired, or a crash between
   * the index write and the step-0 script), but those are removed only once older than
   * CREATE_WINDOW_MS: a younger one may be a creation in flight, and the save script refuses a
   * creation that late, so removing an old one can never hide a run from recovery.
   */
  async listUnfinished(
    flow: string,
    options: ListUnfinishedOptions = {},
  ): Promise<RunHead[]> {
    const { leaseExpiredBefore, after, limit = 100 } = options;
    const chunk = Math.min(Math.max(limit, 32), 500);
    const unfinished = this.keys.unfinished(flow);
    const out: RunHead[] = [];
    for (let cursor = after; out.length < limit;) {
      const min = cursor === undefined ? '-' : `(${cursor}`;
      const scan = (await this.script(
        'aaScanUnfinished',
        [unfinished, this.keys.born],
        [min, chunk],
      )) as Scan;
      const ids = scan[1];
      if (ids.length === 0) break;
      const { heads, gone } = await this.readHeads(scan, ids);
      const live: RunHead[] = [];
      const ended: string[] = [];
      heads.forEach((head, i) => {
        if (head?.flow === flow && UNFINISHED.includes(head.status))
          live.push(head);
        else if (head) ended.push(ids[i]!, scan[2][i] ?? '');
      });
      await Promise.all([
        this.drop([unfinished], false, ended),
        this.drop([unfinished, this.keys.runs], true, gone),
      ]);
      for (const head of await this.withLeases(live)) {
        const lease = head.leaseExpiresAt;
        const expired =
          leaseExpiredBefore === undefined ||
          lease === undefined ||
          lease < leaseExpiredBefore;
        if (expired && out.length < limit) out.push(head);
      }
      if (ids.length < chunk) break;
      cursor = ids[ids.length - 1];
    }
    return out;
  }

  /** Newest first by creation sequence; filters read the heads, so a page may span index chunks. */
  async list(query: ListQuery = {}): Promise<RunPage> {
    const { flow, status, before, limit = 50 } = query;
    const chunk = Math.min(Math.max(limit + 1, 32), 500);
    const runs = this.keys.runs;
    const found: Array<{ head: RunHead; score: string }> = [];
    for (
      let max = before === undefined ? '+inf' : `(${before}`;
      found.length <= limit;
    ) {
      const scan = (await this.script(
        'aaScanRuns',
        [runs, this.keys.born],
        [max, chunk],
      )) as Scan;
      const page = scan[1];
      const ids = page.filter((_, i) => i % 2 === 0);
      if (ids.length === 0) break;
      const { heads, gone } = await this.readHeads(scan, ids);
      heads.forEach((head, i) => {
        if (
          head &&
          (flow === undefined || head.flow === flow) &&
          (status === undefined || head.status === status)
        ) {
          found.push({ head, score: page[2 * i + 1]! });
        }
      });
      await this.drop([runs], true, gone);
      if (ids.length < chunk) break;
      max = `(${page[page.length - 1]}`;
    }
    const shown = found.slice(0, limit);
    const last = shown[shown.length - 1];
    return {
      runs: await this.withLeases(shown.map((f) => f.head)),
      ...(found.length > limit && last && { next: last.score }),
    };
  }

  /**
   * One owner's renewal, one write: the owner's sorted set of driven runs gets each of `runIds`
   * with the new expiry as its score (ZADD, additive: several runners of one worker id, e.g. a
   * flow runner and tool loops in one process, each renew their own runs without dropping the
   * others'), and entries that expired long ago are pruned. A run's lease is the later of the one
   * saved with its checkpoint and its score in its owner's set. With a TTL, the driven runs' keys
   * are refreshed too, so a long superstep cannot expire a live run.
   */
  async renewLeases(
    owner: string,
    leaseExpiresAt: number,
    runIds: readonly string[],
  ): Promise<number> {
    const [, heads] = await Promise.all([
      renewOwnedRuns(this.client, this.keys, owner, leaseExpiresAt, runIds),
      Promise.all(
        runIds.map((id) =>
          this.client.hmget(this.keys.runHash(id), 'owner', 'status'),
        ),
      ),
      ...(this.ttl > 0
        ? runIds.map((id) =>
            this.script('aaTouch', this.keys.run(id), [this.ttl]),
          )
        : []),
      ...(leaseExpiresAt === 0
        ? runIds.map((id) =>
            this.script('aaRelease', this.keys.run(id), [
              owner,
              leaseExpiresAt,
            ]),
          )
        : []),
    ]);
    return heads.filter(
      ([holder, status]) =>
        holder === owner && UNFINISHED.includes(status as RunStatus),
    ).length;
  }

  /** QUIT, or drop the connection when the server does not answer (see `quitOrDrop`). */
  close(): Promise<void> {
    return quitOrDrop(this.client);
  }

  private script(
    name: keyof typeof REDIS_SCRIPTS,
    keys: readonly string[],
    args: Array<string | number>,
  ): Promise<unknown> {
    return guarded(STORE, undefined, () =>
      runScript(this.client, name, keys, args),
    );
  }

  /** Adds the run to the flow's unfinished index and the list; returns [server ms, created]. */
  private async announce(
    runId: string,
    flow: string,
  ): Promise<[string, string]> {
    const keys = this.keys.announce(flow);
    const [at, created] = (await this.script('aaIndexCreate', keys, [
      runId,
    ])) as Reply;
    return [String(at), String(created)];
  }

  /** Removes (runId, born seen) entries from index sets; `forget` also drops their born time. */
  private async drop(
    sets: string[],
    forget: boolean,
    entries: string[],
  ): Promise<void> {
    if (entries.length === 0) return;
    await this.script(
      'aaIndexDrop',
      [this.keys.born, ...sets],
      [forget ? '1' : '0', ...entries],
    );
  }

  /**
   * Heads of a scanned index chunk, sent together (one round trip, across Cluster nodes too), and
   * the (runId, born) entries whose head is missing and old enough to remove.
   */
  private async readHeads([now, , born]: Scan, ids: string[]) {
    const heads = await this.readHeadFields(ids);
    const gone = ids.flatMap((id, i) => {
      const at = born[i];
      const old = at == null || now - Number(at) >= CREATE_WINDOW_MS;
      return heads[i] === undefined && old ? [id, at ?? ''] : [];
    });
    return { heads, gone };
  }

  /**
   * The heads of `ids`, sent together (one round trip, across Cluster nodes too): only the head's
   * fields of each run hash, which also holds the run's checkpoints and call records.
   */
  private async readHeadFields(
    ids: readonly string[],
  ): Promise<Array<RunHead | undefined>> {
    const raw = await guarded(STORE, undefined, () =>
      Promise.all(
        ids.map((id) =>
          this.client.hmget(this.keys.runHash(id), ...HEAD_FIELDS),
        ),
      ),
    );
    return raw.map((values, i) => toHead(ids[i]!, values));
  }

  /** The heads with their owners' renewed leases (see redis.leases.ts). */
  private withLeases(heads: RunHead[]): Promise<RunHead[]> {
    return withOwnerLeases(this.client, this.keys, heads);
  }
}
