/**
 * The store port. A store keeps sealed strings and the few columns it needs to index and to enforce
 * the protocol atomically; it never interprets the sealed content. Every method that writes is
 * atomic (one statement, one transaction, one Lua script, or one synchronous block in memory).
 *
 * Implementers: run `describeCheckpointStoreConformance` (agent-adapter/testing) against your store.
 * @publicApi
 */

import type {
  AdmitQuery,
  Enqueued,
  QueuePlacement,
  RunQueueState,
} from './checkpoint-store.queues';

export type {
  AdmitQuery,
  Enqueued,
  QueuePlacement,
  RunQueueState,
} from './checkpoint-store.queues';

/**
 * Where a run stands. `running`, `paused` (a call waits for a decision) and `sleeping` (a node
 * waits for a time) are unfinished; `done` and `failed` have ended.
 */
export type RunStatus = 'running' | 'paused' | 'sleeping' | 'done' | 'failed';

export const UNFINISHED: readonly RunStatus[] = [
  'running',
  'paused',
  'sleeping',
];

/** One checkpoint row. `sealed` is opaque to the store; the columns are covered by its signature. */
export interface CheckpointRecord {
  runId: string;
  step: number;
  flow: string;
  status: RunStatus;
  /** The call-log segment (worker tenure) this checkpoint opens or continues. */
  segment: number;
  sealed: string;
  /**
   * Set by a store that read the row but not its columns (an edited or truncated column field):
   * why. `flow`, `status` and `segment` are then placeholders, and opening the row is
   * `CheckpointStoreCorrupt`. Readers of a run's history (`runs verify`, the viewer) report that
   * row and go on with the others.
   */
  unreadable?: string;
}

/**
 * One call-log record, numbered `seq` = 1, 2, 3... within (segment, superstep); the key of a
 * record is (runId, segment, superstep, seq).
 */
export interface CallRecord {
  runId: string;
  segment: number;
  seq: number;
  /** The superstep the call belongs to (completed supersteps before it). */
  superstep: number;
  sealed: string;
}

/** The head of a run: its latest checkpoint's columns plus ownership. */
export interface RunHead {
  runId: string;
  flow: string;
  step: number;
  status: RunStatus;
  segment: number;
  /** Worker that last saved or renewed the run. */
  owner?: string;
  /**
   * Epoch ms at which the run is due work (see `SaveOptions.leaseExpiresAt`): for a running run,
   * when its owner's lease expires (the owner is then presumed dead); for a sleeping run, its wake
   * time; for a paused run, its decision's deadline. Unsealed: the sealed checkpoint has the times
   * the runner acts on.
   */
  leaseExpiresAt?: number;
  /** Epoch ms of the last checkpoint. */
  updatedAt: number;
  /**
   * How many call records the run has (every segment). A recoverer passes the count it saw as
   * `expectCalls` when it claims: if a worker it thought dead logged a call in between, the claim
   * conflicts instead of racing that call.
   */
  calls: number;
  /**
   * The head seal the last write gave (`SaveOptions.head`): the writer's signature over the run
   * id, flow, step, status, segment and call count above, and the run's incarnation. Opaque to the
   * store, kept verbatim; empty when the write gave none. Owner, lease and `updatedAt` are outside
   * it (a renewal writes them without one).
   */
  sealed: string;
  /** For a run enqueued on a queue (`enqueue`): where it stands there. */
  queue?: RunQueueState;
  /**
   * The key of the run's last call record, which the store keeps to refuse an append out of order
   * (call-order.ts); absent while the run has none. Unsealed: `runs verify` compares it with the
   * records.
   */
  lastCall?: CallKey;
}

/** Where a call record stands in its run's log: appends come in this order (call-order.ts). */
export interface CallKey {
  segment: number;
  superstep: number;
  seq: number;
}

/**
 * One entry of a run's stream (see `appendStream`). `sealed` is opaque to the store; the other
 * fields are what it indexes by.
 */
export interface StreamRecord {
  runId: string;
  /** The entry's number in the run's stream: 0, 1, 2... in the order appended, given by the store. */
  offset: number;
  /** The superstep that published it. */
  superstep: number;
  /** Who published it in that superstep and its count there (the publisher's dedupe key). */
  place: string;
  sealed: string;
}

/** What `readStream` reads: entries from an offset on, or the entries of one superstep. */
export interface StreamQuery {
  /** The first offset wanted. @default 0 */
  from?: number;
  /** Only this superstep's entries (with `from`, those at or after it). */
  superstep?: number;
  /** Page size. @default 100 */
  limit?: number;
}

export interface SaveOptions {
  /**
   * The run's head seal as this save leaves it (see `RunHead.sealed`), stored with the head in the
   * same atomic write. The runner always gives one; a store stores an absent one as ''.
   */
  head?: string;
  /**
   * Call records to append atomically with the checkpoint (fenced and ordered like `recordCall`,
   * against the run's segment before this save). Lets the last `done` and the checkpoint share one round trip.
   */
  calls?: CallRecord[];
  /** Refuse (CheckpointConflict) unless the run has exactly this many call records. */
  expectCalls?: number;
  /** Ownership written with the checkpoint. */
  owner?: string;
  /**
   * When the run is due work next: a running run's lease expiry, a sleeping run's wake time, a
   * paused run's decision deadline. Absent: a running or sleeping run is due at once, a paused one
   * never (it waits for a person's decision).
   */
  leaseExpiresAt?: number;
  /**
   * An operator decided to go on from what the store holds though a failover may have lost writes
   * to the run (`FailoverNeedsDecision`, `rerunInDoubt`): a store that detects such failovers
   * (Redis) lets this write through. Others ignore it.
   */
  acceptLostWrites?: boolean;
}

export interface ListUnfinishedOptions {
  /** Only runs whose lease expired before this epoch ms (or that have none). */
  leaseExpiredBefore?: number;
  /** Paging: run ids strictly greater than this. Results are ordered by run id. */
  after?: string;
  /** Page size (default 100). */
  limit?: number;
}

export interface DueQuery {
  /** Epoch ms: work due at or before it. Runs waiting on a queue are never due. */
  now: number;
  /** Only runs of these flows. @default every flow */
  flows?: readonly string[];
  /** Page size (default 100). */
  limit?: number;
}

export interface ListQuery {
  flow?: string;
  status?: RunStatus;
  /** Paging cursor from a previous page's `next`. Runs are listed newest first. */
  before?: string;
  limit?: number;
}

export interface RunPage {
  runs: RunHead[];
  /** Pass as `before` to get the next page; absent on the last page. */
  next?: string;
}

export interface HeadlessQuery {
  /** Paging cursor from a previous page's `next`. */
  cursor?: string;
  /** Page size (default 100). */
  limit?: number;
}

export interface HeadlessPage {
  runIds: string[];
  /** Pass as `cursor` to get the next page; absent on the last page. */
  next?: string;
}

export interface HistoryPage {
  checkpoints: CheckpointRecord[];
  calls: CallRecord[];
}

export abstract class CheckpointStore {
  /**
   * True for stores other processes can read: the runner then refuses to work without a
   * checkpoint key, so each process can check what another one wrote.
   */
  abstract readonly shared: boolean;

  /**
   * Compare-and-set. Step 0 only creates a run that does not exist; any other step must be exactly
   * the stored step + 1, of an unfinished run, with the run's current segment or the next one (a
   * claim). Otherwise `CheckpointConflict`, and nothing is written.
   */
  abstract save(
    checkpoint: CheckpointRecord,
    options?: SaveOptions,
  ): Promise<void>;

  /** The run's latest checkpoint, or undefined if nothing is stored. */
  abstract latest(runId: string): Promise<CheckpointRecord | undefined>;

  /**
   * Heads of the flow's unfinished (running, paused or sleeping) runs, by run id, one page at a time. Runs
   * waiting on a queue are left out: only `admit` starts them.
   */
  abstract listUnfinished(
    flow: string,
    options?: ListUnfinishedOptions,
  ): Promise<RunHead[]>;

  /**
   * Due work: heads of unfinished runs whose due time (`leaseExpiresAt`) is before `now`, most
   * overdue first: `running` runs whose lease expired or was never set (their owner is gone,
   * released them, or an operator's write left them to a worker), `sleeping` runs whose wake time
   * came (or that have none), `paused` runs whose decision deadline passed (never one without).
   * Found through an index by due time, so a look costs O(runs due), never O(runs): workers look
   * often. A run listed here is only a candidate; taking it is the claim's compare-and-set.
   */
  abstract listDue(query: DueQuery): Promise<RunHead[]>;

  /**
   * Stores a run's step 0 on a queue, waiting: it is not due work and not unfinished for
   * `listUnfinished` until `admit` admits it. With a dedupe key held by an unfinished run of the
   * queue, writes nothing and returns that run. A run id already stored is `CheckpointConflict`.
   */
  abstract enqueue(
    checkpoint: CheckpointRecord,
    placement: QueuePlacement,
    options?: Pick<SaveOptions, 'head'>,
  ): Promise<Enqueued>;

  /**
   * Admits waiting runs of a queue, in order (priority, then availability, then enqueue order),
   * as far as its limits allow, counted over every worker's admissions: concurrent looks (other
   * processes included) never admit past a limit. An admitted run is due work once the query's
   * lease (if any) expires, so the admitter's claim takes it first and any worker's after that.
   * Returns the admitted runs' heads.
   *
   * Admission time: a look with a `concurrency` or `perKey` limit stamps `admittedAt` = the later
   * of `now` and the latest end among the queue's admitted runs that have ended (their
   * `updatedAt`, or the store's record of the end, never earlier), so a run never carries an
   * admission time before the end of the run whose place it took (that end may land after the
   * admitter read its clock); other looks stamp `now`. A later stamp only keeps a run longer in
   * the rate window, never shorter.
   */
  abstract admit(query: AdmitQuery): Promise<RunHead[]>;

  /** Removes the run, its checkpoints, its call log and its stream. True if anything was removed. */
  abstract delete(runId: string): Promise<boolean>;

  /**
   * Appends call records (in order) to the run's call log. Refused with `CheckpointConflict`
   * unless `segment` is the run's current segment and the run is running (fencing), and the
   * records are in order of (segment, superstep, seq), the first after the run's last stored
   * record (call-order.ts: so none is stored twice). `head` is the run's head seal as the append leaves it
   * (see `RunHead.sealed`), stored with the records in the same atomic write.
   */
  abstract recordCall(
    runId: string,
    segment: number,
    records: CallRecord[],
    head?: string,
  ): Promise<void>;

  /**
   * Appends entries to the run's stream, numbered on from its length (the first gets the number
   * the stream's length had), fenced like `recordCall`: refused with `CheckpointConflict` unless
   * `segment` is the run's current segment and the run is running, and then nothing is written.
   * Afterwards, entries of supersteps before the appended ones' beyond the newest `keep` are
   * dropped (bounded retention; a superstep's own entries are kept while it runs, so a re-run of it
   * can tell what it published). Resolves to the offset of the first appended entry.
   */
  abstract appendStream(
    runId: string,
    segment: number,
    entries: readonly Omit<StreamRecord, 'offset'>[],
    keep: number,
  ): Promise<number>;

  /** Stream entries in offset order (see `StreamQuery`); dropped entries are not there. */
  abstract readStream(
    runId: string,
    query?: StreamQuery,
  ): Promise<StreamRecord[]>;

  /** The call records of one superstep, every segment, ordered by (segment, seq). */
  abstract calls(runId: string, superstep: number): Promise<CallRecord[]>;

  /** Run heads for operators, newest first, one page at a time. */
  abstract list(query?: ListQuery): Promise<RunPage>;

  /**
   * Ids of runs whose checkpoints are stored but whose head is not: a head deleted below the
   * store, since every write keeps both. The other listings read heads and so cannot see such a
   * run; the sweep and `runs verify` ask here and report each as `CheckpointStoreCorrupt`. Paged
   * in an order of the store's choosing; reads every run once, so it is an audit, not a hot path.
   */
  abstract listHeadless(query?: HeadlessQuery): Promise<HeadlessPage>;

  /** Every checkpoint (by step) and call record (by segment, superstep, seq) of a run. */
  abstract history(runId: string): Promise<HistoryPage>;

  /** The run's head (columns of the latest checkpoint plus ownership), or undefined. */
  abstract head(runId: string): Promise<RunHead | undefined>;

  /**
   * Extends the leases of `runIds` (the runs this worker is driving) that `owner` still holds and
   * that are `running`, in one write. Returns how many were extended. A lease of `0` releases
   * them: afterwards their heads' `leaseExpiresAt` is 0, so another worker may take them at once.
   * A paused or sleeping run's due time is its deadline or wake time, never a lease: a renewal
   * that lands after the save that paused it or put it to sleep leaves it as it is.
   */
  abstract renewLeases(
    owner: string,
    leaseExpiresAt: number,
    runIds: readonly string[],
  ): Promise<number>;

  /**
   * Whether the run was last written, unconfirmed on replicas, by a master a promoted replica has
   * since replaced: writes after that one may be lost (`FailoverNeedsDecision`). Read-only. Stores
   * that cannot lose acknowledged writes to a failover (all but Redis) say undefined.
   */
  failover(runId: string): Promise<StoreFailover | undefined> {
    void runId;
    return Promise.resolve(undefined);
  }

  /** Releases connections. The store is unusable afterwards. */
  abstract close(): Promise<void>;
}

/** See `CheckpointStore.failover`: the replication histories, the lost one and the current one. */
export interface StoreFailover {
  lostHistory: string;
  history: string;
}
