/** A queue's options and their checked form: what the runner's options and the queues share. */

/**
 * A queue's flow control, the same on every worker of the fleet: each admission counts over the
 * whole fleet's runs in the store, so the limits hold however many workers take from the queue.
 * @publicApi
 */
export interface QueueOptions {
  /** At most this many of the queue's runs started and unfinished (running or paused) at once. */
  concurrency?: number;
  /** At most this many per concurrency key (a tenant, a user): `enqueue`'s `key`. */
  perKey?: number;
  /** At most `limit` runs started in any window of `intervalMs`. */
  rateLimit?: { limit: number; intervalMs: number };
}

/** A queue a worker admits from, with its limits checked. */
export interface QueueLimits extends Omit<QueueOptions, 'rateLimit'> {
  name: string;
  rate?: { limit: number; intervalMs: number };
}

/** Queue names: what every store's columns and keys can hold. */
export const QUEUE_NAME = /^[A-Za-z0-9_.:@-]{1,128}$/;
