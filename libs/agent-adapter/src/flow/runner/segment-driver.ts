import {
  CheckpointStoreUnavailable,
  RecoveryAttemptsExceeded,
  RecoveryNeedsDecision,
  WorkerDraining,
} from '../../errors';
import { Messages } from '../../errors/messages';
import type {
  CheckpointSavedEvent,
  DurableEvents,
} from '../../events/durable.events';
import type { SuperstepScope } from '../../exec/call-context';
import type { KeyRing } from '../../exec/durable/key-ring';
import type { CallIdentity, Checkpoint } from '../../exec/durable/records';
import type { RunHead } from '../../exec/checkpoints/checkpoint-store';
import type { ReplayBook } from '../../exec/durable/replay';
import type { CheckpointWriteOptions } from '../../exec/durable/segment-writer';
import { SegmentWriter } from '../../exec/durable/segment-writer';
import type { Executor } from '../../exec/executor';
import type { DurableLogger } from '../../observability/logger';
import { traced } from '../../observability/tracing';
import { opensWithCalls, type CompiledFlow } from '../flow.graph';
import type { RunResult } from '../flow.interfaces';
import { runFrontier, sealError } from '../superstep';
import { decisionOf } from './decisions';
import type { LeaseKeeper } from './lease-keeper';
import {
  advanceCheckpoint,
  parkCheckpoint,
  pauseCheckpoint,
  resultOf,
  sleepCheckpoint,
} from './run-transitions';
import { readCutDecided, type RunSources } from './run-checks';
import type { RunnerSettings } from './flow-runner.options';
import { superstepScope, type ScopeParts } from './superstep-scope';

/** What a recovery or resume found of the superstep it took over. */
export interface TakenOver {
  book: ReplayBook;
  /** Records of the current superstep that other segments wrote before this one. */
  seen: number;
  /** A recovery (reported as `run.recovered`), not a resume. */
  recovered: boolean;
  /**
   * An operator's `rerunInDoubt`: the claim goes on from what the store holds even after a
   * failover that may have lost writes (`FailoverNeedsDecision`).
   */
  acceptLostWrites?: boolean;
}

/** What a saved checkpoint's event says besides the checkpoint itself. */
export interface SavedExtra {
  unreplayed?: SuperstepScope['unreplayed'];
  /** The nodes whose superstep this checkpoint closes (or pauses): a loop's event's `stage`. */
  closes?: readonly string[];
}

/**
 * Drives one segment of a run (a start, a recovery or a resume): superstep after superstep, each
 * closed by a checkpoint, until the run ends, pauses, or this worker loses it. Every write goes
 * through the segment's `SegmentWriter`; this class announces what was stored.
 */
export class SegmentDriver {
  private readonly ring: KeyRing;
  private readonly events: DurableEvents;
  private readonly logger: DurableLogger;
  private readonly streams: RunnerSettings['streams'];
  private readonly scopeParts: ScopeParts;

  constructor(
    settings: RunnerSettings,
    private readonly executor: Executor,
    private readonly leases: LeaseKeeper,
    /** Told when a run driven here waits until a time (a sleep, an approval's deadline). */
    private readonly waitsUntil: (at: number) => void = () => undefined,
  ) {
    this.ring = settings.ring;
    this.events = settings.events;
    this.logger = settings.logger;
    this.streams = settings.streams;
    const { ring, streams, approvals } = settings;
    this.scopeParts = { store: leases.store, ring, streams, approvals };
  }

  /** The write channel of the segment `cp` opens or continues, owned by this worker. */
  writerFor(cp: Checkpoint): SegmentWriter {
    return new SegmentWriter(
      this.leases.store,
      this.ring,
      cp.runId,
      cp.segment,
      cp.incarnation,
      { owner: this.leases.workerId, leaseMs: this.leases.leaseMs },
    );
  }

  /** Writes a checkpoint now and announces it (`checkpoint.saved`) once it is stored. */
  async save(
    writer: SegmentWriter,
    cp: Checkpoint,
    options: Omit<CheckpointWriteOptions, 'deferred'> = {},
    extra: SavedExtra = {},
  ): Promise<void> {
    await writer.checkpoint(cp, options);
    this.announce(cp, extra);
  }

  /**
   * Stores a new run's step 0 and drives it; before `callsFirst` nodes step 0 goes out with the
   * first `started` record, as a superstep's checkpoint does. `stored` settles once step 0 is
   * stored or refused (then `driving` fails with the same refusal).
   */
  begin<S extends object>(
    flow: CompiledFlow<S>,
    cp: Checkpoint,
  ): { stored: Promise<void>; driving: Promise<RunResult<S>> } {
    const writer = this.writerFor(cp);
    const first = opensWithCalls(flow, cp.frontier);
    const stored = first
      ? writer
          .checkpoint(cp, { deferred: true })
          .then(() => this.announce(cp, {}))
      : this.save(writer, cp);
    const driving = first
      ? this.drive(flow, cp, writer)
      : stored.then(() => this.drive(flow, cp, writer));
    driving.catch(() => undefined); // read after `stored`: a refusal is not unhandled here
    return { stored, driving };
  }

  /**
   * Takes the run over from a recovery or a resume: writes `cp` (a new segment) with the head's
   * call count as the compare-and-set, then drives that segment on what was taken over.
   */
  async takeOver<S extends object>(
    flow: CompiledFlow<S>,
    cp: Checkpoint,
    expectCalls: number,
    taken: TakenOver,
  ): Promise<RunResult<S>> {
    const writer = this.writerFor(cp);
    await this.save(writer, cp, {
      expectCalls,
      ...(taken.acceptLostWrites && { acceptLostWrites: true }),
    });
    // Stored (one decision won the compare-and-set): announced before it is spent.
    this.announceDecision(cp);
    return this.drive(flow, cp, writer, taken);
  }

  /** `run.decided` for a stored checkpoint that sealed a decision (a resume, a rerun, a resolve). */
  announceDecision(cp: Checkpoint): void {
    const decision = decisionOf(cp);
    if (decision)
      this.events.emit('run.decided', {
        kind: cp.kind,
        runId: cp.runId,
        flow: cp.flow,
        step: cp.step,
        decision,
      });
  }

  /**
   * The end of a recovery or a resume: reads the cut superstep (calls in doubt stop the run here
   * unless `rerunInDoubt`), then writes the transition `next` makes of the calls it decided to run
   * again, and drives the new segment on what it replays.
   */
  async takeOverCut<S extends object>(
    sources: RunSources,
    compiled: CompiledFlow<S>,
    runId: string,
    { head, cp }: { head: RunHead; cp: Checkpoint },
    how: { rerunInDoubt: boolean | undefined; recovered: boolean },
    next: (undecided: CallIdentity[]) => Checkpoint,
  ): Promise<RunResult<S>> {
    const { calls, book, undecided } = await readCutDecided(
      sources,
      runId,
      cp,
      head,
      how.rerunInDoubt,
    );
    return this.takeOver(compiled, next(undecided), head.calls, {
      book,
      seen: calls.length,
      recovered: how.recovered,
      ...(how.rerunInDoubt && { acceptLostWrites: true }),
    });
  }

  /**
   * Dead letter: ends the run as `failed` instead of claiming it again, with a compare-and-set on
   * the head's call count (a worker still driving it is fenced; a call it logged meanwhile makes
   * this conflict).
   */
  async park<S extends object>(
    flow: CompiledFlow<S>,
    cp: Checkpoint,
    expectCalls: number,
  ): Promise<RunResult<S>> {
    const recoveries = cp.recoveries ?? 0;
    const parked = parkCheckpoint(
      cp,
      sealError(
        new RecoveryAttemptsExceeded(cp.runId, recoveries, cp.superstep),
      ),
    );
    await this.save(this.writerFor(parked), parked, { expectCalls });
    return resultOf(flow, parked);
  }

  /** One segment, in its own span when traced. */
  drive<S extends object>(
    flow: CompiledFlow<S>,
    start: Checkpoint,
    writer: SegmentWriter,
    taken?: TakenOver,
  ): Promise<RunResult<S>> {
    return traced(
      'agent-adapter.run',
      () => ({
        'agent_adapter.run_id': start.runId,
        'agent_adapter.flow': start.flow,
        'agent_adapter.segment': start.segment,
        'agent_adapter.step': start.step,
        'agent_adapter.reason': start.reason ?? '',
        'agent_adapter.worker': this.leases.workerId,
      }),
      (span) => {
        const driving = this.driveSegment(flow, start, writer, taken);
        // Untraced (the usual case), the segment's promise as it is: no layer to await.
        if (!span) return driving;
        return driving.then((result) => {
          span.setAttribute('agent_adapter.status', result.status);
          span.setAttribute('agent_adapter.final_step', result.step);
          return result;
        });
      },
    );
  }

  private async driveSegment<S extends object>(
    flow: CompiledFlow<S>,
    start: Checkpoint,
    writer: SegmentWriter,
    taken?: TakenOver,
  ): Promise<RunResult<S>> {
    this.leases.hold(start.runId, true);
    let lost = false;
    try {
      let cp = start;
      let book = taken?.book;
      // Records of the current superstep that other segments wrote before this one took over.
      let seen = taken?.seen ?? 0;
      while (cp.status === 'running') {
        if (this.leases.draining) {
          // Shutting down: stop at this boundary, once its checkpoint (maybe deferred) is stored.
          await writer.settled();
          throw new WorkerDraining(cp.runId, this.leases.workerId, cp.step);
        }
        const scope = superstepScope(cp, writer, book, this.scopeParts);
        const outcome = await traced(
          'agent-adapter.superstep',
          () => ({
            'agent_adapter.run_id': cp.runId,
            'agent_adapter.step': cp.step,
            'agent_adapter.superstep': cp.superstep,
            'agent_adapter.frontier': cp.frontier.join(','),
          }),
          (span) => {
            const running = runFrontier(flow, cp, scope, this.executor);
            if (!span) return running;
            return running.then((out) => {
              span.setAttribute(
                'agent_adapter.replayed',
                scope.replayed.length,
              );
              span.setAttribute('agent_adapter.rerun', scope.rerun.length);
              return out;
            });
          },
        );
        const calls = await writer.drain(); // rethrows a refused or lost call write: this worker stops
        // A pause or a sleep keeps the superstep open (it reruns on resume or waking, replaying
        // what finished) with its decisions so far; any other outcome closes it and drops the
        // spent decisions.
        const next =
          'pause' in outcome
            ? pauseCheckpoint(cp, outcome.pause)
            : 'sleep' in outcome
              ? sleepCheckpoint(cp, outcome.sleep)
              : advanceCheckpoint(
                  cp,
                  outcome,
                  seen + writer.count(cp.superstep),
                );
        const extra: SavedExtra = { closes: cp.frontier };
        if (scope.unreplayed.length) extra.unreplayed = scope.unreplayed;
        const recovered = book !== undefined && taken?.recovered === true;
        if (
          next.status === 'running' &&
          !recovered &&
          opensWithCalls(flow, next.frontier)
        ) {
          // The next nodes only compute until their first call: the checkpoint goes out with that
          // call's `started` record (one round trip for both), or alone once the microtask queue
          // is empty. No tool runs before both are stored; a refused write fails its calls.
          writer.checkpoint(next, { calls, deferred: true }).then(
            () => this.announce(next, extra),
            () => undefined,
          );
        } else {
          await this.save(writer, next, { calls }, extra);
        }
        if (recovered) {
          this.events.emit('run.recovered', {
            kind: cp.kind,
            runId: cp.runId,
            flow: cp.flow,
            step: next.step,
            replayed: scope.replayed,
            rerun: scope.rerun,
          });
        }
        book = undefined;
        if (next.superstep !== cp.superstep) seen = 0;
        cp = next;
      }
      const until = cp.status === 'sleeping' ? cp.wakeAt : cp.pending?.deadline;
      if (until !== undefined) this.waitsUntil(until);
      return resultOf(flow, cp);
    } catch (error) {
      // A checkpoint handed to the writer may still be in flight: the caller learns of the error
      // only once the store is quiet, so what it reads next is what this worker left.
      await writer.settled();
      // The store stayed unavailable, or a call waits for a decision: free the run at once.
      lost =
        error instanceof CheckpointStoreUnavailable ||
        error instanceof RecoveryNeedsDecision ||
        error instanceof WorkerDraining;
      throw error;
    } finally {
      this.leases.hold(start.runId, false);
      // The store stayed unavailable: hand the run to whichever worker reaches it first.
      if (lost) await this.leases.release(start.runId);
    }
  }

  /**
   * `checkpoint.saved`, once the checkpoint is stored. What a listener does is not the write's
   * failure (it would fail the `started` records the write carried, leaving calls in doubt that
   * never ran).
   */
  private announce(cp: Checkpoint, extra: SavedExtra): void {
    // Readers of the run's stream in this process learn at once that it ended.
    if (cp.status === 'done' || cp.status === 'failed')
      this.streams.bell.ring(cp.runId);
    // Built only for someone: this runs on every checkpoint.
    if (!this.events.wanted('checkpoint.saved')) return;
    const event: CheckpointSavedEvent = {
      kind: cp.kind,
      runId: cp.runId,
      flow: cp.flow,
      step: cp.step,
      status: cp.status,
    };
    // A loop's stage: the node that just ran ('model' | 'tools'), else why it was saved.
    if (cp.kind === 'loop') event.stage = extra.closes?.join('+') ?? cp.reason;
    if (extra.unreplayed) event.unreplayed = extra.unreplayed;
    try {
      this.events.emit('checkpoint.saved', event);
    } catch (error) {
      this.logger.warn(Messages.savedListenerFailed(), error);
    }
  }
}
