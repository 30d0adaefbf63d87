/**
 * The Redis store's due index, `{P}:due`: each unfinished run scored by when it may be due (its
 * lease expiry, wake time or deadline; 0 for at once). A score may be early, never late: a look
 * reads each candidate's head, takes the due ones, rescores the others to their due time and drops
 * ended runs and paused ones without a deadline. Early costs a read; late would hide a run whose
 * worker died. The run's hash and `{P}:due` are in different slots (no script writes both), so the
 * writers order their writes to leave no score later than its head's due time, whatever the
 * interleaving (a write that lowers, ZADD LT, is always safe):
 *
 * - A claim (a segment taken over) scores the run at its new lease BEFORE its save script (a crash
 *   right after leaves an early candidate) and lowers it to that lease AFTER: a raise based on a
 *   head read before the claim landed cannot outlast it.
 * - A save that puts a run to sleep, or pauses it with a deadline, sets the score to that time
 *   AFTER its script (plain ZADD: a renewal may have raised it past that), then reads the head
 *   again: if a later save moved the run on meanwhile, it lowers the score to that save's due time.
 *   A crash between the script and the ZADD leaves the score of its last lease: the run is found
 *   earlier or later than it wakes, never lost.
 * - A renewal raises scores first (ZADD XX GT), THEN reads the heads, and lowers the score of each
 *   run that is no longer a running run of that owner to its head's due time: a sleep saved before
 *   that read is seen there, one saved after it sets its own score after the raise.
 * - A look that raises or drops candidates reads their heads again afterwards, and lowers (adds
 *   back) those that a save moved on in between.
 */
import { UNFINISHED, type DueQuery, type RunHead } from '../checkpoint-store';
import { guarded } from '../transient-errors';
import { STORE, storeScript, type RedisClient } from './redis.client';
import type { RedisKeys } from './redis.layout';
import { waiting, type RedisRunIndex, type Scan } from './redis.index';

/**
 * A head's score in `{P}:due`: its due time, 0 for at once (a running or sleeping run without
 * one); undefined when it is never due (ended, or paused without a deadline).
 */
export function dueScore(head: RunHead): number | undefined {
  if (!UNFINISHED.includes(head.status)) return undefined;
  if (head.leaseExpiresAt !== undefined) return head.leaseExpiresAt;
  return head.status === 'paused' ? undefined : 0;
}

/** What a writer saw of a head (its step and saved due time): a later save changes it. */
function seen(head: Pick<RunHead, 'step' | 'leaseExpiresAt'>): string {
  return `${head.step}:${head.leaseExpiresAt ?? ''}`;
}

export class RedisDueIndex {
  constructor(
    private readonly client: RedisClient,
    private readonly keys: RedisKeys,
    private readonly index: RedisRunIndex,
  ) {}

  /**
   * Due work (`CheckpointStore.listDue`): `{P}:due` read by score up to `now`, each candidate
   * checked against its head (and a running one's owner's lease). What is not due leaves the
   * range, so the next look does not read it again: an ended run, or a paused one without a
   * deadline, leaves the index (a resume enters it again); one not due yet moves to its due time.
   */
  async due(query: DueQuery): Promise<RunHead[]> {
    const { now, flows, limit = 100 } = query;
    if (flows?.length === 0) return [];
    const chunk = Math.min(Math.max(limit, 32), 500);
    const out: RunHead[] = [];
    for (let offset = 0; out.length < limit;) {
      const scan = (await storeScript(
        this.client,
        'aaScanDue',
        [this.keys.due, this.keys.born],
        [Math.floor(now), offset, chunk],
      )) as Scan;
      const ids = scan[1];
      if (ids.length === 0) break;
      const { heads, gone } = await this.index.readHeads(scan, ids);
      // Before `complete` puts the owners' leases in: what a save changes.
      const before = new Map(heads.map((h, i) => [ids[i]!, h && seen(h)]));
      const live = await this.index.complete(
        heads.filter(
          (h): h is RunHead => h !== undefined && UNFINISHED.includes(h.status),
        ),
      );
      const unfinished = new Map(live.map((h) => [h.runId, h]));
      const leave: string[] = [];
      const later: Array<string | number> = [];
      ids.forEach((id, i) => {
        // No head yet (a creation in flight) stays; an old one is in `gone`.
        if (!heads[i]) return;
        const run = unfinished.get(id);
        const at = run && dueScore(run);
        if (!run || at === undefined) return void leave.push(id, '*');
        // A waiting run is here only after an operator's claim or a refused save of its id: it
        // stays (skipped), since an admission may make it due at any moment.
        if (waiting(run)) return;
        if (at >= now) return void later.push(at, id);
        if (out.length < limit && (!flows || flows.includes(run.flow)))
          out.push(run);
      });
      await Promise.all([
        this.index.drop([this.keys.due], 'index', [...leave, ...gone]),
        later.length && this.client.zadd(this.keys.due, 'XX', ...later),
      ]);
      const moved = [
        ...leave.filter((_, i) => i % 2 === 0),
        ...later.filter((_, i) => i % 2 === 1),
      ].map((id) => [String(id), before.get(String(id))] as const);
      await this.settle(moved);
      if (ids.length < chunk) break;
      // What stayed in the range (due runs, creations in flight) is skipped by offset.
      offset +=
        ids.length - leave.length / 2 - gone.length / 2 - later.length / 2;
    }
    return out;
  }

  /** Puts a run in the due index at `at` (a segment taken over: before its save). */
  async becomesDue(runId: string, at: number): Promise<void> {
    await guarded(STORE, runId, () =>
      this.client.zadd(this.keys.due, at, runId),
    );
  }

  /**
   * After a save's script: a claim lowers the run's score to its new lease (or adds it back);
   * a sleep or a pause with a deadline sets it to that time, then reads the head again (see the
   * file's comment). Other saves leave the index alone.
   */
  saved(
    runId: string,
    step: number,
    status: RunHead['status'],
    lease: number | undefined,
    claimed: boolean,
  ): Promise<void> | undefined {
    const at =
      status === 'sleeping'
        ? (lease ?? 0)
        : status === 'paused'
          ? lease
          : undefined;
    // A run still driven by the worker that saved it (nearly every save): nothing to index, no promise.
    if (at === undefined)
      return claimed ? this.lower(lease ?? 0, runId) : undefined;
    return this.waits(runId, step, lease, at);
  }

  /** A sleeping or paused run: due at `at` (its wake time or its approval's deadline). */
  private async waits(
    runId: string,
    step: number,
    lease: number | undefined,
    at: number,
  ): Promise<void> {
    await guarded(STORE, runId, () =>
      this.client.zadd(this.keys.due, at, runId),
    );
    await this.settle([[runId, seen({ step, leaseExpiresAt: lease })]]);
  }

  /**
   * A renewal's index writes: raises the runs' scores to the new lease (only runs in the index; a
   * release, 0, makes them due at once), THEN reads their heads and lowers the score of each run
   * that is not a running run of `owner` to its head's due time. Returns the runs renewed.
   */
  async renewed(
    owner: string,
    runIds: readonly string[],
    at: number,
  ): Promise<number> {
    if (runIds.length === 0) return 0;
    const members = runIds.flatMap((id) => [at, id]);
    await guarded(STORE, undefined, () =>
      at === 0
        ? this.client.zadd(this.keys.due, 'XX', ...members)
        : this.client.zadd(this.keys.due, 'XX', 'GT', ...members),
    );
    const heads = await this.index.readHeadFields(runIds);
    let renewed = 0;
    const lower: Array<string | number> = [];
    heads.forEach((head, i) => {
      if (!head) return;
      if (head.owner === owner && head.status === 'running')
        return void renewed++;
      const score = dueScore(head);
      if (score !== undefined && at !== 0) lower.push(score, runIds[i]!);
    });
    // XX: a renewal adds no run to the index (a waiting run is not in it).
    if (lower.length)
      await guarded(STORE, undefined, () =>
        this.client.zadd(this.keys.due, 'XX', 'LT', ...lower),
      );
    return renewed;
  }

  /**
   * After a write to `{P}:due` based on a head read before it: reads the heads again and lowers
   * (adds back) the score of each one a save changed meanwhile to its due time.
   */
  private async settle(
    entries: ReadonlyArray<readonly [string, string | undefined]>,
  ): Promise<void> {
    if (entries.length === 0) return;
    const heads = await this.index.readHeadFields(entries.map(([id]) => id));
    const lower: Array<string | number> = [];
    heads.forEach((head, i) => {
      const [id, before] = entries[i]!;
      const score = head && seen(head) !== before && dueScore(head);
      if (typeof score === 'number') lower.push(score, id);
    });
    await this.lower(...lower);
  }

  /** ZADD LT: lowers scores, adds missing runs; never makes a run due later. */
  private async lower(...members: Array<string | number>): Promise<void> {
    if (members.length === 0) return;
    await guarded(STORE, undefined, () =>
      this.client.zadd(this.keys.due, 'LT', ...members),
    );
  }
}
