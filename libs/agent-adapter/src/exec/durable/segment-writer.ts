import { AsyncResource } from 'node:async_hooks';
import { randomBytes } from 'node:crypto';
import { asError } from '../../errors';
import type {
  CallRecord,
  CheckpointStore,
} from '../checkpoints/checkpoint-store';
import { writeConfirmed } from './confirmed-write';
import { promised } from '../promised';
import { sealHead } from './head-seal';
import {
  headAfter,
  saveOptions,
  waiters,
  waitsUntil,
  type PendingCheckpoint,
  type SegmentHead,
  type SegmentOwner,
  type Waiters,
} from './segment-write';
import type { KeyRing } from './key-ring';
import {
  sealCallAt,
  sealCheckpoint,
  type CallDraft,
  type Checkpoint,
} from './records';

const PROCESS_TOKEN = randomBytes(9).toString('base64url');
let writersMade = 0;

/** How one checkpoint goes out (see `SegmentWriter.checkpoint`). */
export interface CheckpointWriteOptions {
  /** Call records `drain` returned: stored atomically with the checkpoint. */
  calls?: CallRecord[];
  /** Refuse (CheckpointConflict) unless the run has exactly this many call records. */
  expectCalls?: number;
  /** Ride with the next write (the next superstep's first `started`) instead of going out now. */
  deferred?: boolean;
  /** See `SaveOptions.acceptLostWrites` (an operator's `rerunInDoubt`). */
  acceptLostWrites?: boolean;
}

/**
 * The one ordered write channel of one segment of a run (a worker's tenure): every call record
 * and every checkpoint the segment writes goes through it, sealed here, in the order they were
 * made (one write in flight at a time), so a crash can cut the log short but never leave a gap.
 *
 * `started` is written before the tool runs and awaited. A result (`done`, `unrecordable`) is
 * buffered and goes out with the next write: another call's `started`, the superstep's checkpoint
 * (one round trip for both), or a flush scheduled right after the current tick, whichever comes
 * first — so the window in which a finished call still looks in doubt stays one tick long.
 *
 * A checkpoint can be `deferred`: it goes out with the next write, which is the next superstep's
 * first `started` record when that node reaches its first call before the microtask queue empties,
 * and is otherwise the checkpoint alone, written right then. So a superstep with one call costs
 * one round trip, not two.
 */
export class SegmentWriter {
  /** Write tokens for the head seal: unique per writer, then counted (see `writeToken`). */
  private readonly tokenBase = `${PROCESS_TOKEN}${(++writersMade).toString(36)}-`;
  private writes = 0;
  private superstep = -1;
  private nextSeq = 1;
  private buffer: CallRecord[] = [];
  /**
   * The write queue, as state and callbacks rather than a chain of promises (this runs several
   * times per superstep, and each promise pays Node's async hooks): one write in flight at most;
   * `due` asks for the next once it lands; `ticking` is a `started` batch waiting for its tick.
   */
  private inFlight = false;
  private due = false;
  private ticking = false;
  /**
   * The async context of the caller that made a write due while another was in flight: that
   * write is issued from the earlier one's callback, and runs in this scope instead, so what the
   * store does (a driver's span, a context it reads) belongs to the caller, not the earlier write.
   */
  private dueScope?: AsyncResource;
  /** The `started` callers whose records are buffered: settled by the write that takes them. */
  private waiters?: Waiters;
  /** `settled()` callers, resolved once no write is in flight, due or waiting for its tick. */
  private idle: Array<() => void> = [];
  /** The flush `finished` scheduled; cancelled when another write takes the buffer first. */
  private resultFlush?: NodeJS.Immediate;
  /** A checkpoint waiting for the next write. */
  private pending?: PendingCheckpoint;
  /** The first write this segment had refused or lost; every later write fails with it. */
  failure?: Error;
  /**
   * The head as this segment's last stored write left it: its latest checkpoint's columns and the
   * run's call count, sealed anew with every write (see head-seal.ts).
   */
  private head?: SegmentHead;

  constructor(
    private readonly store: CheckpointStore,
    private readonly ring: KeyRing,
    readonly runId: string,
    readonly segment: number,
    /** The run's incarnation, sealed into every record (see `Call.incarnation`). */
    readonly incarnation: number,
    private readonly writer: SegmentOwner,
  ) {}

  /**
   * Writes `cp` as the one write of its own segment (an operator's transition: a cancel, a fork, a
   * resolve, a restore mark), with the store's compare-and-set; resolves once it is stored.
   */
  static writeAlone(
    store: CheckpointStore,
    ring: KeyRing,
    cp: Checkpoint,
    writer: SegmentOwner,
    options: Omit<CheckpointWriteOptions, 'deferred' | 'calls'> = {},
  ): Promise<void> {
    return new SegmentWriter(
      store,
      ring,
      cp.runId,
      cp.segment,
      cp.incarnation,
      writer,
    ).checkpoint(cp, options);
  }

  /** How many records this segment numbered for `superstep` (stored or still buffered). */
  count(superstep: number): number {
    return superstep === this.superstep ? this.nextSeq - 1 : 0;
  }

  /**
   * Logs `started` and resolves once it is stored; rejects if refused (fenced) or lost. Throws a
   * sealing error (nothing logged).
   *
   * Calls started together (a node's `Promise.all`, a model's parallel tool calls) log their
   * `started` records a few microtasks apart. The write goes out once the microtask queue is
   * empty (a `nextTick` scheduled from a microtask runs only then), so they share one round trip.
   */
  started(superstep: number, content: CallDraft): Promise<void> {
    this.add(superstep, content);
    this.onTick();
    return (this.waiters ??= waiters()).promise;
  }

  /** Logs a result; stored with the next write (see the class comment). */
  finished(superstep: number, content: CallDraft): void {
    this.add(superstep, content);
    this.resultFlush ??= setImmediate(() => {
      this.resultFlush = undefined;
      // A failure here is kept in `failure`; the superstep rethrows it before saving.
      this.flushNow();
    });
  }

  /**
   * Seals a checkpoint of this segment and writes it with the store's compare-and-set, after every
   * record made before it. Resolves once it is stored. A refused or lost write is kept in
   * `failure`, like a call write's: the segment's later calls and its `drain` fail with it, so
   * nothing runs on an unsaved checkpoint. The caller handles the rejection (every caller awaits
   * it, or ignores it where `failure` is read later). Sealing errors throw here, before anything
   * is queued.
   */
  checkpoint(
    cp: Checkpoint,
    options: CheckpointWriteOptions = {},
  ): Promise<void> {
    const record = sealCheckpoint(this.ring, cp);
    let settle!: { resolve: () => void; reject: (error: Error) => void };
    const stored = new Promise<void>(
      (resolve, reject) => (settle = { resolve, reject }),
    );
    this.pending = {
      record,
      expectCalls: options.expectCalls,
      acceptLostWrites: options.acceptLostWrites === true,
      waitsUntil: waitsUntil(cp),
      settle,
    };
    if (options.calls?.length) this.buffer = [...options.calls, ...this.buffer];
    if (options.deferred) this.onTick();
    else this.flushNow();
    return stored;
  }

  /**
   * Stops the segment without a store error (a call that must wait for a decision): every later
   * write, and `drain`, fail with `reason`, so nothing more is written by this segment.
   */
  stop(reason: Error): void {
    this.failure ??= reason;
  }

  /** Waits for every queued write, then hands over what is still buffered (for the checkpoint). */
  drain(): Promise<CallRecord[]> {
    // Usually quiet by now (the superstep's last write was its `started`): no waiting to pay for.
    if (!this.quiet) return this.settled().then(() => this.handOver());
    return promised(() => this.handOver());
  }

  /**
   * Writes the buffered results now (not with the next write) and resolves once every write made
   * so far is stored: what follows (a stream entry published after a call returned) is stored
   * after the call's result. A failure is kept in `failure`, as for any write.
   */
  flushed(): Promise<void> {
    if (this.buffer.length) this.flushNow();
    return this.settled();
  }

  /** Resolves once no write is pending or in flight (a scheduled result flush may queue one later). */
  settled(): Promise<void> {
    if (this.quiet) return Promise.resolve();
    return new Promise((resolve) => this.idle.push(resolve));
  }

  private get quiet(): boolean {
    return !this.inFlight && !this.due && !this.ticking;
  }

  private handOver(): CallRecord[] {
    if (this.failure !== undefined) throw this.failure;
    return this.take();
  }

  /** Asks for a write of what is buffered once the microtask queue is empty (see `started`). */
  private onTick(): void {
    if (this.ticking) return;
    this.ticking = true;
    process.nextTick(() => {
      this.ticking = false;
      this.flushNow();
    });
  }

  /** Asks for a write of what is buffered: now, or once the write in flight lands. */
  private flushNow(): void {
    this.due = true;
    if (this.inFlight)
      this.dueScope ??= new AsyncResource('agent-adapter.write');
    this.pump();
  }

  /** Starts the write that is due unless one is in flight; tells `settled()` callers once quiet. */
  private pump(): void {
    while (this.due && !this.inFlight) {
      this.due = false;
      const scope = this.dueScope;
      this.dueScope = undefined;
      if (scope) scope.runInAsyncScope(() => this.write());
      else this.write();
    }
    if (this.quiet && this.idle.length) {
      const idle = this.idle;
      this.idle = [];
      for (const resolve of idle) resolve();
    }
  }

  /**
   * Empties the buffer for a write. The result flush `finished` scheduled has nothing left to do
   * then: cancelled, so a superstep whose result rides with its checkpoint (the usual case) costs
   * no extra turn of the event loop (a pending immediate makes the loop poll without waiting).
   */
  private take(): CallRecord[] {
    const records = this.buffer;
    this.buffer = [];
    if (this.resultFlush) {
      clearImmediate(this.resultFlush);
      this.resultFlush = undefined;
    }
    return records;
  }

  private add(superstep: number, content: CallDraft): void {
    if (superstep !== this.superstep) {
      this.superstep = superstep;
      this.nextSeq = 1;
    }
    // Seal before taking the number: a value that cannot be sealed must not leave a gap.
    const record = sealCallAt(
      this.ring,
      {
        runId: this.runId,
        segment: this.segment,
        seq: this.nextSeq,
        superstep,
      },
      this.incarnation,
      content,
    );
    this.nextSeq++;
    this.buffer.push(record);
  }

  /**
   * One write: the pending checkpoint (if any) with every buffered record, settling the callers
   * waiting on them. Never throws: a failure is kept in `failure` and rejects those callers.
   */
  private write(): void {
    const checkpoint = this.pending;
    this.pending = undefined;
    const waiting = this.waiters;
    this.waiters = undefined;
    const fail = (error: unknown): void => {
      this.failure = asError(error);
      checkpoint?.settle.reject(this.failure);
      waiting?.reject(this.failure);
    };
    if (this.failure !== undefined) return fail(this.failure);
    if (this.buffer.length === 0 && !checkpoint) return waiting?.resolve();
    const records = this.take();
    let head: SegmentHead;
    let sealed: string;
    try {
      head = headAfter(
        this.runId,
        this.segment,
        this.head,
        checkpoint,
        records,
      );
      sealed = sealHead(
        this.ring,
        {
          runId: this.runId,
          segment: this.segment,
          incarnation: this.incarnation,
          flow: head.flow,
          step: head.step,
          status: head.status,
          calls: head.calls,
        },
        this.writeToken(),
      );
    } catch (error) {
      return fail(error);
    }
    // A store that fails transiently is read back and written again (confirmed-write.ts), so a
    // finished call's record is not lost to a dropped connection.
    const options = checkpoint
      ? saveOptions(this.writer, checkpoint, records, sealed)
      : undefined;
    this.inFlight = true;
    // The callbacks below must not throw: nothing would catch it, and the queue would stall.
    writeConfirmed(
      this.store,
      this.runId,
      sealed,
      () =>
        checkpoint
          ? this.store.save(checkpoint.record, options)
          : this.store.recordCall(this.runId, this.segment, records, sealed),
      () => {
        this.head = head;
        this.inFlight = false;
        checkpoint?.settle.resolve();
        waiting?.resolve();
        this.pump();
      },
      (error) => {
        this.inFlight = false;
        fail(error);
        this.pump();
      },
    );
  }

  /**
   * A token no other write carries: 72 random bits per process, the writer's number in the
   * process, then its write count (random bytes per writer cost more than a run's sealing).
   */
  private writeToken(): string {
    return this.tokenBase + (++this.writes).toString(36);
  }
}
