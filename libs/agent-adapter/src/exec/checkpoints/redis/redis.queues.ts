/**
 * The Redis store's queues (keys: redis.layout.ts; Lua: redis.queue-scripts.ts). A run's hash is
 * in its own slot and the queue in the tenant's `{P}`, so an enqueue is two writes: the run hash
 * first, then the queue's and the list's entries. An admission is one `{P}` script.
 */
import {
  CheckpointConflict,
  CheckpointStoreUnavailable,
} from '../../../errors';
import { Messages } from '../../../errors/messages';
import {
  UNFINISHED,
  type AdmitQuery,
  type CheckpointRecord,
  type Enqueued,
  type QueuePlacement,
  type RunHead,
  type RunStatus,
} from '../checkpoint-store';
import { guarded } from '../transient-errors';
import { STORE, storeScript, type RedisClient } from './redis.client';
import type { RedisRunIndex } from './redis.index';
import { ADMISSION_TRACE_MS, type RedisKeys } from './redis.layout';
import { withOwnerLeases } from './redis.leases';
import { placementOf, sortableTime, toQueueState } from './redis.placement';
import type { Reply } from './redis.args';
import { toHead } from './redis.rows';

/** Attempts of an enqueue whose dedupe key changed hands (its holders ending) meanwhile. */
const ATTEMPTS = 5;
/** Admitted runs checked for an end their queue missed, per admission (oldest first). */
const REPAIR = 100;
/** Without a rate limit, admissions are kept this long for one (the rate window's set). */
const KEEP_ADMISSIONS_MS = 24 * 3600_000;
/** A queue's repair runs at most this often per store instance (it reads up to REPAIR heads). */
const REPAIR_EVERY_MS = 1_000;

export class RedisRunQueues {
  /** Queue → when this instance last repaired it. */
  private readonly repairedAt = new Map<string, number>();

  constructor(
    private readonly client: RedisClient,
    private readonly keys: RedisKeys,
    private readonly index: RedisRunIndex,
    private readonly hooks: {
      /** Heals the tenant's indexes (redis.heal.ts), when an enqueue's or admission's script asks. */
      heal: () => Promise<void>;
      /** Releases the owner's lease on the runs (due at once): `renewLeases` with 0. */
      release: (owner: string, runIds: string[]) => Promise<unknown>;
    },
  ) {}

  /**
   * (1) A dedupe key held by an unfinished run: that run, nothing written. (2) The run hash's step
   * 0 (`writeRun`; a stored run id is refused there), naming its queue, in no index. (3) One `{P}`
   * script takes the dedupe key if it still names what (1) saw, and enters the run in its queue
   * and the list of runs. A crash between (2) and (3) leaves a hash no index lists, whose id the
   * caller never got: it is inert (and expires with a TTL). Since (2) precedes (3), the dedupe key
   * always names a run whose hash was written, and no index lists a run without a hash.
   */
  async enqueue(
    checkpoint: CheckpointRecord,
    place: QueuePlacement,
    writeRun: () => Promise<void>,
  ): Promise<Enqueued> {
    const { runId } = checkpoint;
    const q = this.keys.queue(place.queue);
    const dedupe = place.dedupeKey;
    let expected = '';
    if (dedupe !== undefined) {
      const holder = await guarded(STORE, runId, () =>
        this.client.hget(q.dedupe, dedupe),
      );
      if (holder && (await this.live(holder)))
        return { runId: holder, created: false };
      expected = holder ?? '';
    }
    await writeRun();
    const keys = this.keys.enqueue(place.queue);
    const json = JSON.stringify(placementOf(checkpoint.flow, place));
    const at = sortableTime(place.availableAt);
    for (let attempt = 1, heals = 0; attempt <= ATTEMPTS; attempt++) {
      const [code, holder] = (await storeScript(
        this.client,
        'aaEnqueue',
        keys,
        [runId, place.queue, dedupe ?? '', expected, json, at, ''],
      )) as Reply;
      if (code === 'ok') {
        this.keepPlacement(runId, json);
        return { runId, created: true };
      }
      // The tenant slot's master changed since its index was known whole: the key may be lost.
      if (code === 'heal') {
        if (++heals > ATTEMPTS) {
          await this.forgetRun(runId);
          throw new CheckpointStoreUnavailable(
            Messages.redisTenantHealing(runId),
            runId,
          );
        }
        await this.hooks.heal();
        attempt--;
        continue;
      }
      // 'held': another enqueue took the key. Live, it is the run; ended, the key is free.
      const current = String(holder ?? '');
      if (current && (await this.live(current))) {
        await this.forgetRun(runId);
        return { runId: current, created: false };
      }
      expected = current;
    }
    await this.forgetRun(runId);
    throw new CheckpointConflict(
      Messages.conflictStep(runId, 0, undefined),
      runId,
    );
  }

  /**
   * The placement its queue took, into the run's hash (redis.heal.ts), behind the enqueue and not
   * waited for: a hash without one is a run the healing leaves alone (an enqueue in flight, or one
   * that crashed before its queue took it, whose id its caller never got).
   */
  private keepPlacement(runId: string, json: string): void {
    storeScript(
      this.client,
      'aaPlace',
      [this.keys.runHash(runId)],
      [json],
    ).catch(() => undefined);
  }

  /**
   * Repairs first: the oldest admitted runs whose end their queue missed (a crash between the end
   * write and its index drop) leave it in the same script, before it counts. Then one script
   * admits; each admitted run's admission is kept in its hash and its head read back (one round
   * trip: `keepAdmissions`). One that had ended (the same crash, while it waited) leaves its queue;
   * one this admitter may not drive (kept by another, or late) stays counted. Neither is returned.
   */
  async admit(query: AdmitQuery): Promise<RunHead[]> {
    const { queue, now, concurrency, perKey, rate } = query;
    const q = this.keys.queue(queue);
    const ended = await this.missedEnds(q.active, query);
    const since = rate ? now - rate.intervalMs : now - KEEP_ADMISSIONS_MS;
    // prettier-ignore
    const admit = () => storeScript(this.client, 'aaAdmit', [
      q.delayed, q.ready, q.active, q.keys, q.admitted, q.runs, q.dedupe, this.keys.queued, this.keys.due, q.ended,
      this.keys.indexed,
    ], [
      this.keys.queuePrefix, queue, this.keys.unfinished(''), String(now), String(query.limit),
      concurrency === undefined ? '' : String(concurrency), perKey === undefined ? '' : String(perKey),
      rate ? String(rate.limit) : '', String(since), String(since),
      String(Math.floor(query.leaseExpiresAt ?? 0)), ...ended,
    ]);
    let sent = performance.now();
    let reply = await admit();
    // The tenant slot's master changed since its index was known whole: its counts may have lost
    // admissions, so none is made (past a limit, or of a run driven already) before the healing
    // counts them again.
    for (let heals = 0; reply === 'heal'; heals++) {
      if (heals === ATTEMPTS)
        throw new CheckpointStoreUnavailable(
          Messages.redisQueueHealing(queue),
          undefined,
          { transient: true },
        );
      await this.hooks.heal();
      sent = performance.now();
      reply = await admit();
    }
    const pairs = reply as string[];
    const ids = pairs.filter((_, i) => i % 2 === 0);
    const traced = await this.keepAdmissions(ids, query);
    // Kept too late for a healing to be sure to see them: not driven here, but released, so the
    // next look of any worker takes them (a run found due is one its queue counts).
    const late = performance.now() - sent > ADMISSION_TRACE_MS;
    const admitted: RunHead[] = [];
    const released: string[] = [];
    const gone: string[] = [];
    const early: Array<string | number> = [];
    const flows = new Set<string>();
    traced.forEach(([kept, head], i) => {
      if (head && UNFINISHED.includes(head.status)) {
        if (!kept) {
          // Past step 0 (an operator marked it while it waited): due at once for any worker, not
          // at this admitter's lease if the mark's own due entry is gone (an early score is safe).
          if (head.step > 0) early.push(0, ids[i]!);
          return;
        }
        if (late) return void released.push(ids[i]!);
        head.queue = toQueueState(queue, pairs[2 * i + 1]);
        admitted.push(head);
      } else {
        gone.push(ids[i]!, '*');
        if (head) flows.add(head.flow);
      }
    });
    const unfinished = [...flows].map((f) => this.keys.unfinished(f));
    await this.index.drop([this.keys.due, ...unfinished], 'ended', gone);
    if (released.length && query.owner !== undefined)
      await this.hooks.release(query.owner, released);
    if (early.length)
      await guarded(STORE, undefined, () =>
        this.client.zadd(this.keys.due, 'LT', ...early),
      );
    // Their placements came with the reply: only leases are left to read (owned runs only).
    return withOwnerLeases(this.client, this.keys, admitted);
  }

  /**
   * Each admitted run's admission, kept in its hash (redis.heal.ts), and its head: whether this
   * admitter may drive it (not if it was claimed already, or another admitter holds it), sent
   * together. A run whose admission is not kept stays counted: another admitter's, or claimed.
   */
  private async keepAdmissions(
    ids: readonly string[],
    query: AdmitQuery,
  ): Promise<Array<[boolean, RunHead | undefined]>> {
    const args = [
      query.owner ?? '',
      String(Math.floor(query.leaseExpiresAt ?? 0)),
    ];
    const replies = await Promise.all(
      ids.map((id) =>
        storeScript(this.client, 'aaAdmission', [this.keys.runHash(id)], args),
      ),
    );
    return replies.map((reply, i) => {
      const [kept, ...fields] = reply as Array<string | number | null>;
      return [kept === 1, toHead(ids[i]!, fields as Array<string | null>)];
    });
  }

  /**
   * The oldest admitted runs (up to REPAIR) that ended without leaving their queue's active set:
   * looked for only where the set is counted (a concurrency or per-key limit), and at most once a
   * second per queue, so a look at a busy queue does not read a hundred heads each time.
   */
  private async missedEnds(active: string, query: AdmitQuery) {
    if (query.concurrency === undefined && query.perKey === undefined)
      return [];
    const last = this.repairedAt.get(query.queue) ?? -Infinity;
    if (query.now - last < REPAIR_EVERY_MS) return [];
    this.repairedAt.set(query.queue, query.now);
    const ids = await guarded(STORE, undefined, () =>
      this.client.zrange(active, '0', String(REPAIR - 1)),
    );
    const statuses = await guarded(STORE, undefined, () =>
      Promise.all(
        ids.map((id) => this.client.hget(this.keys.runHash(id), 'status')),
      ),
    );
    return ids.filter((_, i) => !UNFINISHED.includes(statuses[i] as RunStatus));
  }

  /** Whether the run's hash says it is unfinished (a dedupe key's holder). */
  private async live(runId: string): Promise<boolean> {
    const status = await guarded(STORE, runId, () =>
      this.client.hget(this.keys.runHash(runId), 'status'),
    );
    return UNFINISHED.includes(status as RunStatus);
  }

  /** Removes the hash an enqueue wrote but did not index (its dedupe key was taken). */
  private async forgetRun(runId: string): Promise<void> {
    await storeScript(this.client, 'aaDelete', this.keys.run(runId), []);
  }
}
