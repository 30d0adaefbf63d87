import { randomBytes } from 'node:crypto';
import { CheckpointConflict } from '../../errors';
import { Messages } from '../../errors/messages';
import type {
  AdmitQuery,
  CheckpointStore,
  QueuePlacement,
} from '../../exec/checkpoints/checkpoint-store';
import { sealHead } from '../../exec/durable/head-seal';
import type { KeyRing } from '../../exec/durable/key-ring';
import {
  sealCheckpoint,
  type Checkpoint,
  type RunIdentity,
} from '../../exec/durable/records';
import type { Flow } from '../flow.builder';
import type { CompiledFlow } from '../flow.graph';
import { checkRunId } from '../run-id';
import { QUEUE_NAME, type QueueLimits } from './queue-limits';
import { identityOf } from './run-access';
import { startedAlready, type RunSources } from './run-checks';
import { startCheckpoint } from './run-transitions';

export type { QueueLimits, QueueOptions } from './queue-limits';

/** Concurrency and dedupe keys: what every store's columns and keys can hold. */
const KEY_MAX = 200;

/** For `FlowRunner.enqueue`. @publicApi */
export interface EnqueueOptions {
  /** The queue. @default the flow's name (a queue without limits unless the runner names it) */
  queue?: string;
  /** The run's id; 128 random bits when omitted. */
  runId?: string;
  /** Who the run acts for; sealed into every checkpoint. */
  ctx?: RunIdentity;
  /** The concurrency key the queue's `perKey` limit counts (a tenant, a user). */
  key?: string;
  /**
   * At most one unfinished run per dedupe key on the queue: while one is queued, running or
   * paused, enqueueing with its key stores nothing and returns that run.
   */
  dedupeKey?: string;
  /** Lower starts first. @default 0 */
  priority?: number;
  /** Not started before this many ms from now. @default 0 */
  delayMs?: number;
}

/** What `FlowRunner.enqueue` did. @publicApi */
export interface EnqueueResult {
  runId: string;
  /** False when an unfinished run held the dedupe key: `runId` is that run, nothing was stored. */
  created: boolean;
}

/**
 * Where `enqueue` puts a run, from its options, checked before anything is stored: a bad queue
 * name, key, priority or delay is a `TypeError` naming it (the caller's bug at that call).
 */
export function placementOf(
  flow: string,
  options: EnqueueOptions,
  now: number,
): QueuePlacement {
  const queue = options.queue ?? flow;
  if (!QUEUE_NAME.test(queue))
    throw new TypeError(Messages.badQueueName(queue));
  for (const field of ['key', 'dedupeKey'] as const) {
    const value = options[field];
    if (
      value !== undefined &&
      (typeof value !== 'string' ||
        value.length === 0 ||
        value.length > KEY_MAX)
    )
      throw new TypeError(Messages.badQueueKey(field, value));
  }
  const priority = options.priority ?? 0;
  if (!Number.isSafeInteger(priority) || Math.abs(priority) > 1_000_000)
    throw new TypeError(Messages.badEnqueueNumber('priority', priority));
  const delay = options.delayMs ?? 0;
  if (!Number.isSafeInteger(delay) || delay < 0)
    throw new TypeError(Messages.badEnqueueNumber('delayMs', delay));
  return {
    queue,
    ...(options.key !== undefined && { key: options.key }),
    ...(options.dedupeKey !== undefined && { dedupeKey: options.dedupeKey }),
    priority,
    availableAt: now + delay,
  };
}

/** One admission look at `queue` for up to `room` runs. */
export function admitQuery(
  queue: QueueLimits,
  now: number,
  room: number,
): AdmitQuery {
  return {
    queue: queue.name,
    now,
    limit: room,
    ...(queue.concurrency !== undefined && { concurrency: queue.concurrency }),
    ...(queue.perKey !== undefined && { perKey: queue.perKey }),
    ...(queue.rate !== undefined && { rate: queue.rate }),
  };
}

/**
 * `FlowRunner.enqueue`: the run's step 0 from its input, stored on its queue. A run id already
 * stored is a client's retry: its run comes back when it started from the same input.
 */
export async function enqueueRun<S extends object>(
  sources: RunSources,
  flow: Flow<S>,
  input: Partial<S>,
  options: EnqueueOptions,
): Promise<EnqueueResult> {
  const placement = placementOf(flow.name, options, Date.now());
  const compiled = flow.compile();
  const cp = await startFromInput(compiled, input, options, sources.ring);
  try {
    return await enqueueStart(sources.store, sources.ring, cp, placement);
  } catch (error) {
    if (!(error instanceof CheckpointConflict) || options.runId === undefined)
      throw error;
    await startedAlready(sources, compiled, cp, options.ctx);
    return { runId: cp.runId, created: false };
  }
}

/**
 * Stores `cp` (a run's step 0) waiting on its queue, sealed like any save, with its head: it starts
 * when a worker's takeover admits it (any worker with the flow), under the queue's limits.
 */
async function enqueueStart(
  store: CheckpointStore,
  ring: KeyRing,
  cp: Checkpoint,
  placement: QueuePlacement,
): Promise<EnqueueResult> {
  const record = sealCheckpoint(ring, cp);
  const head = sealHead(ring, {
    runId: cp.runId,
    flow: cp.flow,
    step: cp.step,
    status: cp.status,
    segment: cp.segment,
    calls: 0,
    incarnation: cp.incarnation,
  });
  return store.enqueue(record, placement, { head });
}

/**
 * The queues a takeover of `flows` admits from: every queue the runner's options name, and each
 * flow's own (named after it, without limits unless named).
 */
export function queuesOf(
  named: ReadonlyMap<string, QueueLimits>,
  flows: ReadonlyArray<{ name: string }>,
): QueueLimits[] {
  const queues = new Map(named);
  for (const { name } of flows)
    if (!queues.has(name)) queues.set(name, { name });
  return [...queues.values()];
}

/** A run's step 0 from its input (validated by the flow's state), id and identity. */
export async function startFromInput<S extends object>(
  compiled: CompiledFlow<S>,
  input: Partial<S>,
  options: { runId?: string; ctx?: RunIdentity },
  ring: KeyRing,
): Promise<Checkpoint> {
  const state = compiled.state.encode(await compiled.state.fromInput(input));
  const runId = options.runId ?? randomBytes(16).toString('hex');
  checkRunId(runId);
  return startCheckpoint({
    runId,
    flow: compiled,
    state,
    identity: identityOf(options.ctx),
    idemKid: ring.current.id,
  });
}
