import { randomBytes } from 'node:crypto';
import { asError } from '../../errors';
import { Messages } from '../../errors/messages';
import type {
  CallRecord,
  CheckpointRecord,
  CheckpointStore,
  SaveOptions,
} from '../checkpoints/checkpoint-store';
import { writeConfirmed } from './confirmed-write';
import { sealHead } from './head-seal';
import { leaseEnd } from './lease-end';
import type { KeyRing } from './key-ring';
import {
  sealCallAt,
  sealCheckpoint,
  type CallDraft,
  type Checkpoint,
} from './records';

const PROCESS_TOKEN = randomBytes(9).toString('base64url');
let writersMade = 0;

/** Who writes a segment, and what its checkpoints say about ownership. */
export interface SegmentOwner {
  /** Written as the head's owner with every checkpoint. */
  owner: string;
  /** With every checkpoint the lease is set to about this long from the write (`leaseEnd`); none without it. */
  leaseMs?: number;
  /** Instead of `leaseMs`: the lease ends at this time (epoch ms; a schedule's next tick). */
  leaseUntil?: number;
}

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
 * made (writes are chained), so a crash can cut the log short but never leave a gap.
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
  private chain: Promise<void> = Promise.resolve();
  /** Writes queued on `chain` that have not settled: none and no `startedFlush` = quiet. */
  private queued = 0;
  /** The flush `finished` scheduled; cancelled when another write takes the buffer first. */
  private resultFlush?: NodeJS.Immediate;
  private startedFlush?: Promise<void>;
  /** A checkpoint waiting for the next write. */
  private pending?: PendingCheckpoint;
  /** The first write this segment had refused or lost; every later write fails with it. */
  failure?: Error;
  /**
   * The head as this segment's last stored write left it: its latest checkpoint's columns and the
   * run's call count, sealed anew with every write (see head-seal.ts).
   */
  private head?: Pick<CheckpointRecord, 'flow' | 'step' | 'status'> & {
    calls: number;
  };

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
   * sealing error (nothing logged). Not async: the shared flush is this call's promise.
   */
  started(superstep: number, content: CallDraft): Promise<void> {
    this.add(superstep, content);
    return this.flushStarted();
  }

  /** Logs a result; stored with the next write (see the class comment). */
  finished(superstep: number, content: CallDraft): void {
    this.add(superstep, content);
    this.resultFlush ??= setImmediate(() => {
      this.resultFlush = undefined;
      // A failure here is kept in `failure`; the superstep rethrows it before saving.
      this.flush().catch(() => undefined);
    });
  }

  /**
   * Seals a checkpoint of this segment and writes it with the store's compare-and-set, after every
   * record made before it. Resolves once it is stored. A refused or lost write is kept in
   * `failure`, like a call write's: the segment's later calls and its `drain` fail with it, so
   * nothing runs on an unsaved checkpoint. Sealing errors throw here, before anything is queued.
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
    stored.catch(() => undefined); // a deferred write's failure is read from `failure`
    this.pending = {
      record,
      expectCalls: options.expectCalls,
      acceptLostWrites: options.acceptLostWrites === true,
      waitsUntil: waitsUntil(cp),
      settle,
    };
    if (options.calls?.length) this.buffer = [...options.calls, ...this.buffer];
    if (options.deferred) this.flushStarted().catch(() => undefined);
    else this.flush().catch(() => undefined);
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
  async drain(): Promise<CallRecord[]> {
    // Usually quiet by now (the superstep's last write was its `started`): no waiting to pay for.
    if (this.queued > 0 || this.startedFlush) await this.settled();
    if (this.failure !== undefined) throw this.failure;
    return this.take();
  }

  /**
   * Writes the buffered results now (not with the next write) and resolves once every write made
   * so far is stored: what follows (a stream entry published after a call returned) is stored
   * after the call's result. A failure is kept in `failure`, as for any write.
   */
  async flushed(): Promise<void> {
    if (this.buffer.length) await this.flush().catch(() => undefined);
    await this.settled();
  }

  /** Resolves once no write is pending or in flight (a scheduled flush may queue one meanwhile). */
  async settled(): Promise<void> {
    for (;;) {
      const pending = this.startedFlush;
      const seen = this.chain;
      await pending?.catch(() => undefined);
      await seen;
      if (pending === this.startedFlush && seen === this.chain) return;
    }
  }

  /**
   * Calls started together (a node's `Promise.all`, a model's parallel tool calls) log their
   * `started` records a few microtasks apart. The write goes out once the microtask queue is
   * empty (a `nextTick` scheduled from a microtask runs only then), so they share one round trip;
   * a lone call waits for nothing but its own promise chain. A caller that finds a write pending
   * has added its record before that write reads the buffer, so the write carries it.
   */
  private flushStarted(): Promise<void> {
    this.startedFlush ??= new Promise<void>((resolve) =>
      process.nextTick(resolve),
    ).then(() => {
      this.startedFlush = undefined;
      return this.flush();
    });
    return this.startedFlush;
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

  private flush(): Promise<void> {
    const job = this.chain.then(async () => {
      const checkpoint = this.pending;
      this.pending = undefined;
      if (this.failure !== undefined) {
        checkpoint?.settle.reject(this.failure);
        throw this.failure;
      }
      if (this.buffer.length === 0 && !checkpoint) return;
      const records = this.take();
      try {
        const head = this.headAfter(checkpoint, records);
        const sealed = sealHead(
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
        // A store that fails transiently is read back and written again (confirmed-write.ts),
        // so a finished call's record is not lost to a dropped connection.
        const options = checkpoint
          ? this.saveOptions(checkpoint, records, sealed)
          : undefined;
        await writeConfirmed(this.store, this.runId, sealed, () =>
          checkpoint
            ? this.store.save(checkpoint.record, options)
            : this.store.recordCall(this.runId, this.segment, records, sealed),
        );
        this.head = head;
      } catch (error) {
        this.failure = asError(error);
        checkpoint?.settle.reject(this.failure);
        throw this.failure;
      }
      checkpoint?.settle.resolve();
    });
    this.queued++;
    const settle = () => void this.queued--;
    this.chain = job.then(settle, settle);
    return job;
  }

  /**
   * The head a write leaves: the checkpoint's columns (or the last one's) and the call count. A
   * segment's count starts from its first checkpoint: a new run's (0) or the one a claim insists
   * on (`expectCalls`, the head's count), and then counts what this segment appends.
   */
  /**
   * A token no other write carries: 72 random bits per process, the writer's number in the
   * process, then its write count (random bytes per writer cost more than a run's sealing).
   */
  private writeToken(): string {
    return this.tokenBase + (++this.writes).toString(36);
  }

  private headAfter(
    checkpoint: PendingCheckpoint | undefined,
    records: CallRecord[],
  ): NonNullable<SegmentWriter['head']> {
    const base = checkpoint
      ? (checkpoint.expectCalls ??
        (checkpoint.record.step === 0 ? 0 : this.head?.calls))
      : this.head?.calls;
    const columns = checkpoint?.record ?? this.head;
    if (base === undefined || columns === undefined) {
      // A programming error: a segment opens with a checkpoint that knows the run's count.
      throw new Error(Messages.segmentWithoutCount(this.runId, this.segment));
    }
    const { flow, step, status } = columns;
    return { flow, step, status, calls: base + records.length };
  }

  /** Read when the write is made: the lease counts from then. */
  private saveOptions(
    checkpoint: PendingCheckpoint,
    records: CallRecord[],
    head: string,
  ): SaveOptions {
    const { owner, leaseMs, leaseUntil } = this.writer;
    // Assigned, not spread from conditional objects: this runs on every checkpoint.
    const options: SaveOptions = { head, owner };
    if (records.length) options.calls = records;
    const { expectCalls, waitsUntil } = checkpoint;
    if (expectCalls !== undefined) options.expectCalls = expectCalls;
    if (checkpoint.acceptLostWrites) options.acceptLostWrites = true;
    // A run that waits is due at its time (never, for null); one driven here, at its lease's end.
    const due =
      waitsUntil !== undefined
        ? waitsUntil
        : (leaseUntil ??
          (leaseMs !== undefined ? leaseEnd(Date.now(), leaseMs) : null));
    if (due !== null) options.leaseExpiresAt = due;
    return options;
  }
}

/**
 * When a run that waits falls due, as the store indexes it: a sleeping run at its wake time, a
 * paused one at its approval's deadline, or never (null: it waits for a person). Undefined for a
 * run that does not wait: its due time is the writer's lease.
 */
function waitsUntil(cp: Checkpoint): number | null | undefined {
  if (cp.status === 'sleeping') return cp.wakeAt ?? null;
  if (cp.status === 'paused') return cp.pending?.deadline ?? null;
  return undefined;
}

interface PendingCheckpoint {
  record: CheckpointRecord;
  expectCalls: number | undefined;
  acceptLostWrites: boolean;
  waitsUntil: number | null | undefined;
  settle: { resolve: () => void; reject: (error: Error) => void };
}
