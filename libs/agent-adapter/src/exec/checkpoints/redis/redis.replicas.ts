/**
 * The `replicas` option of RedisCheckpointStore: every run write (a save, a call record) is
 * confirmed on that many replicas with WAIT before the store resolves, so a failover that promotes
 * one of them loses no write a tool ran after; so are the tenant slot's writes a caller acts on
 * (`confirmTenant`). WAIT counts the replicas that acknowledged every
 * write this connection made, so it must follow the script on the same connection to the master of
 * the run's slot: one pipeline (ioredis sends a Cluster pipeline to the node of its keys; WAIT has
 * none). It cannot go inside the script (Lua may not block) nor in a MULTI (WAIT does not block in
 * a transaction). The script goes as EVALSHA, and only when the server answers NOSCRIPT (nothing
 * ran) as EVAL, both in such a pipeline: ioredis's own fallback would resend the script on its
 * own, after the WAIT.
 */
import { createHash, randomBytes } from 'node:crypto';
import { CheckpointStoreUnavailable, DurableSetupError } from '../../../errors';
import { Messages } from '../../../errors/messages';
import { guarded } from '../transient-errors';
import {
  runScript,
  STORE,
  storeScript,
  type RedisClient,
} from './redis.client';
import type { RedisReplicaAcks } from './redis.client-like';
import { replicationMode } from './redis.failover';
import type { PromotionLog } from './redis.promotions';
import type { RedisKeys } from './redis.layout';
import type { Reply } from './redis.args';
import { REDIS_SCRIPTS } from './redis.scripts';

/** Where each run script takes its replication mode: ARGV[17] of SAVE, ARGV[5] of RECORD, ARGV[1] of FAILOVER. */
const MODE_ARG = { aaSave: 16, aaRecord: 4, aaFailover: 0 } as const;

/** The option checked (undefined: no WAIT); a bad value is a DurableSetupError naming it. */
export function checkReplicaAcks(value: unknown): RedisReplicaAcks | undefined {
  if (value === undefined) return undefined;
  const bad = (why: string) =>
    new DurableSetupError(Messages.redisReplicasOption(why));
  if (typeof value !== 'object' || value === null)
    throw bad(`got ${JSON.stringify(value) ?? typeof value}`);
  const { count, timeoutMs } = value as Partial<Record<string, unknown>>;
  if (!Number.isInteger(count) || (count as number) < 1)
    throw bad(`count must be an integer >= 1, got ${String(count)}`);
  if (!Number.isInteger(timeoutMs) || (timeoutMs as number) < 1)
    throw bad(`timeoutMs must be an integer >= 1, got ${String(timeoutMs)}`);
  return { count: count as number, timeoutMs: timeoutMs as number };
}

const SHA = Object.fromEntries(
  Object.entries(REDIS_SCRIPTS).map(([name, lua]) => [
    name,
    createHash('sha1').update(lua).digest('hex'),
  ]),
) as Record<keyof typeof REDIS_SCRIPTS, string>;

type Results = Array<[Error | null, unknown]>;

/** One pipeline to the slot's master: the command, then WAIT. Returns [reply, replicas]. */
async function withWait(
  client: RedisClient,
  command: [string, ...Array<string | number>],
  acks: RedisReplicaAcks,
): Promise<[unknown, number, Error | null]> {
  const results = (await client
    .pipeline()
    .call(...command)
    .call('WAIT', acks.count, acks.timeoutMs)
    .exec()) as Results;
  const [[failed, reply], [waitFailed, replicas]] = results as [
    [Error | null, unknown],
    [Error | null, unknown],
  ];
  if (waitFailed) throw waitFailed;
  return [reply, Number(replicas), failed];
}

/**
 * Runs a write script and WAITs for `acks` (see the header). A refusal wrote nothing and comes
 * back as it is; an applied write that fewer replicas acknowledged is a transient
 * `CheckpointStoreUnavailable`.
 */
export function writeScriptAcked(
  client: RedisClient,
  name: keyof typeof REDIS_SCRIPTS,
  keys: readonly string[],
  args: Array<string | number>,
  acks: RedisReplicaAcks,
  runId: string,
): Promise<unknown> {
  return guarded(STORE, runId, async () => {
    const tail = [keys.length, ...keys, ...args];
    let [reply, replicas, failed] = await withWait(
      client,
      ['EVALSHA', SHA[name], ...tail],
      acks,
    );
    if (failed && /NOSCRIPT/.test(failed.message))
      [reply, replicas, failed] = await withWait(
        client,
        ['EVAL', REDIS_SCRIPTS[name], ...tail],
        acks,
      );
    if (failed) throw failed;
    if ((reply as Reply)[0] === 'ok') short(runId, replicas, acks);
    return reply;
  });
}

/**
 * Confirms what the run's slot holds now on `acks` replicas: a marker write in the slot, then WAIT.
 * Replication is one ordered stream per master, so every earlier write there is on them too.
 */
export function confirmOnReplicas(
  client: RedisClient,
  marker: string,
  acks: RedisReplicaAcks,
  runId: string,
): Promise<void> {
  return guarded(STORE, runId, async () => {
    const [, replicas, failed] = await withWait(
      client,
      ['SET', marker, '1', 'PX', 60_000],
      acks,
    );
    if (failed) throw failed;
    short(runId, replicas, acks);
  });
}

function short(runId: string, replicas: number, acks: RedisReplicaAcks): void {
  if (replicas >= acks.count) return;
  throw new CheckpointStoreUnavailable(
    Messages.redisReplicasBehind(runId, replicas, acks.count, acks.timeoutMs),
    runId,
    { transient: true },
  );
}

/**
 * The store's run writes (save, call records) with or without `replicas`, and what a read of the
 * head owes them: after a write whose outcome is unknown (WAIT fell short, the connection dropped)
 * it may be on the master only, so the next head read of that run confirms the slot on the
 * replicas first. A writer reading back (confirmed-write.ts) then never takes a write that a
 * failover can still lose for stored.
 */
export class RunWrites {
  /** Runs whose last write here may be on the master only. */
  private readonly unconfirmed = new Set<string>();
  /** Write tokens: random per store instance, then counted (see `token`). */
  private readonly tokenBase = randomBytes(9).toString('base64');
  private writes = 0;

  static check(value: unknown): RedisReplicaAcks | undefined {
    return checkReplicaAcks(value);
  }

  constructor(
    private readonly client: RedisClient,
    private readonly keys: RedisKeys,
    private readonly acks: RedisReplicaAcks | undefined,
    private readonly promotions: PromotionLog,
  ) {}

  /**
   * A token no other write carries: 72 random bits per store instance (fixed length) followed by
   * this instance's write count. Unique like a fresh random token per write, without asking the
   * system for randomness on every write.
   */
  token(): string {
    return this.tokenBase + (++this.writes).toString(36);
  }

  /** The scripts' replication mode argument (redis.failover.ts). */
  mode(acceptLostWrites = false): string {
    return replicationMode(this.acks !== undefined, acceptLostWrites);
  }

  /**
   * A run write (its script's reply). An id its stamp holds that the script cannot place is
   * answered from the promotion log and the write sent again with the verdict; a failover found
   * is recorded in the log (redis.failover.ts).
   */
  run(
    name: 'aaSave' | 'aaRecord',
    runId: string,
    args: string[],
    tenantKeys: readonly string[] = [],
  ): Promise<Reply> {
    const own = this.keys.run(runId);
    const keys = tenantKeys.length ? [...own, ...tenantKeys] : own;
    return this.placed(name, runId, args, () =>
      this.send(name, runId, keys, args),
    );
  }

  /** The check a write would make (FAILOVER_LUA), writing only the mark of a failover found. */
  async failover(runId: string): Promise<Reply | undefined> {
    const args = [this.mode()];
    const reply = await this.placed('aaFailover', runId, args, async () => {
      const keys = this.keys.run(runId);
      const found = await guarded(STORE, runId, () =>
        runScript(this.client, 'aaFailover', keys, args),
      );
      return Array.isArray(found) ? (found as Reply) : ['ok'];
    });
    return reply[0] === 'failover' ? reply : undefined;
  }

  /** Not async: a reply that needs nothing more (nearly every one) costs no await. */
  private placed(
    name: keyof typeof MODE_ARG,
    runId: string,
    args: string[],
    send: () => Promise<Reply>,
  ): Promise<Reply> {
    const mode = args[MODE_ARG[name]]!;
    return send().then((reply) =>
      reply[0] === 'unfamiliar' || reply[0] === 'failover'
        ? this.placeAgain(name, runId, args, send, mode, reply)
        : reply,
    );
  }

  private async placeAgain(
    name: keyof typeof MODE_ARG,
    runId: string,
    args: string[],
    send: () => Promise<Reply>,
    mode: string,
    first: Reply,
  ): Promise<Reply> {
    let reply = first;
    // Again only if another write restamped the run meanwhile (then its id is the one to place).
    for (let i = 0; i < 3 && reply[0] === 'unfamiliar'; i++) {
      const id = String(reply[1]);
      const verdict = await guarded(STORE, runId, () =>
        this.promotions.verdict(id),
      );
      args[MODE_ARG[name]] = mode + verdict;
      reply = await send();
    }
    // Evidence for the run's neighbours, not a gate: the run itself is marked already.
    if (reply[0] === 'failover' && reply[3])
      await this.promotions
        .record(String(reply[3]), String(reply[2]))
        .catch(() => undefined);
    return reply;
  }

  /** `keys`: the run's, then (a run's first or last save on one server) the tenant's index keys. */
  private send(
    name: 'aaSave' | 'aaRecord',
    runId: string,
    keys: readonly string[],
    args: string[],
  ): Promise<Reply> {
    const { acks } = this;
    if (!acks)
      return storeScript(this.client, name, keys, args) as Promise<Reply>;
    return this.sendAcked(name, runId, keys, args, acks);
  }

  private async sendAcked(
    name: 'aaSave' | 'aaRecord',
    runId: string,
    keys: readonly string[],
    args: string[],
    acks: RedisReplicaAcks,
  ): Promise<Reply> {
    try {
      const reply = writeScriptAcked(
        this.client,
        name,
        keys,
        args,
        acks,
        runId,
      );
      return (await reply) as Reply;
    } catch (error) {
      this.unconfirmed.add(runId);
      throw error;
    }
  }

  /**
   * After a write to the tenant's `{P}` slot that a caller acts on (a run announced in the indexes,
   * enqueued with its dedupe key, admitted): confirmed on the replicas like a run write, so a
   * failover cannot lose an entry whose run was started, or a dedupe key whose run was returned.
   * Fewer acknowledgements: a transient `CheckpointStoreUnavailable`, as for a run write. The
   * indexes' other writes (due-time hints, cleanups) are left to the next look: a lost one makes
   * a run due early or late, never hides it.
   */
  async confirmTenant(runId: string): Promise<void> {
    if (!this.acks) return;
    await confirmOnReplicas(
      this.client,
      this.keys.tenantMarker,
      this.acks,
      runId,
    );
  }

  /** Before a head read: the run's slot confirmed on the replicas if a write here was not. */
  async confirmed(runId: string): Promise<void> {
    if (!this.acks || !this.unconfirmed.has(runId)) return;
    const marker = this.keys.replicaMarker(runId);
    await confirmOnReplicas(this.client, marker, this.acks, runId);
    this.unconfirmed.delete(runId);
  }
}
