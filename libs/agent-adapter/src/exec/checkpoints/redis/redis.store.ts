import { compareCallKeys } from '../call-order';
import {
  CheckpointStore,
  UNFINISHED,
  type AdmitQuery,
  type CallRecord,
  type CheckpointRecord,
  type DueQuery,
  type Enqueued,
  type HeadlessPage,
  type HeadlessQuery,
  type HistoryPage,
  type ListQuery,
  type ListUnfinishedOptions,
  type QueuePlacement,
  type RunHead,
  type RunPage,
  type RunStatus,
  type SaveOptions,
  type StreamQuery,
  type StoreFailover,
  type StreamRecord,
} from '../checkpoint-store';
import { Messages } from '../../../errors/messages';
import { streamEntries, streamValue } from './redis.stream-scripts';
import { RedisKeys } from './redis.layout';
import {
  connectWithScripts,
  oneServer,
  quitOrDrop,
  storeScript,
  type RedisClient,
} from './redis.client';
import { RedisDueIndex } from './redis.due';
import { TenantIndexHealer } from './redis.heal';
import { PromotionLog } from './redis.promotions';
import { RedisRunIndex } from './redis.index';
import type { RedisClientLike, RedisReplicaAcks } from './redis.client-like';
import { renewLeases } from './redis.leases';
import { RunWrites } from './redis.replicas';
import { RedisRunQueues } from './redis.queues';
import { historyFromHash, pairs, toCalls, toCheckpoint } from './redis.rows';
import {
  crossSlot,
  pushCalls,
  refusal,
  saveArgs,
  type Reply,
} from './redis.args';
import type { REDIS_SCRIPTS } from './redis.scripts';

export type { RedisClientLike, RedisReplicaAcks } from './redis.client-like';

export interface RedisCheckpointStoreOptions {
  /**
   * Every key of a run expires this long after the run's last write; never while it is paused or
   * sleeping.
   */
  ttlSeconds?: number;
  /** Key namespace (tenant). No `{`, `}` or `:`. Default `aa`. */
  prefix?: string;
  /**
   * Confirm every run write (checkpoint, call record) on this many replicas with WAIT before it
   * counts as stored, so a tool never runs on a `started` record a failover can lose, and the
   * index and queue writes a caller acts on (a run's announcement, an enqueue, an admission) too
   * (see redis.replicas.ts). Absent: asynchronous replication; a failover that may have lost a run's
   * writes is detected instead, and its recovery stops with `FailoverNeedsDecision`. Give every
   * store of a prefix the same setting.
   */
  replicas?: RedisReplicaAcks;
}

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
  private readonly index: RedisRunIndex;
  private readonly dueIndex: RedisDueIndex;
  private readonly queues: RedisRunQueues;
  private readonly healer: TenantIndexHealer;
  private readonly runWrites: RunWrites;
  private readonly promotions: PromotionLog;
  /** Whether the save script writes the run's index entry too: on one server (see `save`). */
  private indexWithin: boolean;

  constructor(
    connect: () => RedisClientLike,
    options: RedisCheckpointStoreOptions = {},
  ) {
    super();
    this.keys = new RedisKeys(options.prefix ?? 'aa');
    this.prefix = this.keys.prefix;
    this.ttl = Math.ceil(options.ttlSeconds ?? 0);
    // Checked before connecting: a bad option opens no connection.
    const replicas = RunWrites.check(options.replicas);
    this.client = connectWithScripts(connect);
    this.indexWithin = oneServer(this.client);
    this.promotions = new PromotionLog(this.client, this.keys);
    this.runWrites = new RunWrites(
      this.client,
      this.keys,
      replicas,
      this.promotions,
    );
    this.index = new RedisRunIndex(this.client, this.keys);
    this.dueIndex = new RedisDueIndex(this.client, this.keys, this.index);
    this.healer = new TenantIndexHealer(this.client, this.keys);
    this.queues = new RedisRunQueues(this.client, this.keys, this.index, {
      heal: () => this.healer.check(),
      release: (owner, runIds) => this.renewLeases(owner, 0, runIds),
    });
  }

  async save(
    checkpoint: CheckpointRecord,
    options: SaveOptions = {},
  ): Promise<void> {
    const { runId, step, flow, status } = checkpoint;
    const { owner, leaseExpiresAt: lease } = options;
    // Identifies this write, so a resend after a lost reply is recognised as already applied.
    const token = this.runWrites.token();
    // A segment taken over (a claim, a resume, an operator's decision) enters the due index first:
    // a crash right after leaves a candidate that is not due, never a run no worker would find.
    const claim = step > 0 && options.expectCalls !== undefined;
    if (claim) await this.dueIndex.becomesDue(runId, lease ?? 0);
    // One server: the save script makes the run's index entry at step 0 and drops it at the end,
    // with no round trip of their own. A Cluster holds the entry in another slot: made first (a
    // crash after leaves an entry without a head, which readers drop; never a run recovery cannot
    // find), on the `replicas` before the run exists, and dropped after the end (below).
    const ended = !UNFINISHED.includes(status);
    let within = this.indexWithin && (step === 0 || ended);
    for (let attempt = 1; ; attempt++) {
      const first = step === 0 && !within;
      const [intent, created] = first
        ? await this.index.announce(runId, flow, lease ?? 0)
        : ['', ''];
      if (first) await this.runWrites.confirmTenant(runId);
      const { queuePrefix, queued } = this.keys;
      const args = saveArgs(checkpoint, {
        token,
        ttl: this.ttl,
        owner,
        lease,
        expectCalls: options.expectCalls,
        created,
        intent,
        head: options.head,
        mode: this.runWrites.mode(options.acceptLostWrites),
        index: within ? { due: lease ?? 0, queuePrefix } : undefined,
      });
      pushCalls(args, runId, options.calls);
      const tenant = within ? [...this.keys.announce(flow), queued] : [];
      let reply: Reply;
      try {
        reply = await this.runWrites.run('aaSave', runId, args, tenant);
      } catch (error) {
        // A cluster-enabled server behind a plain client refuses keys of two slots in one script
        // (before running it): from then on, the store writes its indexes as on a Cluster.
        if (!within || !crossSlot(error)) throw error;
        within = this.indexWithin = false;
        continue;
      }
      if (reply[0] === 'late' && attempt < 3) continue;
      const refused = refusal(reply, runId, step);
      if (refused) throw refused;
      break;
    }
    // The due index after the script (redis.due.ts says why in that order); an ended run leaves it.
    if (step > 0 && !ended) {
      const indexing = this.dueIndex.saved(runId, step, status, lease, claim);
      if (indexing) await indexing;
    }
    // A Cluster's drop (a queued run leaves its queue's counts too) is off the caller's path: a
    // crash before it leaves an entry that readers clean.
    if (ended && !within) this.index.ended(runId, flow);
  }

  async enqueue(
    checkpoint: CheckpointRecord,
    placement: QueuePlacement,
    options: Pick<SaveOptions, 'head'> = {},
  ): Promise<Enqueued> {
    const enqueued = await this.queues.enqueue(checkpoint, placement, () =>
      this.writeWaiting(checkpoint, placement.queue, options.head),
    );
    // With `replicas`: its queue entry and dedupe key are on them before its id is returned.
    await this.runWrites.confirmTenant(enqueued.runId);
    return enqueued;
  }

  async admit(query: AdmitQuery): Promise<RunHead[]> {
    const admitted = await this.queues.admit(query);
    // With `replicas`: admissions on them before any is driven (else they fall due elsewhere).
    if (admitted.length) await this.runWrites.confirmTenant(admitted[0]!.runId);
    return admitted;
  }

  /** An enqueue's step 0: no index entry before it, its queue in its hash; a stored id is refused. */
  private async writeWaiting(
    checkpoint: CheckpointRecord,
    queue: string,
    head: string | undefined,
  ): Promise<void> {
    const { runId, step } = checkpoint;
    const mode = this.runWrites.mode();
    const token = this.runWrites.token();
    const args = saveArgs(checkpoint, {
      token,
      ttl: this.ttl,
      head,
      queue,
      mode,
    });
    pushCalls(args, runId);
    const refused = refusal(
      await this.runWrites.run('aaSave', runId, args),
      runId,
      step,
    );
    if (refused) throw refused;
  }

  async recordCall(
    runId: string,
    segment: number,
    records: CallRecord[],
    head?: string,
  ): Promise<void> {
    const token = this.runWrites.token();
    const args = [token, String(this.ttl), String(segment), head ?? ''];
    args.push(this.runWrites.mode());
    pushCalls(args, runId, records);
    const reply = await this.runWrites.run('aaRecord', runId, args);
    const refused = refusal(reply, runId);
    if (refused) throw refused;
  }

  async appendStream(
    runId: string,
    segment: number,
    entries: readonly Omit<StreamRecord, 'offset'>[],
    keep: number,
  ): Promise<number> {
    if (!entries.length) throw new TypeError(Messages.streamEmptyAppend(runId));
    const superstep = Math.min(...entries.map((e) => e.superstep));
    const args = [segment, keep, superstep, entries.length].map(String);
    for (const e of entries) args.push(streamValue(e));
    const reply = (await this.script(
      'aaAppendStream',
      this.keys.run(runId),
      args,
    )) as Reply;
    const refused = refusal(reply, runId);
    if (refused) throw refused;
    return Number(reply[1]);
  }

  async readStream(
    runId: string,
    query: StreamQuery = {},
  ): Promise<StreamRecord[]> {
    const { from = 0, superstep, limit = 100 } = query;
    const flat = (await this.script('aaReadStream', this.keys.run(runId), [
      from,
      superstep ?? '',
      limit,
    ])) as string[];
    return streamEntries(runId, flat, superstep);
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
    // After a write whose outcome is unknown: only what is on the replicas (with `replicas`).
    await this.runWrites.confirmed(runId);
    const [head] = await this.index.readHeadFields([runId]);
    // A second round trip only for an owned, unfinished run: its owner's lease key may be later.
    // and one for a queued run: its placement (both sent together).
    return head && (await this.index.complete([head]))[0];
  }

  async calls(runId: string, superstep: number): Promise<CallRecord[]> {
    const flat = (await this.script('aaCalls', this.keys.run(runId), [
      superstep,
    ])) as string[];
    return toCalls(runId, pairs(flat)).sort(compareCallKeys);
  }

  async history(runId: string): Promise<HistoryPage> {
    const flat = await this.script('aaHistory', this.keys.run(runId), []);
    return historyFromHash(runId, flat as string[]);
  }

  /** The check a write would make (redis.failover.ts), on the run's own master, writing nothing. */
  override async failover(runId: string): Promise<StoreFailover | undefined> {
    const reply = await this.runWrites.failover(runId);
    return (
      reply && { lostHistory: String(reply[1]), history: String(reply[2]) }
    );
  }

  async delete(runId: string): Promise<boolean> {
    const [deleted, flow] = (await this.script(
      'aaDelete',
      this.keys.run(runId),
      [],
    )) as Reply;
    if (!deleted) return false;
    const sets = [this.keys.runs, this.keys.due];
    if (flow != null) sets.push(this.keys.unfinished(String(flow)));
    await this.index.drop(sets, 'forget', [runId, '*']);
    return true;
  }

  /** One owner's renewal (redis.leases.ts), and the due index's (redis.due.ts: in its order). */
  async renewLeases(
    owner: string,
    leaseExpiresAt: number,
    runIds: readonly string[],
  ): Promise<number> {
    const { client, keys, ttl } = this;
    const [renewed] = await Promise.all([
      this.dueIndex.renewed(owner, runIds, leaseExpiresAt),
      renewLeases(client, keys, ttl, owner, leaseExpiresAt, runIds),
    ]);
    return renewed;
  }

  /** QUIT, or drop the connection when the server does not answer (see `quitOrDrop`). */
  close(): Promise<void> {
    return quitOrDrop(this.client);
  }

  /** A sweep's first page and every due look check the index first (see `look`). */
  async listUnfinished(
    flow: string,
    options?: ListUnfinishedOptions,
  ): Promise<RunHead[]> {
    if (options?.after === undefined) await this.look();
    return this.index.unfinished(flow, options);
  }

  list(query?: ListQuery): Promise<RunPage> {
    return this.index.list(query);
  }

  async listDue(query: DueQuery): Promise<RunHead[]> {
    await this.look();
    return this.dueIndex.due(query);
  }

  /**
   * Before a look at the indexes: they are healed if their master changed (redis.heal.ts), and
   * the masters' promotions recorded (redis.failover.ts).
   */
  private async look(): Promise<void> {
    await Promise.all([this.healer.check(), this.promotions.look()]);
  }

  listHeadless(query?: HeadlessQuery): Promise<HeadlessPage> {
    return this.index.headless(query);
  }

  private script(
    name: keyof typeof REDIS_SCRIPTS,
    keys: readonly string[],
    args: Array<string | number>,
  ): Promise<unknown> {
    return storeScript(this.client, name, keys, args);
  }
}
