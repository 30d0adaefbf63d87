/**
 * When a lease that a write sets at `now` ends: `leaseMs` later, rounded down to a quarter of
 * `leaseMs`. Writes within one quarter set the same value, so a checkpoint of a running run
 * changes no indexed column of its head and Postgres rewrites the row in place (a HOT update: no
 * index entries, less WAL). The lease left is still more than three quarters of `leaseMs`, and
 * the lease keeper renews every third of it.
 */
export function leaseEnd(now: number, leaseMs: number): number {
  const quantum = Math.max(1, Math.floor(leaseMs / 4));
  return Math.floor((now + leaseMs) / quantum) * quantum;
}
