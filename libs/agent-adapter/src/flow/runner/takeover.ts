import {
  CheckpointConflict,
  CheckpointStoreUnavailable,
  RunLeaseHeld,
  WorkerDraining,
} from '../../errors';
import { Messages } from '../../errors/messages';
import type {
  CheckpointStore,
  RunHead,
} from '../../exec/checkpoints/checkpoint-store';
import type { DurableLogger } from '../../observability/logger';
import type { RecoverAllOptions, RecoveryOutcome } from '../flow.interfaces';
import { integerOption, type OptionNames } from './flow-runner.options';
import { admitQuery, type QueueLimits } from './queues';
import { leaseEnd } from '../../exec/durable/lease-end';

/** One flow whose due runs a takeover recovers, and how (the runner's lease-checked recovery). */
export interface TakeoverSource {
  flow: string;
  recover(runId: string): Promise<RecoveryOutcome<unknown>>;
}

/** For `FlowRunner.takeOver` (`rerunInDoubt` and `ctxFor` as in `recoverAll`). @publicApi */
export interface TakeoverOptions extends Pick<
  RecoverAllOptions,
  'rerunInDoubt' | 'ctxFor'
> {
  /**
   * How often this worker looks for due work; each wait is drawn between half and one and a half
   * times this, so a fleet's workers look at different moments and one of them takes a run while
   * the others find it no longer due. @default a fifth of the lease, at most 1000 ms
   */
  everyMs?: number;
  /** Runs taken over at the same time. @default 4 */
  concurrency?: number;
  /** Each settled takeover (a recovered run, or why not), for logs and metrics. */
  onOutcome?: (flow: string, outcome: RecoveryOutcome<unknown>) => void;
}

/**
 * The one check of a takeover's options, with their defaults (the Nest module checks its
 * `takeover` option with it at startup).
 */
export function takeoverSettings(
  options: TakeoverOptions,
  leaseMs: number,
  names?: Pick<OptionNames, 'owner'>,
): { everyMs: number; concurrency: number } {
  const fifth = Math.max(50, Math.min(1000, Math.floor(leaseMs / 5)));
  return {
    everyMs: integerOption('everyMs', options.everyMs, fifth, 10, names),
    concurrency: integerOption('concurrency', options.concurrency, 4, 1, names),
  };
}

/** Due runs listed per look, beyond those known to be stuck. */
const PAGE = 100;
/** Runs that cannot be finished remembered per worker (each is looked at again once it changes). */
const MAX_STUCK = 10_000;

/**
 * Continuous takeover: every `everyMs` (jittered), asks the store for due work (`listDue`: running
 * runs whose owner's lease expired, O(due)) and recovers each due run of its flows through the
 * runner's lease-checked recovery, so a run whose worker died is finished by a live worker within
 * the lease plus one look, with no restart. The claim is the store's compare-and-set: workers that
 * race for a run cannot both take it. A run that cannot be finished as it stands (it needs a
 * decision, it is corrupt) is reported once and not retried until its head changes (an operator's
 * decision writes a checkpoint).
 */
export class Takeover {
  private timer?: NodeJS.Timeout;
  /** When the pending timer fires (epoch ms). */
  private timerAt = 0;
  /** The earliest due time the last look saw ahead (a wake, a deadline, a lease ending). */
  private nextDue?: number;
  private stopped = false;
  private looking?: Promise<void>;
  private readonly inFlight = new Map<string, Promise<void>>();
  /** Run id → the head seal at which it could not be finished (a decision, corruption...). */
  private readonly stuck = new Map<string, string>();
  private readonly everyMs: number;
  private readonly concurrency: number;
  private readonly sources: Map<string, TakeoverSource>;
  private readonly queues: () => readonly QueueLimits[];
  /** The queue the next admission starts at: each look starts one further, so all get a turn. */
  private nextQueue = 0;
  /**
   * The last look filled its room (an admission, or due runs left for lack of room): more may
   * wait, so a settled run triggers a look.
   */
  private backlog = false;
  /** A wake came during a look: look again right after it. */
  private again = false;
  private readonly stopListeners: Array<() => void> = [];
  private readonly owner: string;
  private readonly leaseMs: number;

  constructor(
    private readonly store: CheckpointStore,
    sources: readonly TakeoverSource[],
    options: TakeoverOptions & {
      leaseMs: number;
      /** The worker id admissions are made under (the runner's): its lease covers them. */
      owner: string;
      /**
       * Queues to admit runs from each look (see `queuesOf`); a function is asked at each look
       * (schedules declared later add theirs).
       */
      queues?: readonly QueueLimits[] | (() => readonly QueueLimits[]);
    },
    private readonly logger: DurableLogger,
  ) {
    const settings = takeoverSettings(options, options.leaseMs);
    this.everyMs = settings.everyMs;
    this.concurrency = settings.concurrency;
    this.sources = new Map(sources.map((s) => [s.flow, s]));
    const queues = options.queues ?? [];
    this.queues = typeof queues === 'function' ? queues : () => queues;
    this.owner = options.owner;
    this.leaseMs = options.leaseMs;
    this.onOutcome = options.onOutcome;
  }

  private readonly onOutcome?: TakeoverOptions['onOutcome'];

  /** Starts looking (the first look after one wait). */
  start(): this {
    if (!this.stopped && !this.timer) this.schedule();
    return this;
  }

  /**
   * Looks once now: lists due work and starts recovering what it can take (up to `concurrency` in
   * flight). Resolves with the number of runs started; their recoveries go on.
   */
  async lookNow(): Promise<number> {
    if (this.stopped || this.sources.size === 0) return 0;
    const admitted = await this.admit();
    const now = Date.now();
    // Also what falls due before the next look could come: it gets a timer of its own, so a
    // sleeping run wakes (a deadline passes) on time, not up to a look late.
    const heads = await this.store.listDue({
      now: now + Math.ceil(this.everyMs * 1.5),
      flows: [...this.sources.keys()],
      limit: PAGE + this.stuck.size,
    });
    this.nextDue = undefined;
    if (heads.length < PAGE + this.stuck.size) {
      // Every due run was listed: forget decisions no longer due (decided, ended).
      const due = new Set(heads.map((h) => h.runId));
      for (const id of this.stuck.keys())
        if (!due.has(id)) this.stuck.delete(id);
    }
    let started = admitted;
    for (const head of heads) {
      const at = head.leaseExpiresAt;
      if (at !== undefined && at >= now) {
        this.nextDue = Math.min(this.nextDue ?? Infinity, at);
        continue;
      }
      if (this.stopped) continue;
      if (this.inFlight.size >= this.concurrency) {
        // Due now, no room: a place that comes free looks again at once (as for queues), not
        // at the next tick (many runs waking at one time would wake a look apart, batch by batch).
        this.backlog = true;
        continue;
      }
      if (this.take(head)) started++;
    }
    if (this.nextDue !== undefined) this.lookBy(this.nextDue);
    return started;
  }

  /** Starts recovering `head`'s run unless it is in flight here or stuck; whether it started. */
  private take(head: RunHead): boolean {
    const source = this.sources.get(head.flow);
    if (!source || this.inFlight.has(head.runId)) return false;
    if (this.stuck.get(head.runId) === head.sealed) return false;
    const task = source
      .recover(head.runId)
      .then((outcome) => this.settled(source.flow, head.sealed, outcome))
      .catch((error: unknown) =>
        this.logger.error(Messages.takeoverFailed(String(error))),
      )
      .finally(() => {
        this.inFlight.delete(head.runId);
        // A place came free and the queues may hold more: take the next at once.
        if (this.backlog) this.wake();
      });
    this.inFlight.set(head.runId, task);
    return true;
  }

  /**
   * Looks again as soon as the look in progress (if any) ends, instead of at the next tick: a run
   * was enqueued here, or a place came free. With `at`, looks at that time if the next look would
   * come later (a run this worker put to sleep, or paused with a deadline, falls due then).
   */
  wake(at?: number): void {
    if (at !== undefined) {
      this.nextDue = Math.min(this.nextDue ?? Infinity, at);
      this.lookBy(at);
      return;
    }
    if (this.stopped || !this.timer) {
      this.again = !this.stopped;
      return;
    }
    clearTimeout(this.timer);
    this.timer = undefined;
    this.schedule(0);
  }

  /** Calls `listener` once the takeover stops. */
  onStop(listener: () => void): void {
    this.stopListeners.push(listener);
  }

  /**
   * Admits what fits in this worker's free places from each queue, in turn (the store checks the
   * queue's limits over the whole fleet), under this worker's lease, and starts driving each run
   * admitted: no other worker finds them due meanwhile, so one worker wakes for each run. If this
   * worker dies first, they fall due when the lease expires, like any run whose worker died.
   * Resolves with the number of runs started.
   */
  private async admit(): Promise<number> {
    const queues = this.queues();
    const count = queues.length;
    this.backlog = false;
    let started = 0;
    const now = Date.now();
    for (let i = 0; i < count && !this.stopped; i++) {
      const room = this.concurrency - this.inFlight.size;
      if (room <= 0) break;
      const queue = queues[(this.nextQueue + i) % count] as QueueLimits;
      try {
        const admitted = await this.store.admit({
          ...admitQuery(queue, now, room),
          owner: this.owner,
          leaseExpiresAt: leaseEnd(now, this.leaseMs),
        });
        for (const head of admitted) if (this.take(head)) started++;
        // A run of a flow this worker does not have: its lease is released at once, so a worker
        // that has the flow takes it now rather than when the lease would expire.
        const foreign = admitted.filter((h) => !this.sources.has(h.flow));
        if (foreign.length > 0)
          await this.store.renewLeases(
            this.owner,
            0,
            foreign.map((h) => h.runId),
          );
        if (admitted.length === room) this.backlog = true;
      } catch (error) {
        // A store that fails an admission (down, a failover) is asked again next look.
        this.logger.warn(Messages.admissionFailed(queue.name, String(error)));
      }
    }
    this.nextQueue = count === 0 ? 0 : (this.nextQueue + 1) % count;
    return started;
  }

  /**
   * Stops looking and waits, up to `deadlineMs` (default 10 s), for the look in progress and the
   * takeovers in flight to settle. Bounded because a look against a store that stopped answering
   * waits on the client's retries (ioredis queues commands while it reconnects): a shutdown must
   * not hang on it. What is still in flight then is harmless to leave: a look only reads and claims
   * under this worker's lease, which is no longer renewed, so its runs fall due elsewhere.
   * Resolves with the number of takeovers still in flight.
   */
  async stop(options: { deadlineMs?: number } = {}): Promise<number> {
    const ms = integerOption('deadlineMs', options.deadlineMs, 10_000, 0);
    this.stopped = true;
    for (const listener of this.stopListeners.splice(0)) listener();
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, ms);
    });
    const settled = (async () => {
      await this.looking;
      await Promise.all(this.inFlight.values());
    })();
    await Promise.race([settled, deadline]);
    clearTimeout(timer);
    return this.inFlight.size;
  }

  /** Brings the pending look forward to `at` (between looks; a look in progress sets its own). */
  private lookBy(at: number): void {
    if (!this.timer || at >= this.timerAt) return;
    clearTimeout(this.timer);
    this.schedule(Math.max(0, at - Date.now()));
  }

  /** The jittered wait, or less if something falls due before it ends. */
  private untilNext(): number {
    const wait = Math.round(this.everyMs * (0.5 + Math.random()));
    if (this.nextDue === undefined) return wait;
    return Math.max(0, Math.min(wait, this.nextDue - Date.now()));
  }

  private schedule(wait = this.untilNext()): void {
    this.timerAt = Date.now() + wait;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.looking = this.lookNow()
        .then(
          () => undefined,
          // A store that fails a look (down, a failover) is looked at again next time.
          (error: unknown) =>
            this.logger.warn(Messages.takeoverLookFailed(String(error))),
        )
        .finally(() => {
          this.looking = undefined;
          const again = this.again;
          this.again = false;
          if (!this.stopped) this.schedule(again ? 0 : this.untilNext());
        });
    }, wait);
    // Not unref'd: a worker that takes over runs is alive until it is stopped, even when nothing
    // else (a server, a connection) keeps its process up.
  }

  private settled(
    flow: string,
    sealed: string,
    outcome: RecoveryOutcome<unknown>,
  ): void {
    const [runId, result] = outcome;
    // Races are not news: another worker took the run first, or renewed it since the listing.
    const race =
      result instanceof CheckpointConflict ||
      result instanceof RunLeaseHeld ||
      result instanceof WorkerDraining;
    // A run this worker cannot finish as it stands (it needs a decision, is corrupt, needs its
    // principal...) is reported once and left until its head changes; a store that failed may
    // pass, so that run is tried again at the next look.
    const cannot =
      result instanceof Error &&
      !race &&
      !(result instanceof CheckpointStoreUnavailable);
    if (cannot && this.stuck.size < MAX_STUCK) this.stuck.set(runId, sealed);
    else this.stuck.delete(runId);
    if (!race) this.onOutcome?.(flow, outcome);
  }
}
