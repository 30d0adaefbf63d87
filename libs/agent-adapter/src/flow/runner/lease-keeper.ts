import { RunLeaseHeld } from '../../errors';
import { Messages } from '../../errors/messages';
import type { DurableLogger } from '../../observability/logger';
import { transientReason } from '../../exec/checkpoints/transient-errors';
import { leaseEnd } from '../../exec/durable/lease-end';
import {
  STORE_RETRY,
  type StoreRetry,
} from '../../exec/durable/confirmed-write';
import type {
  CheckpointStore,
  RunHead,
} from '../../exec/checkpoints/checkpoint-store';

/**
 * One worker's run leases: keeps the leases of the runs it drives alive (one store write per
 * interval for all of them) and judges other workers' leases. A run it stops driving (ended,
 * paused, or lost to an error) is no longer renewed, so its lease runs out and another worker may
 * take it.
 */
export class LeaseKeeper {
  /** Runs this worker is driving right now, with how many drives. */
  private readonly driving = new Map<string, number>();
  private renewTimer?: NodeJS.Timeout;
  private renewing = false;
  private closed = false;
  /** Set by `drain`: drives stop at their next superstep boundary. */
  draining = false;
  /** Wakes `drain` whenever a drive ends. */
  private idle?: () => void;

  constructor(
    readonly store: CheckpointStore,
    readonly workerId: string,
    readonly leaseMs: number,
    private readonly logger: DurableLogger,
  ) {}

  /** Marks a run driven (`true`) or no longer driven by this worker. */
  hold(runId: string, driving: boolean): void {
    // Counted: a run recovered here while an older drive of it is still unwinding stays renewed.
    const drives = (this.driving.get(runId) ?? 0) + (driving ? 1 : -1);
    if (drives > 0) this.driving.set(runId, drives);
    else this.driving.delete(runId);
    if (!driving) this.idle?.();
    if (this.driving.size > 0 && !this.renewTimer && !this.closed) {
      this.renewTimer = setInterval(
        () => void this.renew(),
        Math.max(100, Math.floor(this.leaseMs / 3)),
      );
      this.renewTimer.unref();
    } else if (this.driving.size === 0 && this.renewTimer) {
      clearInterval(this.renewTimer);
      this.renewTimer = undefined;
    }
  }

  /** Whether this worker is driving the run now (and so renews its lease). */
  isDriving(runId: string): boolean {
    return this.driving.has(runId);
  }

  /**
   * `RunLeaseHeld` when the run's owner may be alive at `now` (its lease has not expired), or this
   * worker is driving it; runs this worker id owns but is not driving are free (this process
   * restarted under a stable id).
   */
  held(head: RunHead, now: number): RunLeaseHeld | undefined {
    const { runId, status, owner, leaseExpiresAt } = head;
    if (status !== 'running') return undefined;
    // Driven here: this worker is alive, however late its last renewal (a stalled event loop); its
    // own takeover taking the run would only fence its own drive.
    if (this.driving.has(runId))
      return new RunLeaseHeld(
        runId,
        owner ?? this.workerId,
        leaseExpiresAt ?? now,
      );
    if (leaseExpiresAt === undefined || leaseExpiresAt < now) return undefined;
    if (owner === this.workerId && !this.driving.has(runId)) return undefined;
    return new RunLeaseHeld(runId, owner ?? '?', leaseExpiresAt);
  }

  /**
   * Gives up a run this worker stopped driving (the store failed it, or a call waits for a
   * decision): its lease is set to
   * 0, so another worker may take it at once rather than when it runs out. The store that
   * just failed the run is often still failing: the release is tried again, with the writer's
   * backoff (STORE_RETRY), while the failure may pass; if it never lands the lease runs out as usual.
   */
  async release(runId: string, retry: StoreRetry = STORE_RETRY): Promise<void> {
    let delay = retry.firstDelayMs;
    for (let attempt = 1; ; attempt++) {
      if (this.driving.has(runId)) return; // another drive of it goes on here
      try {
        await this.store.renewLeases(this.workerId, 0, [runId]);
        return;
      } catch (error) {
        if (attempt >= retry.attempts || !transientReason(error)) {
          this.logger.warn(Messages.releaseFailed(runId, this.workerId), error);
          return;
        }
      }
      await new Promise((resolve) => setTimeout(resolve, delay));
      delay *= 2;
    }
  }

  /**
   * Graceful shutdown: every drive stops at its next superstep boundary (its checkpoint stored, its
   * lease released: `WorkerDraining`); waits up to `deadlineMs` for them, renewing their leases
   * meanwhile, then stops renewing. Resolves with the number of runs still driven then.
   */
  async drain(deadlineMs: number): Promise<number> {
    this.draining = true;
    const until = Date.now() + deadlineMs;
    while (this.driving.size > 0 && Date.now() < until) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, until - Date.now());
        this.idle = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.idle = undefined;
    }
    const left = this.driving.size;
    if (left > 0)
      this.logger.warn(Messages.drainTimedOut(this.workerId, left, deadlineMs));
    this.close();
    return left;
  }

  /** Stops renewing (for shutdown): the runs still driven here expire and become recoverable. */
  close(): void {
    this.closed = true;
    if (this.renewTimer) clearInterval(this.renewTimer);
    this.renewTimer = undefined;
  }

  private async renew(): Promise<void> {
    if (this.renewing || this.driving.size === 0) return; // a slow store: skip, never pile up
    this.renewing = true;
    try {
      await this.store.renewLeases(
        this.workerId,
        leaseEnd(Date.now(), this.leaseMs),
        [...this.driving.keys()],
      );
    } catch (error) {
      this.logger.warn(Messages.renewalFailed(this.workerId), error);
    } finally {
      this.renewing = false;
    }
  }
}
