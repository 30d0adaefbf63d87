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
 * of the `{P}` master; O(1) per look otherwise. A fresh tenant has no stamp: its first look scans
 * (nothing is found) and stamps it.
 *
 * Not healed: a run waiting on a queue whose queue entry was lost (its placement was in `{P}`), and
 * a queue's counts (a lost admission lets one more run in). The `replicas` option confirms the
 * tenant slot's writes on replicas before a caller acts on them; it is the way to lose neither.
 */
import type { Cluster } from 'ioredis';
import { UNFINISHED } from '../checkpoint-store';
import { guarded } from '../transient-errors';
import type { RedisClient } from './redis.client';
import { dueScore } from './redis.due';
import { STORE, storeScript } from './redis.index';
import { HEAD_FIELDS, type RedisKeys } from './redis.layout';
import { toHead } from './redis.rows';

/** Run hashes read per round trip while rebuilding. */
const BATCH = 200;

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
    await this.rebuild();
    await storeScript(this.client, 'aaIndexStampSet', stamp, [current]);
  }

  /**
   * Puts every run of the tenant back in the list, and every unfinished one not waiting on a queue
   * back in its flow's unfinished set and the due set.
   */
  async rebuild(): Promise<void> {
    const pattern = `${escapeGlob(`{${this.keys.prefix}:`)}*}:run`;
    for (const node of masters(this.client)) {
      let cursor = '0';
      do {
        const [next, found] = await guarded(STORE, undefined, () =>
          node.scan(cursor, 'MATCH', pattern, 'COUNT', 1000),
        );
        cursor = next;
        for (let i = 0; i < found.length; i += BATCH)
          await this.restore(found.slice(i, i + BATCH));
      } while (cursor !== '0');
    }
  }

  private async restore(hashKeys: string[]): Promise<void> {
    const from = `{${this.keys.prefix}:`.length;
    const ids = hashKeys.map((key) => key.slice(from, -'}:run'.length));
    const values = await guarded(STORE, undefined, () =>
      Promise.all(
        hashKeys.map((key) =>
          this.client.hmget(key, 'created', ...HEAD_FIELDS),
        ),
      ),
    );
    const keys = [this.keys.born, this.keys.runs, this.keys.seq, this.keys.due];
    const sets = new Map<string, number>();
    let top = 0;
    const args: string[] = [];
    values.forEach(([created, ...fields], i) => {
      const run = toHead(ids[i]!, fields);
      if (!run) return;
      top = Math.max(top, Number(created ?? 0));
      // A queued run's place is in `{P}`: one past its first step was admitted; one at step 0 may
      // still be waiting, and only its queue may start it (not healed, see above).
      const indexed =
        UNFINISHED.includes(run.status) && !(run.queue && run.step === 0);
      let set = '';
      if (indexed) {
        const key = this.keys.unfinished(run.flow);
        if (!sets.has(key)) sets.set(key, keys.push(key));
        set = String(sets.get(key));
      }
      const due = indexed ? dueScore(run) : undefined;
      args.push(
        run.runId,
        created ?? '',
        due === undefined ? '' : String(due),
        set,
      );
    });
    if (args.length)
      await storeScript(this.client, 'aaIndexRestore', keys, [top, ...args]);
  }
}

/** The nodes holding the tenant's run hashes: every master of a Cluster, or the one server. */
function masters(client: RedisClient): Array<Pick<Cluster, 'scan'>> {
  return 'nodes' in client ? client.nodes('master') : [client];
}

/** `text` matched literally by SCAN's glob (`*`, `?`, `[`, `]` and `\` escaped). */
function escapeGlob(text: string): string {
  return text.replace(/[*?[\]\\]/g, '\\$&');
}
