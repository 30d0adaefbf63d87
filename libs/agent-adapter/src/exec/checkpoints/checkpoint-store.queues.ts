/** The queue side of the store port (`CheckpointStore.enqueue` and `admit`): placements and looks. */

/** A queued run's place on its queue (`RunHead.queue`). Outside the head seal, like the lease. */
export interface RunQueueState {
  name: string;
  /** Its concurrency key (a tenant, a user), if it has one. */
  key?: string;
  /** Lower runs first. */
  priority: number;
  /** While it waits: epoch ms from which it may be admitted. Absent once admitted. */
  availableAt?: number;
  /**
   * Epoch ms it was admitted at; absent while it waits. Never before the end of a run whose place
   * it took: see `CheckpointStore.admit`.
   */
  admittedAt?: number;
}

/** Where `enqueue` puts a run. */
export interface QueuePlacement {
  /** The queue's name. */
  queue: string;
  /** Concurrency key: the queue's `perKey` limit counts the admitted runs of each key. */
  key?: string;
  /** At most one unfinished run per (queue, dedupe key): another enqueue returns that run. */
  dedupeKey?: string;
  /** Lower is admitted first; then by `availableAt`, then in enqueue order. @default 0 */
  priority?: number;
  /** Epoch ms from which the run may be admitted (now, or later for a delay). */
  availableAt: number;
}

/** What `enqueue` did. */
export interface Enqueued {
  /** The run enqueued, or the unfinished run already holding the dedupe key. */
  runId: string;
  /** False when the dedupe key's run was returned and nothing was written. */
  created: boolean;
}

/** One admission look at a queue (`admit`): its limits, checked against the whole fleet. */
export interface AdmitQuery {
  queue: string;
  /** Epoch ms: runs available at or before it; the rate window ends here. */
  now: number;
  /** At most this many runs admitted by this look. */
  limit: number;
  /** At most this many admitted, unfinished (running, paused or sleeping) runs on the queue. */
  concurrency?: number;
  /** At most this many admitted, unfinished runs per concurrency key (runs without a key: no limit). */
  perKey?: number;
  /** At most `limit` runs admitted in any window of `intervalMs`. */
  rate?: { limit: number; intervalMs: number };
  /**
   * The admitting worker and the lease it takes on what it admits: no other worker finds those
   * runs due before `leaseExpiresAt`, so the admitter claims them and one worker, not every one,
   * wakes for each run; if it dies first they fall due when the lease expires. Without them an
   * admitted run is due at once, for any worker.
   */
  owner?: string;
  leaseExpiresAt?: number;
}
