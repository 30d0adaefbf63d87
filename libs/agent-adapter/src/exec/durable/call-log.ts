import { CheckpointConflict, CheckpointStoreCorrupt } from '../../errors';
import { Messages } from '../../errors/messages';
import type {
  CallRecord,
  CheckpointRecord,
  CheckpointStore,
  RunHead,
  SaveOptions,
} from '../checkpoints/checkpoint-store';
import type { KeyRing } from './key-ring';
import { sealCallAt, type CallDraft } from './records';

/**
 * One worker's writer for one segment of a run's call log. Records are numbered in the order they
 * are made and reach the store in that order (writes are chained), so a crash can cut the log
 * short but never leave a gap.
 *
 * `started` is written before the tool runs and awaited. A result (`done`, `unrecordable`) is
 * buffered and goes out with the next write: another call's `started`, the superstep's checkpoint
 * (one round trip for both), or a flush scheduled right after the current tick, whichever comes
 * first — so the window in which a finished call still looks in doubt stays one tick long.
 *
 * A superstep's checkpoint can also be handed over (`saveWith`): it goes out with the next write,
 * which is the next superstep's first `started` record when that node reaches its first call
 * before the microtask queue empties, and is otherwise the checkpoint alone, written right then.
 * So a superstep with one call costs one round trip, not two.
 */
export class CallLog {
  private superstep = -1;
  private nextSeq = 1;
  private buffer: CallRecord[] = [];
  private chain: Promise<void> = Promise.resolve();
  /** The flush `finished` scheduled; cancelled when another write takes the buffer first. */
  private resultFlush?: NodeJS.Immediate;
  private startedFlush?: Promise<void>;
  /** A checkpoint handed over by `saveWith`, not yet sent. */
  private checkpoint?: DeferredCheckpoint;
  /** The first write this log had refused or lost; every later write fails with it. */
  failure?: Error;

  constructor(
    private readonly store: CheckpointStore,
    private readonly ring: KeyRing,
    readonly runId: string,
    readonly segment: number,
    /** The run's incarnation, sealed into every record (see `Call.incarnation`). */
    readonly incarnation: number,
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

  /**
   * Hands over a superstep's checkpoint and the call records `drain` returned with it: they go out
   * with this log's next write, at the latest once the microtask queue is empty (see the class
   * comment). `options` is read when the write is made (the lease counts from then); `saved` runs
   * once it is stored. A refused or lost write is kept in `failure`, like a call write's: the
   * next superstep's calls and its `drain` fail with it, so nothing runs on an unsaved checkpoint.
   */
  saveWith(
    record: CheckpointRecord,
    calls: CallRecord[],
    options: () => SaveOptions,
    saved: () => void,
  ): void {
    this.checkpoint = { record, options, saved };
    this.buffer = [...calls, ...this.buffer];
    this.flushStarted().catch(() => undefined);
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

  /** Waits for every queued write, then hands over what is still buffered (for the checkpoint). */
  async drain(): Promise<CallRecord[]> {
    await this.settled();
    if (this.failure !== undefined) throw this.failure;
    return this.take();
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

  /** Resolves once no write is pending or in flight (a scheduled flush may queue one meanwhile). */
  async settled(): Promise<void> {
    for (;;) {
      const [pending, seen] = [this.startedFlush, this.chain];
      await pending?.catch(() => undefined);
      await seen;
      if (pending === this.startedFlush && seen === this.chain) return;
    }
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
      if (this.failure !== undefined) throw this.failure;
      if (this.buffer.length === 0 && !this.checkpoint) return;
      const [records, checkpoint] = [this.take(), this.checkpoint];
      this.checkpoint = undefined;
      try {
        if (checkpoint) {
          await this.store.save(checkpoint.record, {
            ...checkpoint.options(),
            ...(records.length && { calls: records }),
          });
        } else {
          await this.store.recordCall(this.runId, this.segment, records);
        }
      } catch (error) {
        this.failure =
          error instanceof Error ? error : new Error(String(error));
        throw this.failure;
      }
      // Stored: whatever the event's listeners do now is not this write's failure (it would fail
      // the `started` records it carried, leaving calls in doubt that never ran).
      try {
        checkpoint?.saved();
      } catch (error) {
        console.warn(
          'agent-adapter: a checkpoint.saved listener failed',
          error,
        );
      }
    });
    this.chain = job.catch(() => undefined);
    return job;
  }
}

interface DeferredCheckpoint {
  record: CheckpointRecord;
  options: () => SaveOptions;
  saved: () => void;
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

/**
 * The latest checkpoint's segment must be the head's: segments of another incarnation are another
 * range, so a checkpoint of an earlier run with this id copied on top is `CheckpointStoreCorrupt`
 * without reading anything more (recovery reads the head anyway). Call after checking the steps
 * agree.
 */
export function assertHeadSegment(
  head: RunHead,
  record: Pick<CheckpointRecord, 'step' | 'segment'>,
): void {
  if (record.segment !== head.segment) {
    throw new CheckpointStoreCorrupt(
      Messages.corruptHeadSegment(
        head.runId,
        record.step,
        record.segment,
        head.segment,
      ),
      head.runId,
    );
  }
}

/**
 * Recovery's count check, before anything is written: the head counts every call record of the run;
 * `accounted` is what the latest checkpoint counts before its superstep (`logBefore`) plus the
 * records a read of that superstep found (`CheckpointStore.calls`, through the store's call index).
 * More than the head counts: the log grew since the head was read, its worker is alive
 * (`CheckpointConflict`). Fewer: records or index entries are missing (`CheckpointStoreCorrupt`),
 * unless the head moved on meanwhile (read again). The reads are not one snapshot.
 */
export async function assertLogCount(
  store: CheckpointStore,
  head: RunHead,
  accounted: number,
): Promise<void> {
  const { runId } = head;
  if (accounted > head.calls)
    throw new CheckpointConflict(Messages.logMoved(runId), runId);
  if (accounted < head.calls) {
    const again = await store.head(runId);
    if (again?.calls !== head.calls || again.step !== head.step) {
      throw new CheckpointConflict(Messages.logMoved(runId), runId);
    }
    throw new CheckpointStoreCorrupt(
      Messages.corruptCount(runId, head.calls, accounted),
      runId,
    );
  }
}
