import {
  CheckpointStore,
  type AdmitQuery,
  type CallRecord,
  type CheckpointRecord,
  type DueQuery,
  type Enqueued,
  type QueuePlacement,
  type HeadlessPage,
  type HeadlessQuery,
  type HistoryPage,
  type ListQuery,
  type ListUnfinishedOptions,
  type RunHead,
  type StoreFailover,
  type RunPage,
  type SaveOptions,
  type StreamQuery,
  type StreamRecord,
} from '../exec/checkpoints/checkpoint-store';

/**
 * A store that passes every call through to `inner`: the base of every test wrapper (fault
 * injectors, counters, delayers), which overrides only what it changes.
 */
export class ForwardingStore extends CheckpointStore {
  constructor(readonly inner: CheckpointStore) {
    super();
  }

  /**
   * Every call but `close` goes through here: a wrapper that treats all calls alike (one that dies,
   * or counts) overrides this one method.
   */
  protected pass<T>(call: () => Promise<T>): Promise<T> {
    return call();
  }

  get shared(): boolean {
    return this.inner.shared;
  }

  save(checkpoint: CheckpointRecord, options?: SaveOptions): Promise<void> {
    return this.pass(() => this.inner.save(checkpoint, options));
  }
  enqueue(
    checkpoint: CheckpointRecord,
    placement: QueuePlacement,
    options?: Pick<SaveOptions, 'head'>,
  ): Promise<Enqueued> {
    return this.pass(() => this.inner.enqueue(checkpoint, placement, options));
  }
  admit(query: AdmitQuery): Promise<RunHead[]> {
    return this.pass(() => this.inner.admit(query));
  }
  latest(runId: string): Promise<CheckpointRecord | undefined> {
    return this.pass(() => this.inner.latest(runId));
  }
  listUnfinished(
    flow: string,
    options?: ListUnfinishedOptions,
  ): Promise<RunHead[]> {
    return this.pass(() => this.inner.listUnfinished(flow, options));
  }
  listDue(query: DueQuery): Promise<RunHead[]> {
    return this.pass(() => this.inner.listDue(query));
  }
  delete(runId: string): Promise<boolean> {
    return this.pass(() => this.inner.delete(runId));
  }
  recordCall(
    runId: string,
    segment: number,
    records: CallRecord[],
    head?: string,
  ): Promise<void> {
    return this.pass(() =>
      this.inner.recordCall(runId, segment, records, head),
    );
  }
  appendStream(
    runId: string,
    segment: number,
    entries: readonly Omit<StreamRecord, 'offset'>[],
    keep: number,
  ): Promise<number> {
    return this.pass(() =>
      this.inner.appendStream(runId, segment, entries, keep),
    );
  }
  readStream(runId: string, query?: StreamQuery): Promise<StreamRecord[]> {
    return this.pass(() => this.inner.readStream(runId, query));
  }
  calls(runId: string, superstep: number): Promise<CallRecord[]> {
    return this.pass(() => this.inner.calls(runId, superstep));
  }
  list(query?: ListQuery): Promise<RunPage> {
    return this.pass(() => this.inner.list(query));
  }
  listHeadless(query?: HeadlessQuery): Promise<HeadlessPage> {
    return this.pass(() => this.inner.listHeadless(query));
  }
  history(runId: string): Promise<HistoryPage> {
    return this.pass(() => this.inner.history(runId));
  }
  override failover(runId: string): Promise<StoreFailover | undefined> {
    return this.pass(() => this.inner.failover(runId));
  }
  head(runId: string): Promise<RunHead | undefined> {
    return this.pass(() => this.inner.head(runId));
  }
  renewLeases(
    owner: string,
    leaseExpiresAt: number,
    runIds: readonly string[],
  ): Promise<number> {
    return this.pass(() =>
      this.inner.renewLeases(owner, leaseExpiresAt, runIds),
    );
  }
  close(): Promise<void> {
    return this.inner.close();
  }
}
