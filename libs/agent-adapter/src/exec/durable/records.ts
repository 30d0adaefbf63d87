import { CheckpointStoreCorrupt } from '../../errors';
import { Messages } from '../../errors/messages';
import type {
  CallRecord,
  CheckpointRecord,
  RunStatus,
} from '../checkpoints/checkpoint-store';
import type { Json } from './canonical-json';
import type { KeyRing } from './key-ring';
import { open, seal } from './seal';

/** Who a run acts for. Sealed into every checkpoint. @publicApi */
export interface RunIdentity {
  /** The end user the run acts for. */
  user?: string;
  /** The conversation or thread. */
  thread?: string;
  /** The authority the run acts with (service account, delegated grant...): needed to recover it. */
  principal?: string;
}

/** The error that ended a run, as sealed into its final checkpoint. */
export interface SealedError {
  name: string;
  message: string;
  node?: string;
}

/** A call that waits for an approval. @publicApi */
export interface PendingApproval {
  node: string;
  index: number;
  tool: string;
  args: Json;
  /** SHA-256 of the canonical arguments: a decision only covers these arguments. */
  argsHash: string;
}

/** An approval decision, as sealed into the checkpoint that resumes the run. @publicApi */
export interface ApprovalDecision extends Omit<PendingApproval, 'args'> {
  approved: boolean;
  by?: string;
  reason?: string;
}

/** What a checkpoint holds besides its columns (run id, step, flow, status, segment). */
export interface CheckpointContent {
  kind: 'flow' | 'loop';
  /** Completed supersteps; the next superstep's calls are logged under this number. */
  superstep: number;
  state: Json;
  frontier: string[];
  visits: Record<string, number>;
  digest: string;
  identity: RunIdentity;
  /** Key id the run's idempotency keys derive from, fixed at start so rotation does not change them. */
  idemKid: string;
  /**
   * The segment the run started with: random, so a run id that is deleted and used again starts a
   * new, unrelated sequence of segments (a worker of the old run is fenced from the new one), and
   * its idempotency keys differ.
   */
  incarnation: number;
  /** Call records of all supersteps before `superstep`: recovery checks none went missing. */
  logBefore: number;
  /** Why this checkpoint was written. */
  reason: 'start' | 'superstep' | 'claim' | 'pause' | 'resume';
  /** A paused run: the call that waits for a decision. */
  pending?: PendingApproval;
  /**
   * Decisions for the open superstep (sealed before any is spent): kept through pauses and claims
   * until the superstep closes, so each node's approved or denied call finds its own.
   */
  decisions?: ApprovalDecision[];
  error?: SealedError;
  /** Free-form, kind-specific data (the tool loop's history, a paused call, a decision). */
  extra?: { [key: string]: Json };
}

export interface Checkpoint extends CheckpointContent {
  runId: string;
  step: number;
  flow: string;
  status: RunStatus;
  segment: number;
}

/** The outcome of a finished tool call, as sealed into its `done` record. */
export type CallOutcome =
  | { ok: true; value?: Json }
  | { ok: false; error: { name: string; message: string } };

export type CallPhase = 'started' | 'done' | 'pending' | 'unrecordable';

/** What identifies a call across workers and recoveries: where it was made, and to which tool. */
export interface CallIdentity {
  node: string;
  /** The call's index among the calls its node made in this superstep. */
  index: number;
  tool: string;
}

export interface CallContent extends CallIdentity {
  phase: CallPhase;
  /** SHA-256 of the canonical arguments: replay only when they match. */
  argsHash: string;
  /** The arguments (on `started` only). */
  args?: Json;
  outcome?: CallOutcome;
  /** For `unrecordable` (why the result could not be sealed) and `pending`. */
  reason?: string;
  /** Epoch ms the record was written, for operators (durations). */
  at: number;
}

export interface Call extends CallContent {
  runId: string;
  segment: number;
  seq: number;
  superstep: number;
}

function checkpointCoords(r: Omit<CheckpointRecord, 'sealed'>) {
  return {
    kind: 'checkpoint' as const,
    runId: r.runId,
    step: r.step,
    flow: r.flow,
    status: r.status,
    segment: r.segment,
  };
}

function callCoords(r: Omit<CallRecord, 'sealed'>) {
  return {
    kind: 'call' as const,
    runId: r.runId,
    segment: r.segment,
    seq: r.seq,
    superstep: r.superstep,
  };
}

export function sealCheckpoint(
  ring: KeyRing,
  cp: Checkpoint,
): CheckpointRecord {
  const { runId, step, flow, status, segment, ...content } = cp;
  const columns = { runId, step, flow, status, segment };
  return {
    ...columns,
    sealed: seal(ring, checkpointCoords(columns), content as unknown as Json),
  };
}

export function openCheckpoint(
  ring: KeyRing,
  record: CheckpointRecord,
): Checkpoint {
  const opened = open(ring, checkpointCoords(record), record.sealed);
  const what = `checkpoint step ${record.step}`;
  if (!opened.ok) throw corrupt(record.runId, what, opened);
  const content = opened.content as CheckpointContent;
  if (
    !isObject(content) ||
    typeof content.superstep !== 'number' ||
    typeof content.logBefore !== 'number' ||
    typeof content.incarnation !== 'number' ||
    !Array.isArray(content.frontier)
  ) {
    throw new CheckpointStoreCorrupt(
      Messages.corruptUnreadable(record.runId, what, 'missing fields'),
      record.runId,
    );
  }
  const { runId, step, flow, status, segment } = record;
  return { ...content, runId, step, flow, status, segment };
}

export function sealCall(ring: KeyRing, call: Call): CallRecord {
  const { runId, segment, seq, superstep, ...content } = call;
  const columns = { runId, segment, seq, superstep };
  return {
    ...columns,
    sealed: seal(ring, callCoords(columns), content),
  };
}

export function openCall(ring: KeyRing, record: CallRecord): Call {
  const opened = open(ring, callCoords(record), record.sealed);
  const what = `call record ${record.segment}/${record.seq}`;
  if (!opened.ok) throw corrupt(record.runId, what, opened);
  const content = opened.content as CallContent;
  if (
    !isObject(content) ||
    typeof content.phase !== 'string' ||
    typeof content.tool !== 'string'
  ) {
    throw new CheckpointStoreCorrupt(
      Messages.corruptUnreadable(record.runId, what, 'missing fields'),
      record.runId,
    );
  }
  const { runId, segment, seq, superstep } = record;
  return { ...content, runId, segment, seq, superstep };
}

function corrupt(
  runId: string,
  what: string,
  opened: { why: 'unreadable' | 'signature'; detail: string },
): CheckpointStoreCorrupt {
  return new CheckpointStoreCorrupt(
    opened.why === 'signature'
      ? Messages.corruptSignature(runId, `${what} (${opened.detail})`)
      : Messages.corruptUnreadable(runId, what, opened.detail),
    runId,
  );
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
