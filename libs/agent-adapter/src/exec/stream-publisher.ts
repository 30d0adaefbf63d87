import { asError } from '../errors';
import { Messages } from '../errors/messages';
import type {
  CheckpointStore,
  StreamRecord,
} from './checkpoints/checkpoint-store';
import { transientReason } from './checkpoints/transient-errors';
import { assertJson } from './durable/canonical-json';
import { STORE_RETRY } from './durable/confirmed-write';
import type { KeyRing } from './durable/key-ring';
import { sealEntry } from './durable/stream-entries';
import type { StreamBell } from './stream-bell';

/** Where a superstep's entries go: the run's segment, as the superstep scope knows it. */
export interface StreamTarget {
  store: CheckpointStore;
  ring: KeyRing;
  runId: string;
  segment: number;
  incarnation: number;
  superstep: number;
  /** Entries of earlier supersteps kept per run (`streamRetention`). */
  keep: number;
  bell?: StreamBell;
  /**
   * Resolves once the segment's own writes so far are stored, buffered call results included (its
   * opening checkpoint may still be on its way, and an append is fenced against it; an entry
   * published after a call returned must not be stored before the call's result); rejects if the
   * segment lost the run.
   */
  ready(): Promise<void>;
}

interface Queued {
  record: Omit<StreamRecord, 'offset'>;
  settle: { resolve: () => void; reject: (error: Error) => void };
}

/**
 * Publishes one superstep's stream entries, exactly once per place. A place is who published the
 * entry and its count there (`<node>/<n>` for a node, `<node>/<call index>.<n>` for a tool it
 * called): the same on a re-run of the superstep after a crash, a pause or a sleep, so the re-run's
 * entries that were stored already are dropped, not appended again. Which places are stored is
 * read once, before the first append (this segment is the only writer then: the store fences the
 * others). Entries go out in order, those published while a write is in flight together in the
 * next one; the superstep waits for them before its checkpoint, so a run's stream is complete
 * once the run has ended.
 */
export class StreamPublisher {
  private readonly counts = new Map<string, number>();
  private queue: Queued[] = [];
  private stored?: Set<string>;
  private flushing?: Promise<void>;
  /** The first write that failed: the superstep fails with it (the run is let go). */
  failure?: Error;

  constructor(private readonly target: StreamTarget) {}

  /**
   * Seals the entry at its place now (so places follow the publishing order) and resolves once it
   * is stored (or was, by an earlier run of this superstep).
   */
  publish(
    node: string,
    call: number | undefined,
    data: unknown,
  ): Promise<void> {
    try {
      assertJson(data);
    } catch (error) {
      throw new TypeError(Messages.publishData(node, asError(error).message));
    }
    const owner = call === undefined ? node : `${node}/${call}`;
    const n = this.counts.get(owner) ?? 0;
    this.counts.set(owner, n + 1);
    const { ring, runId, superstep, incarnation } = this.target;
    const place = call === undefined ? `${node}/${n}` : `${owner}.${n}`;
    const record = sealEntry(ring, { runId, superstep, place }, incarnation, {
      node,
      data,
      at: Date.now(),
    });
    const stored = new Promise<void>((resolve, reject) => {
      this.queue.push({ record, settle: { resolve, reject } });
    });
    stored.catch(() => undefined); // an unawaited publish's failure is the superstep's
    this.flushing ??= Promise.resolve().then(() => this.flush());
    return stored;
  }

  /** Whether every entry published so far is stored or failed (nothing for `settled` to wait for). */
  get idle(): boolean {
    return this.flushing === undefined;
  }

  /** Resolves once every entry published so far is stored or failed. */
  async settled(): Promise<void> {
    while (this.flushing) await this.flushing;
  }

  private async flush(): Promise<void> {
    while (this.queue.length) {
      const batch = this.queue;
      this.queue = [];
      try {
        if (this.failure) throw this.failure;
        await this.target.ready();
        await this.append(batch.map((q) => q.record));
        for (const q of batch) q.settle.resolve();
        this.target.bell?.ring(this.target.runId);
      } catch (error) {
        this.failure ??= asError(error);
        for (const q of batch) q.settle.reject(this.failure);
      }
    }
    this.flushing = undefined;
  }

  /**
   * Appends the records whose places are not stored. After a transient failure the places are
   * read again before the next try: an append whose reply was lost is not appended twice.
   */
  private async append(records: Omit<StreamRecord, 'offset'>[]): Promise<void> {
    const { store, runId, segment, keep } = this.target;
    let budget = STORE_RETRY.attempts;
    let delay = STORE_RETRY.firstDelayMs;
    for (;;) {
      try {
        const stored = (this.stored ??= await this.readPlaces());
        const fresh = records.filter((r) => !stored.has(r.place));
        if (fresh.length) await store.appendStream(runId, segment, fresh, keep);
        for (const r of fresh) stored.add(r.place);
        return;
      } catch (error) {
        if (transientReason(error) === undefined || --budget <= 0) throw error;
        this.stored = undefined;
        await new Promise((resolve) => setTimeout(resolve, delay));
        delay *= 2;
      }
    }
  }

  private async readPlaces(): Promise<Set<string>> {
    const { store, runId, superstep } = this.target;
    const places = new Set<string>();
    for (let from = 0; ;) {
      const page = await store.readStream(runId, {
        superstep,
        from,
        limit: 1000,
      });
      for (const r of page) places.add(r.place);
      if (page.length < 1000) return places;
      from = page[page.length - 1]!.offset + 1;
    }
  }
}
