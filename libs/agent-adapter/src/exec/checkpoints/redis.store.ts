import { randomBytes } from 'node:crypto';
// Type-only: the user's factory creates the client, so `require('agent-adapter')` never loads ioredis.
import type { Cluster, Redis } from 'ioredis';
import { CheckpointConflict } from '../../errors';
import { Messages } from '../../errors/messages';
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
} from './checkpoint-store';
import { checkpointFromHash, toCheckpoint } from './redis.rows';
import { REDIS_SCRIPTS } from './redis.scripts';

export interface RedisCheckpointStoreOptions {
  /** Every key of a run expires this long after the run's last write; never while it is paused. */
  ttlSeconds?: number;
  /** Key namespace (tenant). No `{`, `}` or `:`. Default `aa`. */
  prefix?: string;
}

type Client = Redis | Cluster;

/**
 * An ioredis client (`new Redis(url)` or `new Cluster(nodes)`), typed by the two methods the
 * store needs at construction so these typings do not require ioredis to be installed.
 * @publicApi
 */
export interface RedisClientLike {
  defineCommand(
    name: string,
    definition: { lua: string; numberOfKeys?: number },
  ): void;
  quit(): Promise<unknown>;
}
type Reply = Array<string | number | null>;
/** What an index scan returns: server time (ms), run ids (or id/score pairs), their born times. */
type Scan = [number, string[], Array<string | null>];

/**
 * A step-0 save must follow its index entry within half of this; index readers clean an entry
 * whose head is missing only once the entry is older than this (see `listUnfinished`).
 */
const CREATE_WINDOW_MS = 60_000;
/** How late a step-0 save may land after its index entry (the save script's ARGV[14]). */
const HALF_CREATE_WINDOW = String(CREATE_WINDOW_MS / 2);
/** The run hash's head fields (the rest of the hash is checkpoints and call records). */
const HEAD_FIELDS = [
  'step',
  'flow',
  'status',
  'segment',
  'updatedAt',
  'calls',
  'owner',
  'lease',
] as const;
/** Owner lease keys and owned-run sets outlive the lease they carry by this much. */
const OWNER_KEEP_MS = 24 * 3600_000;

/**
 * Runs in Redis (one server or a Cluster), shared by any number of workers.
 *
 * Key layout (P = prefix):
 * - `{P:runId}:run` hash: the head's fields (`step`, `status`, `segment`, `flow`, `updatedAt`,
 *   `calls`, `owner`, `lease`, ...), every checkpoint (`cp:<step>` → sealed, `cols:<step>` → its
 *   columns) and every call record (`call:<superstep>:<segment>:<seq>` → sealed); and
 *   `{P:runId}:index`, a sorted set of those `<superstep>:<segment>:<seq>` by superstep. One
 *   slot per run, so every write is one Lua script, which reads what it checks with one HMGET and
 *   writes with one HSET; two keys however long the run, so a TTL refresh costs the same on every
 *   write.
 * - `{P}:unfinished:<flow>` sorted set (score 0, paged by run id), `{P}:runs` sorted set (by a
 *   creation sequence, `{P}:seq`), `{P}:born` hash (run id → when its step 0 was announced).
 * - `{P:owner:<owner>}:leases` sorted set (run id → lease expiry ms) of the runs an owner drives:
 *   one write renews them all, and several runners of one worker id add to it side by side.
 * @publicApi
 */
export class RedisCheckpointStore extends CheckpointStore {
  readonly shared = true;
  readonly prefix: string;
  private readonly client: Client;
  private readonly ttl: number;
  /** Index keys, tagged `{prefix}` so one script can update them together. */
  private readonly runs: string;
  private readonly born: string;
  private readonly seq: string;
  /** Write tokens: random per store instance, then counted (see `token`). */
  private readonly tokenBase = randomBytes(9).toString('base64');
  private writes = 0;

  constructor(
    connect: () => RedisClientLike,
    options: RedisCheckpointStoreOptions = {},
  ) {
    super();
    this.prefix = options.prefix ?? 'aa';
    if (!/^[^{}:]+$/.test(this.prefix)) {
      throw new Error(
        `RedisCheckpointStore: prefix "${this.prefix}" must be non-empty, without "{", "}" or ":" (they would break the hash tags that keep a run in one slot, or let two tenants share keys).`,
      );
    }
    this.runs = `{${this.prefix}}:runs`;
    this.born = `{${this.prefix}}:born`;
    this.seq = `{${this.prefix}}:seq`;
    this.ttl = Math.ceil(options.ttlSeconds ?? 0);
    this.client = connect() as Client;
    for (const [name, lua] of Object.entries(REDIS_SCRIPTS)) {
      this.client.defineCommand(name, { lua });
    }
  }

  async save(
    checkpoint: CheckpointRecord,
    options: SaveOptions = {},
  ): Promise<void> {
    const { runId, step, flow, status, segment } = checkpoint;
    const { owner, leaseExpiresAt: lease } = options;
    const keys = this.runKeys(runId);
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
        HALF_CREATE_WINDOW,
      ];
      pushCalls(args, runId, options.calls);
      const reply = (await this.script('aaSave', keys.guarded, args)) as Reply;
      if (reply[0] === 'late' && attempt < 3) continue;
      this.check(reply, runId, step);
      break;
    }
    if (!UNFINISHED.includes(status)) {
      // Only once the run has ended; a crash before this leaves an entry that readers clean.
      await this.drop([this.unfinishedKey(flow)], false, [runId, '*']);
    }
  }

  async recordCall(
    runId: string,
    segment: number,
    records: CallRecord[],
  ): Promise<void> {
    const keys = this.runKeys(runId);
    const token = this.token();
    const args = [token, String(this.ttl), String(segment)];
    pushCalls(args, runId, records);
    const reply = await this.script('aaRecord', keys.list, args);
    this.check(reply as Reply, runId);
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
    const keys = this.runKeys(runId);
    const r = await this.script('aaLatest', keys.guarded, []);
    if (!r) return undefined;
    if ((r as Reply)[0] === 'layout') throw this.earlierLayout(runId);
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
    if (!head && (await this.earlierLayoutStatus([runId]))[0] !== null)
      throw this.earlierLayout(runId);
    // A second round trip only for an owned, unfinished run: its owner's lease key may be later.
    return head && (await this.withLeases([head]))[0];
  }

  async calls(runId: string, superstep: number): Promise<CallRecord[]> {
    const flat = (await this.script('aaCalls', this.runKeys(runId).list, [
      superstep,
    ])) as string[];
    return toCalls(runId, pairs(flat)).sort(byCallKey);
  }

  async history(runId: string): Promise<HistoryPage> {
    const keys = this.runKeys(runId);
    const flat = (await this.script('aaHistory', keys.list, [])) as string[];
    const fields = new Map(pairs(flat));
    const checkpoints: CheckpointRecord[] = [];
    const callFields: Array<[string, string]> = [];
    for (const [field, sealed] of fields) {
      if (field.startsWith('call:')) callFields.push([field.slice(5), sealed]);
      if (!field.startsWith('cp:')) continue;
      const step = field.slice(3);
      const cols = fields.get(`cols:${step}`);
      checkpoints.push(checkpointFromHash(runId, step, cols, sealed));
    }
    const calls = toCalls(runId, callFields);
    checkpoints.sort((a, b) => a.step - b.step);
    return { checkpoints, calls: calls.sort(byCallKey) };
  }

  async delete(runId: string): Promise<boolean> {
    const keys = this.runKeys(runId);
    const reply = (await this.script('aaDelete', keys.guarded, [])) as Reply;
    if (reply[0] === 'layout') throw this.earlierLayout(runId);
    const [deleted, flow] = reply;
    if (!deleted) return false;
    const sets = [this.runs];
    if (flow != null) sets.push(this.unfinishedKey(String(flow)));
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
    const unfinished = this.unfinishedKey(flow);
    const out: RunHead[] = [];
    for (let cursor = after; out.length < limit;) {
      const min = cursor === undefined ? '-' : `(${cursor}`;
      const scan = (await this.script(
        'aaScanUnfinished',
        [unfinished, this.born],
        [min, chunk],
      )) as Scan;
      const ids = scan[1];
      if (ids.length === 0) break;
      const { heads, gone, earlier } = await this.readHeads(scan, ids);
      // A run this version cannot read must not be left behind unrecovered without a word.
      for (const [id, status] of earlier)
        if (UNFINISHED.includes(status as RunStatus))
          throw this.earlierLayout(id);
      const live: RunHead[] = [];
      const ended: string[] = [];
      heads.forEach((head, i) => {
        if (head?.flow === flow && UNFINISHED.includes(head.status))
          live.push(head);
        else if (head) ended.push(ids[i]!, scan[2][i] ?? '');
      });
      await Promise.all([
        this.drop([unfinished], false, ended),
        this.drop([unfinished, this.runs], true, gone),
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
    const runs = this.runs;
    const found: Array<{ head: RunHead; score: string }> = [];
    for (
      let max = before === undefined ? '+inf' : `(${before}`;
      found.length <= limit;
    ) {
      const scan = (await this.script(
        'aaScanRuns',
        [runs, this.born],
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
    const keep = keepMs(leaseExpiresAt);
    const owned = this.ownedKey(owner);
    const tx = this.client
      .multi()
      .zremrangebyscore(owned, '-inf', Date.now() - keep);
    if (runIds.length)
      tx.zadd(owned, ...runIds.flatMap((id) => [leaseExpiresAt, id]));
    tx.pexpire(owned, keep);
    const [, heads] = await Promise.all([
      tx.exec(),
      Promise.all(
        runIds.map((id) =>
          this.client.hmget(this.runKeys(id).run, 'owner', 'status'),
        ),
      ),
      ...(this.ttl > 0
        ? runIds.map((id) =>
            this.script('aaTouch', this.runKeys(id).list, [this.ttl]),
          )
        : []),
    ]);
    return heads.filter(
      ([holder, status]) =>
        holder === owner && UNFINISHED.includes(status as RunStatus),
    ).length;
  }

  /**
   * QUIT when the server answers (pending replies arrive first); when it does not (down,
   * reconnecting), or QUIT takes longer than 2 s, the connection is dropped: a shutdown never hangs
   * on an unreachable Redis. Nothing is lost either way: every write was one script, applied or not.
   */
  async close(): Promise<void> {
    if (this.client.status !== 'ready') {
      this.client.disconnect();
      return;
    }
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        this.client.quit(),
        new Promise((_, reject) => {
          timer = setTimeout(() => reject(new Error('QUIT timed out')), 2_000);
        }),
      ]);
    } catch {
      this.client.disconnect();
    } finally {
      clearTimeout(timer);
    }
  }

  private runKeys(runId: string) {
    if (/[{}]/.test(runId)) {
      throw new Error(
        `RedisCheckpointStore: run id "${runId}" must not contain "{" or "}" (they would break the hash tag that keeps the run in one slot).`,
      );
    }
    const tag = `{${this.prefix}:${runId}}`;
    const run = `${tag}:run`;
    const list = [run, `${tag}:index`];
    // The order the scripts' KEYS follow (see redis.scripts.ts); `guarded` adds the head key of
    // the earlier four-key layout, which save, latest and delete refuse.
    return { run, list, guarded: [...list, `${tag}:head`] };
  }

  private unfinishedKey(flow: string): string {
    return `{${this.prefix}}:unfinished:${flow}`;
  }
  private ownedKey(owner: string): string {
    return `{${this.prefix}:owner:${owner}}:leases`;
  }

  private script(
    name: keyof typeof REDIS_SCRIPTS,
    keys: string[],
    args: Array<string | number>,
  ): Promise<unknown> {
    type Command = (...a: Array<string | number>) => Promise<unknown>;
    // Defined without numberOfKeys, so the key count goes first (some scripts take a key list).
    const command = (this.client as unknown as Record<string, Command>)[name]!;
    return command.call(this.client, keys.length, ...keys, ...args);
  }

  /** Adds the run to the flow's unfinished index and the list; returns [server ms, created]. */
  private async announce(
    runId: string,
    flow: string,
  ): Promise<[string, string]> {
    const keys = [this.unfinishedKey(flow), this.born, this.runs, this.seq];
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
      [this.born, ...sets],
      [forget ? '1' : '0', ...entries],
    );
  }

  /**
   * Heads of a scanned index chunk, sent together (one round trip, across Cluster nodes too); the
   * (runId, born) entries whose head is missing and old enough to remove; and, never among those,
   * the runs stored in the earlier layout, with their status.
   */
  private async readHeads([now, , born]: Scan, ids: string[]) {
    const heads = await this.readHeadFields(ids);
    const gone = ids.flatMap((id, i) => {
      const at = born[i];
      const old = at == null || now - Number(at) >= CREATE_WINDOW_MS;
      return heads[i] === undefined && old ? [id, at ?? ''] : [];
    });
    // An entry whose run is stored in the earlier layout is not abandoned: it stays.
    const missing = gone.filter((_, i) => i % 2 === 0);
    const statuses = await this.earlierLayoutStatus(missing);
    const earlier = new Map<string, string>();
    missing.forEach((id, i) => {
      const status = statuses[i];
      if (status != null) earlier.set(id, status);
    });
    return {
      heads,
      gone: gone.filter((_, i) => !earlier.has(gone[i - (i % 2)]!)),
      earlier,
    };
  }

  /**
   * Earlier development builds kept a run in four keys (`{P:id}:head`, `:cps`, `:calls`,
   * `:callindex`). Such a run has no run hash: to this version it looks absent, and its index
   * entries abandoned. For each id, the status in its earlier-layout head, or null when it has none.
   */
  private async earlierLayoutStatus(
    ids: string[],
  ): Promise<Array<string | null>> {
    const found = await Promise.all(
      ids.map((id) =>
        this.client.hmget(`{${this.prefix}:${id}}:head`, 'step', 'status'),
      ),
    );
    // A head without a status is taken for a live run: refused, never skipped.
    return found.map(([step, status]) =>
      step == null ? null : (status ?? 'running'),
    );
  }

  private earlierLayout(runId: string): Error {
    return new Error(
      `RedisCheckpointStore: run "${runId}" (prefix "${this.prefix}") is stored in the key layout of an earlier development build of agent-adapter ({${this.prefix}:${runId}}:head, :cps, :calls); this version cannot read it and has changed nothing. Finish or delete such runs with the build that wrote them, or give this version another prefix.`,
    );
  }

  /**
   * The heads of `ids`, sent together (one round trip, across Cluster nodes too): only the head's
   * fields of each run hash, which also holds the run's checkpoints and call records.
   */
  private async readHeadFields(
    ids: readonly string[],
  ): Promise<Array<RunHead | undefined>> {
    const raw = await Promise.all(
      ids.map((id) => this.client.hmget(this.runKeys(id).run, ...HEAD_FIELDS)),
    );
    return raw.map((values, i) => {
      const fields: Record<string, string> = {};
      HEAD_FIELDS.forEach((name, k) => {
        const value = values[k];
        if (value != null) fields[name] = value;
      });
      return toHead(ids[i]!, fields);
    });
  }

  /**
   * The effective lease of an unfinished run is the later of the one saved with it and its score in
   * its owner's set of driven runs (renewed once per interval for all of that owner's runs).
   */
  private async withLeases(heads: RunHead[]): Promise<RunHead[]> {
    const held = heads.filter(
      (h) => h.owner !== undefined && UNFINISHED.includes(h.status),
    );
    const renewed = await Promise.all(
      held.map((h) => this.client.zscore(this.ownedKey(h.owner!), h.runId)),
    );
    held.forEach((head, i) => {
      const score = renewed[i];
      // The owner's set only speaks for the runs it said it drives.
      if (score != null)
        head.leaseExpiresAt = Math.max(
          head.leaseExpiresAt ?? -Infinity,
          +score,
        );
    });
    return heads;
  }

  /** Turns a script's refusal code into the CheckpointConflict the other stores throw. */
  private check([code, a, b, c]: Reply, runId: string, step = 0): void {
    if (code === 'ok') return;
    if (code === 'layout') throw this.earlierLayout(runId);
    const num = (v: unknown) => (v == null ? undefined : Number(v));
    const refusals: Record<string, () => string> = {
      step: () => Messages.conflictStep(runId, step, num(a)),
      ended: () => Messages.ended(runId, String(a)),
      moved: () => Messages.logMoved(runId),
      fenced: () => Messages.fenced(runId, Number(a), num(b)),
      duplicate: () =>
        Messages.duplicateCall(runId, Number(a), Number(b), Number(c)),
    };
    const message = refusals[String(code)]?.();
    if (message !== undefined) throw new CheckpointConflict(message, runId);
    throw new Error(
      `RedisCheckpointStore: run "${runId}": the write was refused (${String(code)}) and nothing was written; retry it.`,
    );
  }
}

/**
 * Appends the ARGV tail of save and recordCall: the 1-based index of a call of another run (0:
 * none), the count, then segment, superstep, seq and sealed text per call.
 */
function pushCalls(
  args: string[],
  runId: string,
  calls: readonly CallRecord[] = [],
): void {
  const at = args.length;
  let foreign = 0;
  args.push('', String(calls.length));
  for (let i = 0; i < calls.length; i++) {
    const c = calls[i]!;
    if (foreign === 0 && c.runId !== runId) foreign = i + 1;
    args.push(String(c.segment), String(c.superstep), String(c.seq), c.sealed);
  }
  args[at] = String(foreign);
}

function toHead(runId: string, h: Record<string, string>): RunHead | undefined {
  if (h.step === undefined) return undefined;
  return {
    runId,
    flow: h.flow ?? '',
    step: Number(h.step),
    status: h.status as RunStatus,
    segment: Number(h.segment),
    updatedAt: Number(h.updatedAt),
    calls: Number(h.calls ?? 0),
    ...(h.owner !== undefined && { owner: h.owner }),
    ...(h.lease !== undefined && { leaseExpiresAt: Number(h.lease) }),
  };
}

/** Call records from `superstep:segment:seq` → sealed pairs of the run's calls hash. */
function toCalls(runId: string, fields: Array<[string, string]>): CallRecord[] {
  return fields.map(([field, sealed]) => {
    const [superstep = 0, segment = 0, seq = 0] = field.split(':').map(Number);
    return { runId, segment, seq, superstep, sealed };
  });
}

function pairs(flat: string[]): Array<[string, string]> {
  const out: Array<[string, string]> = [];
  for (let i = 0; i + 1 < flat.length; i += 2)
    out.push([flat[i]!, flat[i + 1]!]);
  return out;
}

function byCallKey(a: CallRecord, b: CallRecord): number {
  return a.segment - b.segment || a.superstep - b.superstep || a.seq - b.seq;
}

function keepMs(lease = Date.now()): number {
  return Math.max(Math.ceil(lease - Date.now()), 0) + OWNER_KEEP_MS;
}
