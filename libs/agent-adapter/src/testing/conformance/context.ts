import type {
  CallRecord,
  CheckpointRecord,
  CheckpointStore,
  RunHead,
} from '../../exec/checkpoints/checkpoint-store';
import { KeyRing } from '../../exec/durable/key-ring';
import { KEY } from '../fixtures/tickets';
import type { TestFramework } from './framework';

/**
 * What the conformance suite needs of a store: fresh stores, and (optionally) raw row access to
 * play an attacker with database access. Without `raw`, the tampering tests are left out.
 */
export interface CheckpointStoreFixture {
  name: string;
  /** A fresh, empty store in its own namespace (schema, table prefix, key prefix or file). */
  make(): Promise<CheckpointStore>;
  /** Raw access for tamper tests: rewrite the sealed text of one stored row, or delete a call row. */
  raw?: RawStoreAccess;
}

/** Row-level access to a store, below its compare-and-set: what the tampering tests write with. */
export interface RawStoreAccess {
  rewriteCall(
    store: CheckpointStore,
    runId: string,
    key: { segment: number; superstep: number; seq: number },
    sealed: string,
  ): Promise<void>;
  deleteCall(
    store: CheckpointStore,
    runId: string,
    key: { segment: number; superstep: number; seq: number },
  ): Promise<void>;
  rewriteCheckpoint(
    store: CheckpointStore,
    runId: string,
    step: number,
    sealed: string,
  ): Promise<void>;
  /**
   * Copies call records in under their own columns (segment, superstep, seq; index entries
   * too) and sets the head's call count to `headCalls`, hiding the copy from the count check.
   */
  insertCalls(
    store: CheckpointStore,
    runId: string,
    records: CallRecord[],
    headCalls: number,
  ): Promise<void>;
  /**
   * Copies a checkpoint row in under its own columns (replacing the row at its step) and moves
   * the head to it: its step and status, and `head.segment`.
   */
  insertCheckpoint(
    store: CheckpointStore,
    runId: string,
    record: CheckpointRecord,
    head: { segment: number },
  ): Promise<void>;
  /** Sets columns of the run's head (its seal too, if given) as they are. */
  editHead(
    store: CheckpointStore,
    runId: string,
    columns: Partial<Pick<RunHead, HeadColumn | 'sealed'>>,
  ): Promise<void>;
  /** Deletes the run's head (row, or the Redis head fields), its checkpoints and calls kept. */
  deleteHead(store: CheckpointStore, runId: string): Promise<void>;
  /**
   * Deletes one checkpoint row, the head untouched (and with it whatever the store keeps in that
   * row: the SQL store keeps a save's call records there).
   */
  deleteCheckpoint(
    store: CheckpointStore,
    runId: string,
    step: number,
  ): Promise<void>;
}

/** The head columns an edit can change (those the head seal covers). */
export type HeadColumn = 'flow' | 'step' | 'status' | 'segment' | 'calls';

/** What each part of the suite declares its tests with. */
export interface SuiteContext {
  describe: TestFramework['describe'];
  it: TestFramework['it'];
  /** A fresh store from the fixture, closed after the suite. */
  make: () => Promise<CheckpointStore>;
}

export const ring = KeyRing.from(KEY);
let n = 0;
/** A run id (or flow name) no other test of this process uses. */
export const uid = (p = 'run'): string =>
  `${p}-${Date.now().toString(36)}-${++n}`;

/** A checkpoint record with placeholder sealed text (stores never open it). */
export function cp(
  runId: string,
  step: number,
  over: Partial<CheckpointRecord> = {},
): CheckpointRecord {
  return {
    runId,
    step,
    flow: 'f',
    status: 'running',
    segment: 1,
    sealed: `cp-${runId}-${step}-ünï©ødé`,
    ...over,
  };
}

/** A call record with placeholder sealed text. */
export function call(
  runId: string,
  seq: number,
  over: Partial<CallRecord> = {},
): CallRecord {
  return {
    runId,
    segment: 1,
    seq,
    superstep: 0,
    sealed: `call-${runId}-${seq}`,
    ...over,
  };
}
