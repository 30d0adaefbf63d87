/* eslint-disable @typescript-eslint/require-await -- each method is async to honour the port but does
   its work synchronously, before any await: that is what makes every write atomic here. */
import { CheckpointConflict } from '../../errors';
import { Messages } from '../../errors/messages';
import {
  CheckpointStore,
  UNFINISHED,
  type CallRecord,
  type CheckpointRecord,
  type AdmitQuery,
  type DueQuery,
  type Enqueued,
  type QueuePlacement,
  type HeadlessPage,
  type HistoryPage,
  type ListQuery,
  type ListUnfinishedOptions,
  type RunHead,
  type RunPage,
  type SaveOptions,
  type StreamQuery,
  type StreamRecord,
} from './checkpoint-store';
import { checkCallOrder, compareCallKeys, type CallKey } from './call-order';
import { MemoryStreams } from './memory.streams';
import { admitWaiting, type MemoryRun } from './memory.queues';

/**
 * Keeps runs in this process's memory: for tests and single-process use. Every method runs
 * synchronously before its first await, so each write is atomic like a transaction.
 * @publicApi
 */
export class MemoryCheckpointStore extends CheckpointStore {
  readonly shared = false;
  protected readonly runs = new Map<string, MemoryRun>();
  private readonly streams = new MemoryStreams();
  private counter = 0;

  constructor(private readonly now: () => number = Date.now) {
    super();
  }

  async save(
    checkpoint: CheckpointRecord,
    options: SaveOptions = {},
  ): Promise<void> {
    const run = this.runs.get(checkpoint.runId);
    if (
      checkpoint.step === 0
        ? run !== undefined
        : run?.head.step !== checkpoint.step - 1
    ) {
      throw new CheckpointConflict(
        Messages.conflictStep(
          checkpoint.runId,
          checkpoint.step,
          run?.head.step,
        ),
        checkpoint.runId,
      );
    }
    // An ended run says so first, as the SQL and Redis stores do (a stale segment included).
    if (run && !UNFINISHED.includes(run.head.status)) {
      throw new CheckpointConflict(
        Messages.ended(checkpoint.runId, run.head.status),
        checkpoint.runId,
      );
    }
    if (
      run &&
      checkpoint.segment !== run.head.segment &&
      checkpoint.segment !== run.head.segment + 1
    ) {
      throw new CheckpointConflict(
        Messages.fenced(checkpoint.runId, checkpoint.segment, run.head.segment),
        checkpoint.runId,
      );
    }
    if (
      run &&
      options.expectCalls !== undefined &&
      run.head.calls !== options.expectCalls
    ) {
      throw new CheckpointConflict(
        Messages.logMoved(checkpoint.runId),
        checkpoint.runId,
      );
    }
    const lastCall = options.calls?.length
      ? run
        ? this.checkCalls(run, run.head.segment, options.calls)
        : checkCallOrder(checkpoint.runId, options.calls)
      : run?.head.lastCall;

    const target: MemoryRun = run ?? {
      head: { ...columns(checkpoint), updatedAt: 0, calls: 0, sealed: '' },
      checkpoints: [],
      calls: new Map(),
      created: ++this.counter,
    };
    for (const call of options.calls ?? [])
      target.calls.set(callKey(call), { ...call });
    target.checkpoints.push({ ...checkpoint });
    const head: RunHead = {
      runId: checkpoint.runId,
      flow: checkpoint.flow,
      step: checkpoint.step,
      status: checkpoint.status,
      segment: checkpoint.segment,
      updatedAt: this.now(),
      // A counter, as the other stores keep it: rows lost below the store show as missing.
      calls: (run?.head.calls ?? 0) + (options.calls?.length ?? 0),
      sealed: options.head ?? '',
    };
    // Assigned, not spread from conditional objects: this runs on every write.
    if (run?.head.queue) head.queue = run.head.queue;
    // Frozen: heads handed out share it, and it is what this store orders appends by.
    if (lastCall) head.lastCall = Object.freeze(lastCall);
    if (options.owner !== undefined) head.owner = options.owner;
    if (options.leaseExpiresAt !== undefined)
      head.leaseExpiresAt = options.leaseExpiresAt;
    target.head = head;
    this.runs.set(checkpoint.runId, target);
  }

  async enqueue(
    checkpoint: CheckpointRecord,
    placement: QueuePlacement,
    options: Pick<SaveOptions, 'head'> = {},
  ): Promise<Enqueued> {
    const { queue, key, dedupeKey, priority = 0, availableAt } = placement;
    if (dedupeKey !== undefined) {
      for (const run of this.runs.values()) {
        if (
          run.dedupeKey === dedupeKey &&
          run.head.queue?.name === queue &&
          UNFINISHED.includes(run.head.status)
        )
          return { runId: run.head.runId, created: false };
      }
    }
    // The queue state is set before anything awaits: no look may see the run without it.
    const existed = this.runs.has(checkpoint.runId);
    const saved = this.save(checkpoint, options);
    const run = this.runs.get(checkpoint.runId);
    if (!existed && run) {
      run.head.queue = {
        name: queue,
        ...(key !== undefined && { key }),
        priority,
        availableAt,
      };
      if (dedupeKey !== undefined) run.dedupeKey = dedupeKey;
    }
    await saved;
    return { runId: checkpoint.runId, created: true };
  }

  async admit(query: AdmitQuery): Promise<RunHead[]> {
    return admitWaiting(this.runs.values(), query);
  }

  async latest(runId: string): Promise<CheckpointRecord | undefined> {
    const cps = this.runs.get(runId)?.checkpoints;
    const last = cps?.[cps.length - 1];
    return last && { ...last };
  }

  async head(runId: string): Promise<RunHead | undefined> {
    const head = this.runs.get(runId)?.head;
    return head && { ...head };
  }

  async listUnfinished(
    flow: string,
    options: ListUnfinishedOptions = {},
  ): Promise<RunHead[]> {
    const { leaseExpiredBefore, after, limit = 100 } = options;
    return [...this.runs.values()]
      .map((r) => r.head)
      .filter(
        (h) =>
          h.flow === flow &&
          UNFINISHED.includes(h.status) &&
          h.queue?.availableAt === undefined &&
          (after === undefined || h.runId > after) &&
          (leaseExpiredBefore === undefined ||
            h.leaseExpiresAt === undefined ||
            h.leaseExpiresAt < leaseExpiredBefore),
      )
      .sort((a, b) => (a.runId < b.runId ? -1 : a.runId > b.runId ? 1 : 0))
      .slice(0, limit)
      .map((h) => ({ ...h }));
  }

  async delete(runId: string): Promise<boolean> {
    this.streams.delete(runId);
    return this.runs.delete(runId);
  }

  async appendStream(
    runId: string,
    segment: number,
    entries: readonly Omit<StreamRecord, 'offset'>[],
    keep: number,
  ): Promise<number> {
    if (!entries.length) throw new TypeError(Messages.streamEmptyAppend(runId));
    const run = this.runs.get(runId);
    if (!run || run.head.segment !== segment || run.head.status !== 'running')
      throw new CheckpointConflict(
        Messages.fenced(runId, segment, run?.head.segment),
        runId,
      );
    return this.streams.append(runId, entries, keep);
  }

  async readStream(
    runId: string,
    query?: StreamQuery,
  ): Promise<StreamRecord[]> {
    return this.streams.read(runId, query);
  }

  async recordCall(
    runId: string,
    segment: number,
    records: CallRecord[],
    head?: string,
  ): Promise<void> {
    const run = this.runs.get(runId);
    if (!run)
      throw new CheckpointConflict(
        Messages.fenced(runId, segment, undefined),
        runId,
      );
    const last = this.checkCalls(run, segment, records);
    if (records.length) run.head.lastCall = Object.freeze(last);
    for (const call of records) run.calls.set(callKey(call), { ...call });
    run.head.calls += records.length;
    run.head.sealed = head ?? '';
  }

  async calls(runId: string, superstep: number): Promise<CallRecord[]> {
    const run = this.runs.get(runId);
    if (!run) return [];
    return [...run.calls.values()]
      .filter((c) => c.superstep === superstep)
      .sort(compareCallKeys)
      .map((c) => ({ ...c }));
  }

  async list(query: ListQuery = {}): Promise<RunPage> {
    const { flow, status, before, limit = 50 } = query;
    const cursor = before === undefined ? Infinity : Number(before);
    const page = [...this.runs.values()]
      .filter(
        (r) =>
          r.created < cursor &&
          (flow === undefined || r.head.flow === flow) &&
          (status === undefined || r.head.status === status),
      )
      .sort((a, b) => b.created - a.created)
      .slice(0, limit + 1);
    const more = page.length > limit;
    const runs = page.slice(0, limit);
    const last = runs[runs.length - 1];
    return {
      runs: runs.map((r) => ({ ...r.head })),
      ...(more && last && { next: String(last.created) }),
    };
  }

  async listDue(query: DueQuery): Promise<RunHead[]> {
    const { now, flows, limit = 100 } = query;
    const due = (h: RunHead) =>
      UNFINISHED.includes(h.status) &&
      h.queue?.availableAt === undefined &&
      // A paused run without a deadline waits for a person, however long.
      (h.leaseExpiresAt === undefined
        ? h.status !== 'paused'
        : h.leaseExpiresAt < now) &&
      (flows === undefined || flows.includes(h.flow));
    return [...this.runs.values()]
      .map((r) => r.head)
      .filter(due)
      .sort(
        (a, b) =>
          (a.leaseExpiresAt ?? -Infinity) - (b.leaseExpiresAt ?? -Infinity) ||
          (a.runId < b.runId ? -1 : a.runId > b.runId ? 1 : 0),
      )
      .slice(0, limit)
      .map((h) => ({ ...h }));
  }

  /** Never any: this store keeps a run's rows under its head, and nothing edits them below it. */
  async listHeadless(): Promise<HeadlessPage> {
    return { runIds: [] };
  }

  async history(runId: string): Promise<HistoryPage> {
    const run = this.runs.get(runId);
    return {
      checkpoints: (run?.checkpoints ?? []).map((c) => ({ ...c })),
      calls: [...(run?.calls.values() ?? [])]
        .sort(compareCallKeys)
        .map((c) => ({ ...c })),
    };
  }

  async renewLeases(
    owner: string,
    leaseExpiresAt: number,
    runIds: readonly string[],
  ): Promise<number> {
    let renewed = 0;
    for (const runId of runIds) {
      const head = this.runs.get(runId)?.head;
      if (head?.owner === owner && head.status === 'running') {
        head.leaseExpiresAt = leaseExpiresAt;
        renewed++;
      }
    }
    return renewed;
  }

  async close(): Promise<void> {
    // Nothing to release: the runs live as long as this object.
  }

  /** Fencing and order (see call-order.ts): throws before anything is written; the new last key. */
  private checkCalls(
    run: MemoryRun,
    segment: number,
    records: CallRecord[],
  ): CallKey {
    const { head } = run;
    if (segment !== head.segment || head.status !== 'running') {
      throw new CheckpointConflict(
        Messages.fenced(head.runId, segment, head.segment),
        head.runId,
      );
    }
    for (const call of records) {
      if (call.segment !== segment || call.runId !== head.runId) {
        throw new CheckpointConflict(
          Messages.fenced(head.runId, call.segment, head.segment),
          head.runId,
        );
      }
    }
    return checkCallOrder(head.runId, records, run.head.lastCall);
  }
}

function columns(
  c: CheckpointRecord,
): Omit<RunHead, 'updatedAt' | 'calls' | 'sealed'> {
  return {
    runId: c.runId,
    flow: c.flow,
    step: c.step,
    status: c.status,
    segment: c.segment,
  };
}

function callKey(c: CallRecord): string {
  return `${c.segment}/${c.superstep}/${c.seq}`;
}
