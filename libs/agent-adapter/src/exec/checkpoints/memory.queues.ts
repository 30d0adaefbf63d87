import {
  UNFINISHED,
  type AdmitQuery,
  type CallRecord,
  type CheckpointRecord,
  type RunHead,
  type RunQueueState,
} from './checkpoint-store';

/** One run in the memory store. */
export interface MemoryRun {
  head: RunHead;
  checkpoints: CheckpointRecord[];
  /** key `${segment}/${superstep}/${seq}` */
  calls: Map<string, CallRecord>;
  /** insertion order, for "newest first" listing */
  created: number;
  dedupeKey?: string;
}

/**
 * The memory store's admission (see the port's `admit`): counted over the queue's runs in one
 * synchronous pass, so it is atomic like every write of this store.
 */
export function admitWaiting(
  runs: Iterable<MemoryRun>,
  query: AdmitQuery,
): RunHead[] {
  const { queue, now, concurrency, perKey, rate } = query;
  const all = [...runs];
  const onQueue = all.map((r) => r.head).filter((h) => h.queue?.name === queue);
  const active = onQueue.filter(
    (h) => h.queue?.admittedAt !== undefined && UNFINISHED.includes(h.status),
  );
  const recent = rate
    ? onQueue.filter(
        (h) => (h.queue?.admittedAt ?? -Infinity) > now - rate.intervalMs,
      ).length
    : 0;
  let room = Math.min(
    query.limit,
    concurrency === undefined ? Infinity : concurrency - active.length,
    rate === undefined ? Infinity : rate.limit - recent,
  );
  // Never before the end of a run whose place it takes (the port's `admit`).
  const at =
    concurrency === undefined && perKey === undefined
      ? now
      : onQueue.reduce(
          (t, h) =>
            h.queue?.admittedAt === undefined || UNFINISHED.includes(h.status)
              ? t
              : Math.max(t, h.updatedAt),
          now,
        );
  const perKeyActive = new Map<string, number>();
  for (const h of active)
    if (h.queue?.key !== undefined)
      perKeyActive.set(h.queue.key, (perKeyActive.get(h.queue.key) ?? 0) + 1);
  const waiting = all
    .filter(
      (r) =>
        r.head.queue?.name === queue &&
        r.head.status === 'running' &&
        r.head.queue.availableAt !== undefined &&
        r.head.queue.availableAt <= now,
    )
    .sort(
      (a, b) =>
        (a.head.queue?.priority ?? 0) - (b.head.queue?.priority ?? 0) ||
        (a.head.queue?.availableAt ?? 0) - (b.head.queue?.availableAt ?? 0) ||
        a.created - b.created,
    );
  const admitted: RunHead[] = [];
  for (const { head } of waiting) {
    if (room <= 0) break;
    const place = head.queue as RunQueueState;
    if (perKey !== undefined && place.key !== undefined) {
      const n = perKeyActive.get(place.key) ?? 0;
      if (n >= perKey) continue;
      perKeyActive.set(place.key, n + 1);
    }
    const { availableAt: _, ...rest } = place;
    head.queue = { ...rest, admittedAt: at };
    if (query.owner !== undefined) head.owner = query.owner;
    if (query.leaseExpiresAt !== undefined)
      head.leaseExpiresAt = query.leaseExpiresAt;
    admitted.push({ ...head });
    room--;
  }
  return admitted;
}
