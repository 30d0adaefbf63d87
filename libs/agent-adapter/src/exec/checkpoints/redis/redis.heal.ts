/**
 * Healing a tenant's indexes. A run's hash lives in its own slot (`{P:runId}`) and its index entries
 * (its flow's unfinished set, the due set, the list) in the tenant's `{P}` slot, usually on another
 * master. Replication is asynchronous: a failover of the `{P}` master (or its restart with the last
 * second of its append-only file unwritten) can lose index entries that the run hashes outlived.
 * A run left without them would never be found by recovery, takeover or a listing: a lost run.
 *
 * The run hashes are the truth, so the index is rebuilt from them: the `{P}` slot keeps `indexed`,
 * the replication id of the master under which the index was last known whole. A look (the due
 * look every worker takes, a recovery sweep) first compares it with the master's id now: a
 * promotion or a restart starts a new id, and then the look scans every master for the tenant's
 * run hashes and puts each unfinished run back where it is missing (entries present are left as
 * they are; a due score put back is the head's own, so it is never late). O(runs), once per change
 * of the `{P}` master (SCAN walks each master's whole keyspace, other tenants' keys too); O(1) per
 * look otherwise. A tenant without a stamp (new, or its stamp lost) is scanned once, then stamped.
 *
 * A run waiting on a queue whose enqueue was lost is queued again as it was placed (once its queue
 * took it, its hash keeps the placement), its dedupe key with it; an enqueue with a dedupe key
 * waits for the healing (its script refuses while the stamp is not the master's id), so no second
 * run starts for a lost key. A run past its first step that its queue no longer counts (its
 * admission lost) is counted again, as admitted at the healing, if its hash keeps an admission,
 * a worker holds its lease or it slept or paused since: an operator's mark (`runs restored`, after
 * a failover) moves a waiting run past step 0 too, and counting that one would let it run past its
 * limits. Every admission waits for the healing the same way, so none goes past a limit it lost
 * or admits again a run that is driven.
 *
 * An admitted run its worker has not claimed yet is at step 0, as a waiting one: its admitter
 * keeps the admission in its hash (`admission`, redis.queues.ts) and drives it only if that landed
 * within ADMISSION_TRACE_MS of sending the admission. A step-0 run with one under a live lease is
 * counted as admitted (due when that lease ends); the runs found waiting are read again once that
 * long has passed since the change was seen, so every lost admission whose run is driven is
 * counted. This needs the run's hash to outlive the admission: one on the same master (a Cluster
 * slot there, one server restarted) lost its claim too, a loss redis.failover.ts speaks to. The
 * `replicas` option confirms the tenant slot's writes on replicas before a caller acts on them:
 * nothing to heal.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { UNFINISHED, type RunHead } from '../checkpoint-store';
import { guarded } from '../transient-errors';
import { masters, STORE, storeScript, type RedisClient } from './redis.client';
import { dueScore } from './redis.due';
import { withOwnerLeases } from './redis.leases';
import {
  ADMISSION_FIELD,
  ADMISSION_TRACE_MS,
  HEAD_FIELDS,
  PLACEMENT_FIELD,
  type RedisKeys,
} from './redis.layout';
import { sortableTime, type Placement } from './redis.placement';
import { toHead } from './redis.rows';

/** Run hashes read per round trip while rebuilding. */
const BATCH = 200;
/** Beyond ADMISSION_TRACE_MS before the second look: timers fire early, clocks tick apart. */
const MARGIN_MS = 50;

export class TenantIndexHealer {
  #inFlight?: Promise<void>;

  constructor(
    private readonly client: RedisClient,
    private readonly keys: RedisKeys,
  ) {}

  /**
   * Before a look: rebuilds the index if the `{P}` master's replication id is not the one it was
   * last known whole under (see the file's comment). Concurrent looks of this store share one check.
   */
  check(): Promise<void> {
    this.#inFlight ??= this.#check().finally(
      () => (this.#inFlight = undefined),
    );
    return this.#inFlight;
  }

  async #check(): Promise<void> {
    const stamp = [this.keys.indexed];
    const [current, known] = (await storeScript(
      this.client,
      'aaIndexStamp',
      stamp,
      [],
    )) as [string, string | null];
    if (known === current) return;
    // The change came before this reply: an admission it lost was sent before now.
    const noticed = performance.now();
    const waiting = await this.rebuild();
    if (waiting.length) {
      // Its admitter, if it drives the run, kept the admission in the hash by now + this.
      const until = noticed + ADMISSION_TRACE_MS + MARGIN_MS;
      await sleep(Math.max(0, until - performance.now()));
      for (let i = 0; i < waiting.length; i += BATCH)
        await this.restore(waiting.slice(i, i + BATCH));
    }
    await storeScript(this.client, 'aaIndexStampSet', stamp, [current]);
  }

  /**
   * Puts every run of the tenant back in the list, every unfinished one past its queue back in its
   * flow's unfinished set and the due set, and every queued one that lost its place on its queue.
   * Resolves with the hash keys of the queued runs it found waiting (see `restore`).
   */
  private async rebuild(): Promise<string[]> {
    const pattern = `${escapeGlob(`{${this.keys.prefix}:`)}*}:run`;
    const waiting: string[] = [];
    for (const node of masters(this.client)) {
      let cursor = '0';
      do {
        const [next, found] = await guarded(STORE, undefined, () =>
          node.scan(cursor, 'MATCH', pattern, 'COUNT', 1000),
        );
        cursor = next;
        for (let i = 0; i < found.length; i += BATCH)
          waiting.push(...(await this.restore(found.slice(i, i + BATCH))));
      } while (cursor !== '0');
    }
    return waiting;
  }

  /** One batch of `rebuild`: resolves with the hash keys of the queued runs found waiting. */
  private async restore(hashKeys: string[]): Promise<string[]> {
    const from = `{${this.keys.prefix}:`.length;
    const ids = hashKeys.map((key) => key.slice(from, -'}:run'.length));
    const values = await guarded(STORE, undefined, () =>
      Promise.all(
        hashKeys.map((key) =>
          this.client.hmget(
            key,
            'created',
            PLACEMENT_FIELD,
            ADMISSION_FIELD,
            ...HEAD_FIELDS,
          ),
        ),
      ),
    );
    const keys = [this.keys.born, this.keys.runs, this.keys.seq, this.keys.due];
    const sets = new Map<string, number>();
    let top = 0;
    const args: string[] = [];
    const queued: Array<[RunHead, string | null]> = [];
    const counted: Array<[RunHead, string]> = [];
    const waiting: string[] = [];
    const runs = values.map(
      ([created, placement, admission, ...fields], i) => ({
        run: toHead(ids[i]!, fields),
        created: created ?? '',
        placement: placement ?? null,
        admission,
      }),
    );
    // Past step 0 with no admission kept: a waiting run an operator marked (no lease), or one a
    // worker took over from an admitter that died before keeping its admission (its lease).
    const unkept = runs.flatMap(({ run, admission }) =>
      run?.queue && run.step > 0 && admission == null ? [run] : [],
    );
    await guarded(STORE, undefined, () =>
      withOwnerLeases(this.client, this.keys, unkept),
    );
    const now = Date.now();
    runs.forEach(({ run, created, placement, admission }, i) => {
      if (!run) return;
      top = Math.max(top, Number(created || 0));
      if (!UNFINISHED.includes(run.status))
        return void args.push(run.runId, created, '', '');
      // A queued run's place is in `{P}`. One at step 0 was admitted if its admitter kept its
      // admission under a live lease (due when it ends); an admitter that let it lapse unclaimed
      // is gone. One past step 0 was if its hash keeps an admission, or a worker holds it, or it
      // slept or paused since: an operator's mark moves a waiting run past step 0 too. Any other
      // one may still be waiting, and only its queue may start it.
      const lease = Number(admission?.split('|', 1)[0]);
      const admitted =
        run.step === 0
          ? lease > now
          : admission != null ||
            run.status !== 'running' ||
            (run.leaseExpiresAt ?? 0) > now;
      if (run.queue && !admitted) {
        waiting.push(hashKeys[i]!);
        queued.push([run, placement]);
        // Past step 0 (marked while it waited), its index entries are put back with it, if it
        // can be: looks skip it while it waits on its queue. Without a placement to put it back
        // with, it would look admitted.
        if (run.step === 0 || placement === null) return;
      } else if (run.queue) counted.push([run, placement ?? '']);
      if (run.step === 0 && run.queue) run.leaseExpiresAt = lease;
      const set = this.keys.unfinished(run.flow);
      if (!sets.has(set)) sets.set(set, keys.push(set));
      const due = dueScore(run);
      args.push(
        run.runId,
        created,
        due === undefined ? '' : String(due),
        String(sets.get(set)),
      );
    });
    if (args.length)
      await storeScript(this.client, 'aaIndexRestore', keys, [top, ...args]);
    await this.requeue(queued);
    await this.recount(counted);
    return waiting;
  }

  /** Runs past their queue (admitted, driven): counted in their queue's limits if it lost them. */
  private async recount(runs: Array<[RunHead, string]>): Promise<void> {
    const byQueue = new Map<string, string[]>();
    for (const [run, placement] of runs) {
      const name = run.queue!.name;
      if (!byQueue.has(name)) byQueue.set(name, []);
      byQueue.get(name)!.push(run.runId, placement);
    }
    for (const [name, pairs] of byQueue) {
      const q = this.keys.queue(name);
      // prettier-ignore
      const keys = [this.keys.queued, q.runs, q.ready, q.delayed, q.active, q.keys, q.admitted, q.dedupe];
      await storeScript(this.client, 'aaQueueRecount', keys, [name, ...pairs]);
    }
  }

  /**
   * Queued runs found waiting that their queue took (their hash keeps the placement it took): if
   * it no longer holds them (the script checks), back on it as they were placed, their dedupe key
   * with them, from whatever run the state `{P}` fell back to names (an enqueue takes a key only
   * from a run that ended, and the kept placement says this run's enqueue took it; a run's end
   * releases only a key it holds). A run its queue holds is left alone, also one another look's
   * healing put back since. An admitted run admitted again is fenced by its claim as any takeover
   * is.
   */
  private async requeue(runs: Array<[RunHead, string | null]>): Promise<void> {
    for (const [run, stored] of runs) {
      if (stored === null) continue;
      const queue = run.queue!.name;
      const placement = JSON.parse(stored) as Placement;
      // The key may name an older holder (a run that ended, its release lost with this enqueue):
      // passed as the one seen, it gives the key back.
      for (let expected = '', tries = 0; tries < 2; tries++) {
        const [code, holder] = (await storeScript(
          this.client,
          'aaEnqueue',
          this.keys.enqueue(queue),
          [
            run.runId,
            queue,
            placement.d ?? '',
            expected,
            JSON.stringify(placement),
            sortableTime(Number(placement.a ?? 0)),
            '1',
          ],
        )) as [string, string | undefined];
        if (code !== 'held' || !holder) break;
        expected = holder;
      }
    }
  }
}

/** `text` matched literally by SCAN's glob (`*`, `?`, `[`, `]` and `\` escaped). */
function escapeGlob(text: string): string {
  return text.replace(/[*?[\]\\]/g, '\\$&');
}
