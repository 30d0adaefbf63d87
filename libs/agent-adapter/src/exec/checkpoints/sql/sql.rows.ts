/** The SQL store's rows as the drivers return them, and their mapping to the store port's types. */
import type { CallKey } from '../call-order';
import type {
  CallRecord,
  CheckpointRecord,
  RunHead,
  RunStatus,
  StreamRecord,
} from '../checkpoint-store';

/** A head row. BIGINT columns come back as strings from Postgres and as numbers from SQLite. */
export interface RunRow extends LastCallRow {
  run_id: string;
  flow: string;
  step: number;
  status: RunStatus;
  segment: number;
  calls: number | string;
  sealed: string;
  owner: string | null;
  lease_expires_at: number | string | null;
  updated_at: number | string;
  queue: string | null;
  queue_key: string | null;
  priority: number;
  available_at: number | string | null;
  admitted_at: number | string | null;
  id?: number | string;
}

/** The head's key of the run's last call record (see call-order.ts). */
interface LastCallRow {
  last_segment: number;
  last_superstep: number;
  last_seq: number;
}

/** The head's last key, undefined for (0, 0, 0): the run has no record (the columns' default). */
function toLastCall(r: LastCallRow): CallKey | undefined {
  const key = {
    segment: Number(r.last_segment),
    superstep: Number(r.last_superstep),
    seq: Number(r.last_seq),
  };
  return key.segment === 0 && key.superstep === 0 && key.seq === 0
    ? undefined
    : key;
}

export interface CheckpointRow {
  run_id: string;
  step: number;
  flow: string;
  status: RunStatus;
  segment: number;
  sealed: string;
}

export interface CallRow {
  run_id: string;
  superstep: number;
  segment: number;
  seq: number;
  sealed: string;
}

/** The columns of a `RunRow` (without `id`, which only listing reads). */
export const HEAD_COLUMNS =
  'run_id, flow, step, status, segment, calls, sealed, owner, lease_expires_at, updated_at, queue, queue_key, priority, available_at, admitted_at, last_segment, last_superstep, last_seq';
export const CHECKPOINT_COLUMNS = 'run_id, step, flow, status, segment, sealed';
export const CALL_COLUMNS = 'run_id, superstep, segment, seq, sealed';
export const STREAM_COLUMNS = 'run_id, entry_no, superstep, place, sealed';

export interface StreamRow {
  run_id: string;
  entry_no: number | string;
  superstep: number;
  place: string;
  sealed: string;
}

const num = (v: number | string) => Number(v);

export function toHead(r: RunRow): RunHead {
  const lastCall = toLastCall(r);
  return {
    runId: r.run_id,
    flow: r.flow,
    step: num(r.step),
    status: r.status,
    segment: num(r.segment),
    calls: num(r.calls),
    sealed: r.sealed,
    updatedAt: num(r.updated_at),
    ...(r.owner !== null && { owner: r.owner }),
    ...(r.lease_expires_at !== null && {
      leaseExpiresAt: num(r.lease_expires_at),
    }),
    ...(r.queue !== null && {
      queue: {
        name: r.queue,
        ...(r.queue_key !== null && { key: r.queue_key }),
        priority: num(r.priority),
        ...(r.available_at !== null && { availableAt: num(r.available_at) }),
        ...(r.admitted_at !== null && { admittedAt: num(r.admitted_at) }),
      },
    }),
    ...(lastCall && { lastCall }),
  };
}

export function toCheckpoint(r: CheckpointRow): CheckpointRecord {
  return {
    runId: r.run_id,
    step: num(r.step),
    flow: r.flow,
    status: r.status,
    segment: num(r.segment),
    sealed: r.sealed,
  };
}

export function toCall(r: CallRow): CallRecord {
  return {
    runId: r.run_id,
    superstep: num(r.superstep),
    segment: num(r.segment),
    seq: num(r.seq),
    sealed: r.sealed,
  };
}

export function toStreamRecord(r: StreamRow): StreamRecord {
  return {
    runId: r.run_id,
    offset: num(r.entry_no),
    superstep: num(r.superstep),
    place: r.place,
    sealed: r.sealed,
  };
}
