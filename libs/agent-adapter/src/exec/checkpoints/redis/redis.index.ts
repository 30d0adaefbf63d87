import {
  UNFINISHED,
  type HeadlessPage,
  type HeadlessQuery,
  type ListQuery,
  type ListUnfinishedOptions,
  type RunHead,
  type RunPage,
} from '../checkpoint-store';
import { guarded } from '../transient-errors';
import { STORE, storeScript, type RedisClient } from './redis.client';
import { HEAD_FIELDS, type RedisKeys } from './redis.layout';
import { withOwnerLeases } from './redis.leases';
import { withPlacements } from './redis.placement';
import { CREATE_WINDOW_MS } from './redis.index-scripts';
import { toHead } from './redis.rows';
import type { Reply } from './redis.args';

/** What an index scan returns: server time (ms), run ids (or id/score pairs), their born times. */
export type Scan = [number, string[], Array<string | null>];

/**
 * How `drop` treats the runs it removes: 'index' from the sets only; 'ended' (a run that ended)
 * also from its queue's counts; 'forget' (deleted, or its hash gone) also its creation time and
 * every trace on its queue. See INDEX_DROP_LUA.
 */
export type DropMode = 'index' | 'ended' | 'forget';

/** A run waiting on a queue: not due, not unfinished for recovery, until admitted. */
export function waiting(head: RunHead): boolean {
  return head.queue?.availableAt !== undefined;
}

/** How many index entries one scan reads for a page of `wanted` runs: a few round trips, none huge. */
function scanChunk(wanted: number): number {
  return Math.min(Math.max(wanted, 32), 500);
}

/**
 * The Redis store's indexes of runs (the flows' unfinished sets, the list of every run, their born
 * times) and the reads that page through them, checking each entry against its run's head.
 */
export class RedisRunIndex {
  constructor(
    private readonly client: RedisClient,
    private readonly keys: RedisKeys,
  ) {}

  /**
   * Pages through the flow's index by run id. Entries whose head has ended or is another flow's
   * are skipped and removed. So are entries whose head is missing (expired, or a crash between
   * the index write and the step-0 script), but those are removed only once older than
   * CREATE_WINDOW_MS: a younger one may be a creation in flight, and the save script refuses a
   * creation that late, so removing an old one can never hide a run from recovery.
   */
  async unfinished(
    flow: string,
    options: ListUnfinishedOptions = {},
  ): Promise<RunHead[]> {
    const { leaseExpiredBefore, after, limit = 100 } = options;
    const chunk = scanChunk(limit);
    const unfinished = this.keys.unfinished(flow);
    const out: RunHead[] = [];
    for (let cursor = after; out.length < limit;) {
      const min = cursor === undefined ? '-' : `(${cursor}`;
      const scan = await this.scan('aaScanUnfinished', unfinished, min, chunk);
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
        this.drop([unfinished], 'ended', ended),
        this.drop([unfinished, this.keys.runs], 'forget', gone),
      ]);
      for (const head of await this.complete(live)) {
        // A waiting run is here only after a refused step-0 save of its id announced it: it stays
        // waiting (an admission enters it for good).
        if (waiting(head)) continue;
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
    const chunk = scanChunk(limit + 1);
    const runs = this.keys.runs;
    const found: Array<{ head: RunHead; score: string }> = [];
    for (
      let max = before === undefined ? '+inf' : `(${before}`;
      found.length <= limit;
    ) {
      const scan = await this.scan('aaScanRuns', runs, max, chunk);
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
      await this.drop([runs], 'forget', gone);
      if (ids.length < chunk) break;
      max = `(${page[page.length - 1]}`;
    }
    const shown = found.slice(0, limit);
    const last = shown[shown.length - 1];
    return {
      runs: await this.complete(shown.map((f) => f.head)),
      ...(found.length > limit && last && { next: last.score }),
    };
  }

  /**
   * Walks the list of every run (`{P}:runs`, newest first) and keeps the runs whose hash holds
   * rows but no head: head fields deleted below the store. (A hash deleted whole leaves nothing to
   * find: that is deleting every row of a run.)
   */
  async headless(query: HeadlessQuery = {}): Promise<HeadlessPage> {
    const limit = query.limit ?? 100;
    const chunk = scanChunk(limit);
    const runIds: string[] = [];
    let max = query.cursor === undefined ? '+inf' : `(${query.cursor}`;
    for (;;) {
      const scan = await this.scan('aaScanRuns', this.keys.runs, max, chunk);
      const page = scan[1];
      const ids = page.filter((_, i) => i % 2 === 0);
      const heads = await this.readHeadFields(ids);
      const missing = ids.filter((_, i) => heads[i] === undefined);
      const rows = await this.holdRows(missing);
      for (let i = 0; i < ids.length; i++) {
        const at = missing.indexOf(ids[i]!);
        if (at < 0 || !rows[at]) continue;
        runIds.push(ids[i]!);
        if (runIds.length === limit) return { runIds, next: page[2 * i + 1]! };
      }
      if (ids.length < chunk) return { runIds };
      max = `(${page[page.length - 1]}`;
    }
  }

  /**
   * One chunk of an index, from `from` on: a flow's unfinished set by run id (`aaScanUnfinished`),
   * or the list of every run by creation sequence, newest first (`aaScanRuns`).
   */
  private scan(
    script: 'aaScanUnfinished' | 'aaScanRuns',
    index: string,
    from: string,
    chunk: number,
  ): Promise<Scan> {
    const keys = [index, this.keys.born];
    return storeScript(this.client, script, keys, [
      from,
      chunk,
    ]) as Promise<Scan>;
  }

  /** Adds the run to the flow's unfinished index and the list; returns [server ms, created]. */
  async announce(
    runId: string,
    flow: string,
    dueAt: number,
  ): Promise<[string, string]> {
    const keys = this.keys.announce(flow);
    const [at, created] = (await storeScript(
      this.client,
      'aaIndexCreate',
      keys,
      [runId, dueAt],
    )) as Reply;
    return [String(at), String(created)];
  }

  /**
   * Takes an ended run out of its flow's unfinished set, the due set and its queue's counts without
   * holding up the run's caller: the end is stored already, and an entry this leaves behind (it
   * failed, the process died) is what readers clean anyway (an ended head is dropped where it is
   * seen, admission repairs a queue's ended runs). Nothing waits for it, yet this client's later
   * commands see it done: the `{prefix}` slot is one connection, which runs them in order, and
   * `close()` QUITs behind it.
   */
  ended(runId: string, flow: string): void {
    this.drop([this.keys.unfinished(flow), this.keys.due], 'ended', [
      runId,
      '*',
    ]).catch(() => undefined);
  }

  /** Removes (runId, born seen) entries from index sets, and from their queues as `mode` says. */
  async drop(sets: string[], mode: DropMode, entries: string[]): Promise<void> {
    if (entries.length === 0) return;
    await storeScript(
      this.client,
      'aaIndexDrop',
      [this.keys.born, this.keys.queued, ...sets],
      [mode, this.keys.queuePrefix, ...entries],
    );
  }

  /**
   * Heads of a scanned index chunk, sent together (one round trip, across Cluster nodes too), and
   * the (runId, born) entries whose head is missing and old enough to remove.
   */
  async readHeads(
    [now, , born]: Scan,
    ids: string[],
  ): Promise<{ heads: Array<RunHead | undefined>; gone: string[] }> {
    const heads = await this.readHeadFields(ids);
    const old = ids.filter((_, i) => {
      const at = born[i];
      const aged = at == null || now - Number(at) >= CREATE_WINDOW_MS;
      return heads[i] === undefined && aged;
    });
    // A hash that still holds rows lost its head below the store: its entry stays, for
    // listHeadless to report; only a hash that is gone whole (expired) leaves the index.
    const rows = await this.holdRows(old);
    const gone = old.flatMap((id, j) =>
      rows[j] ? [] : [id, born[ids.indexOf(id)] ?? ''],
    );
    return { heads, gone };
  }

  /** Whether each run's hash still holds any field (sent together). */
  private async holdRows(ids: readonly string[]): Promise<boolean[]> {
    if (ids.length === 0) return [];
    const lengths = await guarded(STORE, undefined, () =>
      Promise.all(ids.map((id) => this.client.hlen(this.keys.runHash(id)))),
    );
    return lengths.map((n) => n > 0);
  }

  /**
   * The heads of `ids`, sent together (one round trip, across Cluster nodes too): only the head's
   * fields of each run hash, which also holds the run's checkpoints and call records.
   */
  async readHeadFields(
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

  /**
   * The heads with their owners' renewed leases (see redis.leases.ts) and their queue placements
   * (redis.placement.ts): two reads sent together, each only for the heads that need it.
   */
  async complete(heads: RunHead[]): Promise<RunHead[]> {
    await guarded(STORE, undefined, () =>
      Promise.all([
        withOwnerLeases(this.client, this.keys, heads),
        withPlacements(this.client, this.keys, heads),
      ]),
    );
    return heads;
  }
}
