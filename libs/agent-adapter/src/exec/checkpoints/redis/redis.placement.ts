/**
 * A queued run's placement in Redis: JSON in its queue's `runs` hash (redis.layout.ts), read into
 * `RunHead.queue`. Values are strings (see redis.queue-scripts.ts), so Lua rewrites keep them exact.
 */
import type {
  QueuePlacement,
  RunHead,
  RunQueueState,
} from '../checkpoint-store';
import type { RedisClient } from './redis.client';
import type { RedisKeys } from './redis.layout';

/** f flow, k concurrency key, d dedupe key, p priority, a availableAt, t admittedAt, m ready member. */
export interface Placement {
  f: string;
  k?: string;
  d?: string;
  p: string;
  a?: string;
  t?: string;
  m?: string;
}

/** The placement an enqueue stores (the script adds `m`). */
export function placementOf(flow: string, place: QueuePlacement): Placement {
  return {
    f: flow,
    ...(place.key !== undefined && { k: place.key }),
    ...(place.dedupeKey !== undefined && { d: place.dedupeKey }),
    p: String(place.priority ?? 0),
    a: String(place.availableAt),
  };
}

/**
 * availableAt as 16 digits, for the ready set's members (sorted as strings): whole ms, from 0 (an
 * earlier time sorts as 0) to 10^16 - 1, past any date. The exact value stays in the placement.
 */
export function sortableTime(ms: number): string {
  const whole = Math.floor(Math.min(Math.max(ms, 0), 1e16 - 1));
  return String(Number.isNaN(whole) ? 0 : whole).padStart(16, '0');
}

/** `RunHead.queue` from a queue's name and a stored placement (malformed: the name alone). */
export function toQueueState(
  name: string,
  raw: string | null | undefined,
): RunQueueState {
  let p: Partial<Placement> = {};
  try {
    if (raw) p = JSON.parse(raw) as Partial<Placement>;
  } catch {
    // An edited placement: the head still says which queue the run is on.
  }
  return {
    name,
    ...(typeof p.k === 'string' && { key: p.k }),
    priority: Number(p.p ?? 0),
    ...(p.a !== undefined && { availableAt: Number(p.a) }),
    ...(p.t !== undefined && { admittedAt: Number(p.t) }),
  };
}

/**
 * Completes the queue state of the heads whose run hash names a queue (`toHead` gives its name
 * alone): their placements, sent together; nothing is read for the others.
 */
export async function withPlacements(
  client: RedisClient,
  keys: RedisKeys,
  heads: RunHead[],
): Promise<RunHead[]> {
  const queued = heads.filter((h) => h.queue !== undefined);
  const raw = await Promise.all(
    queued.map((h) => client.hget(keys.queue(h.queue!.name).runs, h.runId)),
  );
  queued.forEach((head, i) => {
    head.queue = toQueueState(head.queue!.name, raw[i]);
  });
  return heads;
}
