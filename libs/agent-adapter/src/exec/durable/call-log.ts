import { CheckpointStoreCorrupt } from '../../errors';
import { Messages } from '../../errors/messages';
import type {
  CallRecord,
  CheckpointStore,
} from '../checkpoints/checkpoint-store';
import type { KeyRing } from './key-ring';
import { sealCall, type CallDraft } from './records';

/**
 * One worker's writer for one segment of a run's call log. Records are numbered in the order they
 * are made and reach the store in that order (writes are chained), so a crash can cut the log
 * short but never leave a gap.
 *
 * `started` is written before the tool runs and awaited. A result (`done`, `unrecordable`) is
 * buffered and goes out with the next write: another call's `started`, the superstep's checkpoint
 * (one round trip for both), or a flush scheduled right after the current tick, whichever comes
 * first — so the window in which a finished call still looks in doubt stays one tick long.
 */
export class CallLog {
  private superstep = -1;
  private nextSeq = 1;
  private buffer: CallRecord[] = [];
  private chain: Promise<void> = Promise.resolve();
  private flushScheduled = false;
  private startedFlush?: Promise<void>;
  /** The first write this log had refused or lost; every later write fails with it. */
  failure?: Error;

  constructor(
    private readonly store: CheckpointStore,
    private readonly ring: KeyRing,
    readonly runId: string,
    readonly segment: number,
  ) {}

  /** How many records this log numbered for `superstep` (stored or still buffered). */
  count(superstep: number): number {
    return superstep === this.superstep ? this.nextSeq - 1 : 0;
  }

  /** Logs `started` and resolves once it is stored; throws if refused (fenced) or lost. */
  async started(superstep: number, content: CallDraft): Promise<void> {
    this.add(superstep, content);
    await this.flushStarted();
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

  /** Logs a result; stored with the next write (see the class comment). */
  finished(superstep: number, content: CallDraft): void {
    this.add(superstep, content);
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    setImmediate(() => {
      this.flushScheduled = false;
      // Nothing left to write (the checkpoint or a `started` took it): no write to queue.
      if (this.buffer.length === 0) return;
      // A failure here is kept in `failure`; the superstep rethrows it before saving.
      this.flush().catch(() => undefined);
    });
  }

  /** Waits for every queued write, then hands over what is still buffered (for the checkpoint). */
  async drain(): Promise<CallRecord[]> {
    // A scheduled flush may queue a write while we wait: wait until nothing is pending and the
    // chain is quiet.
    for (;;) {
      const [pending, seen] = [this.startedFlush, this.chain];
      await pending?.catch(() => undefined);
      await seen;
      if (pending === this.startedFlush && seen === this.chain) break;
    }
    if (this.failure !== undefined) throw this.failure;
    const records = this.buffer;
    this.buffer = [];
    return records;
  }

  private add(superstep: number, content: CallDraft): void {
    if (superstep !== this.superstep) {
      this.superstep = superstep;
      this.nextSeq = 1;
    }
    // Seal before taking the number: a value that cannot be sealed must not leave a gap.
    const record = sealCall(this.ring, {
      ...content,
      runId: this.runId,
      segment: this.segment,
      seq: this.nextSeq,
      superstep,
    });
    this.nextSeq++;
    this.buffer.push(record);
  }

  private flush(): Promise<void> {
    const job = this.chain.then(async () => {
      if (this.failure !== undefined) throw this.failure;
      const records = this.buffer;
      if (records.length === 0) return;
      this.buffer = [];
      try {
        await this.store.recordCall(this.runId, this.segment, records);
      } catch (error) {
        this.failure =
          error instanceof Error ? error : new Error(String(error));
        throw this.failure;
      }
    });
    this.chain = job.catch(() => undefined);
    return job;
  }
}

/**
 * Checks that, per segment, the records are numbered 1, 2, 3... with nothing missing or repeated.
 * `records` must be ordered by (segment, seq), as `CheckpointStore.calls` returns them.
 */
export function assertNoGaps(
  runId: string,
  records: ReadonlyArray<{ segment: number; seq: number }>,
): void {
  let segment = Number.NaN;
  let expected = 1;
  for (const r of records) {
    if (r.segment !== segment) {
      segment = r.segment;
      expected = 1;
    }
    if (r.seq !== expected) {
      throw new CheckpointStoreCorrupt(
        Messages.corruptGap(runId, r.segment, expected, r.seq),
        runId,
      );
    }
    expected++;
  }
}
