import { CheckpointStoreCorrupt } from '../../errors';
import { Messages } from '../../errors/messages';
import type {
  CallRecord,
  CheckpointRecord,
  RunStatus,
} from '../checkpoints/checkpoint-store';
import type { CanonicalText, Json } from './canonical-json';
import type {
  ApprovalDecision,
  CallIdentity,
  CallOutcome,
  CancelDecision,
  PendingApproval,
  RerunDecision,
  Resolution,
  RestoreMark,
  SyncDecision,
} from './decision-records';
import type { KeyRing } from './key-ring';

// Every record type can be imported from here; decision-records.ts is the leaf that holds these.
export type * from './decision-records';
import { seal } from './seal';
import { corrupt, hide, isObject, openBody } from './sealed-body';

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

/** What a checkpoint holds besides its columns (run id, step, flow, status, segment). */
export interface CheckpointContent {
  kind: 'flow' | 'loop';
  /** Completed supersteps; the next superstep's calls are logged under this number. */
  superstep: number;
  /**
   * Plain JSON as read from the store; as the runner holds it between supersteps, its canonical
   * text (see `StateCodec.encode`), sealed verbatim.
   */
  state: Json | CanonicalText;
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
  /**
   * Why this checkpoint was written. `parked`: recovery gave up on the run (`maxRecoveryAttempts`);
   * `cancel`: an operator ended it; `fork`: an operator started it from another run's checkpoint;
   * `resolve`: an operator said what calls in doubt really did (`resolutions`); `restore`: the
   * store was restored from a backup (`restored`); `sleep`: a node waits until `wakeAt`; `wake`: a
   * worker took a sleeping run on at its time; `deadline`: the clock failed a paused run whose
   * approval deadline passed (`onTimeout: 'fail'`); `schedule`: a schedule's record (flow
   * `$schedules`, flow/schedules) changed: its definition, or it was paused or resumed.
   */
  reason:
    | 'start'
    | 'superstep'
    | 'claim'
    | 'pause'
    | 'sleep'
    | 'wake'
    | 'deadline'
    | 'resume'
    | 'parked'
    | 'cancel'
    | 'fork'
    | 'resolve'
    | 'restore'
    | 'schedule';
  /**
   * Recoveries (claims) since the run last completed a superstep: a run that keeps dying in the
   * same superstep is parked once this reaches the runner's `maxRecoveryAttempts`. Absent = 0.
   */
  recoveries?: number;
  /**
   * SHA-256 of the state the run started from (its canonical text): starting the run id again with
   * the same input finds this run instead of conflicting with it.
   */
  startedFrom?: string;
  /** A forked run: the run and step its first checkpoint was copied from. */
  forkedFrom?: { runId: string; step: number };
  /** A paused run: the call that waits for a decision. */
  pending?: PendingApproval;
  /**
   * A sleeping run: when it wakes (epoch ms), the earliest of its nodes' sleeps. The superstep
   * stays open; on waking it runs again and each sleep replays from its call record.
   */
  wakeAt?: number;
  /**
   * Decisions for the open superstep (sealed before any is spent): kept through pauses and claims
   * until the superstep closes, so each node's approved or denied call finds its own.
   */
  decisions?: ApprovalDecision[];
  /** On a claim (`reason: 'claim'`) that reran calls in doubt of tools that are not idempotent. */
  rerun?: RerunDecision;
  /**
   * What calls in doubt of the open superstep really did (sealed before any is spent): kept through
   * claims and pauses until the superstep closes, as `decisions` are.
   */
  resolutions?: Resolution[];
  /** The store was restored from a backup since the run started: kept until it ends. */
  restored?: RestoreMark;
  /** On an operator's cancel (`reason: 'cancel'`). */
  cancelled?: CancelDecision;
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

/**
 * `started`: about to run (one per attempt). `done`: its outcome. `pending`: waits for a decision
 * with the run paused. `unrecordable`: ran, outcome unknown or unsealable (in doubt).
 * `approving`: awaits a synchronous approval port (in doubt if the worker stops there).
 * `restored`: not run, in a run restored from a backup: it may have run after the backup (in doubt).
 */
export type CallPhase =
  'started' | 'done' | 'pending' | 'unrecordable' | 'approving' | 'restored';

const PHASES: ReadonlySet<string> = new Set<CallPhase>([
  'started',
  'done',
  'pending',
  'unrecordable',
  'approving',
  'restored',
]);

export interface CallContent extends CallIdentity {
  phase: CallPhase;
  /** SHA-256 of the canonical arguments: replay only when they match. */
  argsHash: string;
  /** The arguments (on `started`, `pending` and `approving`): exactly what the tool gets. */
  args?: Json;
  outcome?: CallOutcome;
  /** For `unrecordable` (why the result could not be sealed) and `pending`. */
  reason?: string;
  /** On `started` of a retry: which attempt this is (2, 3, ...); absent on the first. */
  attempt?: number;
  /** On `started` of a retry: the error the previous attempt threw. */
  previous?: { name: string; message: string };
  /** On `done` and `unrecordable` after retries: how many attempts ran. Absent when one did. */
  attempts?: number;
  /** On the record after `approving`: what the synchronous approval port decided. */
  decision?: SyncDecision;
  /** Epoch ms the record was written, for operators (durations). */
  at: number;
}

export interface Call extends CallContent {
  runId: string;
  /**
   * The run incarnation the record was written in (sealed): a record copied from an earlier run
   * with the same id carries that run's, and `openCall` refuses it given the run's own.
   */
  incarnation: number;
  segment: number;
  seq: number;
  superstep: number;
}

/**
 * A call record's content as the executor writes it: the arguments, and a result value, may be
 * given as the canonical text the executor already made of them (sealed verbatim, the same body as
 * the values would give).
 */
export type CallDraft = Omit<CallContent, 'args' | 'outcome'> & {
  args?: Json | CanonicalText;
  outcome?: CallOutcome | { ok: true; value: CanonicalText };
};

function checkpointCoords(r: Omit<CheckpointRecord, 'sealed'>) {
  // Keys in canonical (sorted) order, as in callCoords: the encoder then has nothing to sort.
  return {
    flow: r.flow,
    kind: 'checkpoint' as const,
    runId: r.runId,
    segment: r.segment,
    status: r.status,
    step: r.step,
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
  const { runId, step, flow, status, segment } = cp;
  const columns = { runId, step, flow, status, segment };
  // The columns are the coordinates, not the body: left out as it is encoded, no copy made.
  const body = hide(ring, cp, CHECKPOINT_SECRETS) as unknown as Json;
  const sealed = seal(ring, checkpointCoords(columns), body, COLUMNS);
  return { ...columns, sealed };
}

/** A checkpoint's columns: stored beside its sealed body, not in it. */
const COLUMNS = new Set(['runId', 'step', 'flow', 'status', 'segment']);

/** What a checkpoint holds that is encrypted at rest: the run's data, not its bookkeeping. */
const CHECKPOINT_SECRETS = ['state', 'pending'] as const;
/** What a call record holds that is encrypted at rest. */
const CALL_SECRETS = ['args', 'outcome', 'previous', 'decision'] as const;

export function openCheckpoint(
  ring: KeyRing,
  record: CheckpointRecord,
): Checkpoint {
  const what = `checkpoint step ${record.step}`;
  const why = record.unreadable; // a store could not read the row's columns
  if (why)
    throw corrupt(record.runId, what, { why: 'unreadable', detail: why });
  const content = openBody<CheckpointContent>(
    ring,
    checkpointCoords(record),
    record,
    what,
    CHECKPOINT_SECRETS,
  );
  if (
    !isObject(content) ||
    typeof content.superstep !== 'number' ||
    typeof content.logBefore !== 'number' ||
    typeof content.incarnation !== 'number' ||
    !Array.isArray(content.frontier) ||
    (record.status === 'sleeping' && typeof content.wakeAt !== 'number')
  ) {
    throw new CheckpointStoreCorrupt(
      Messages.corruptUnreadable(record.runId, what, 'missing fields'),
      record.runId,
    );
  }
  const { runId, step, flow, status, segment } = record;
  // Segments count up from the incarnation, one per claim or resume, each with a new step.
  if (segment < content.incarnation || segment - content.incarnation > step) {
    throw new CheckpointStoreCorrupt(
      Messages.corruptUnreadable(
        runId,
        what,
        `segment ${segment} is not one of incarnation ${content.incarnation}'s`,
      ),
      runId,
    );
  }
  return { ...content, runId, step, flow, status, segment };
}

export function sealCall(
  ring: KeyRing,
  call: CallDraft & Omit<Call, keyof CallContent>,
): CallRecord {
  const { runId, segment, seq, superstep, incarnation, ...content } = call;
  return sealCallAt(
    ring,
    { runId, segment, seq, superstep },
    incarnation,
    content,
  );
}

/**
 * `sealCall` with the record's columns and its content given apart, as the call log has them: no
 * object is merged only to be split again (this runs for every record of every superstep). The
 * run's incarnation is sealed with the content (see `Call.incarnation`).
 */
export function sealCallAt(
  ring: KeyRing,
  columns: Omit<CallRecord, 'sealed'>,
  incarnation: number,
  content: CallDraft,
): CallRecord {
  const body = hide(ring, { ...content, incarnation }, CALL_SECRETS);
  const { runId, segment, seq, superstep } = columns;
  return {
    runId,
    segment,
    seq,
    superstep,
    sealed: seal(ring, callCoords(columns), body),
  };
}

/**
 * A call record, verified. Given the run's `incarnation` (its checkpoint's), a record sealed in
 * another incarnation (copied from an earlier run with the same id) is `CheckpointStoreCorrupt`.
 */
export function openCall(
  ring: KeyRing,
  record: CallRecord,
  incarnation?: number,
): Call {
  const what = `call record ${record.segment}/${record.seq}`;
  const content = openBody<CallContent & { incarnation: number }>(
    ring,
    callCoords(record),
    record,
    what,
    CALL_SECRETS,
  );
  const invalid = isObject(content) ? invalidCall(content) : 'missing fields';
  if (invalid !== undefined) {
    throw new CheckpointStoreCorrupt(
      Messages.corruptUnreadable(record.runId, what, invalid),
      record.runId,
    );
  }
  if (incarnation !== undefined && content.incarnation !== incarnation) {
    throw new CheckpointStoreCorrupt(
      Messages.corruptIncarnation(
        record.runId,
        `${what} (superstep ${record.superstep})`,
        content.incarnation,
        incarnation,
      ),
      record.runId,
    );
  }
  const { runId, segment, seq, superstep } = record;
  return { ...content, runId, segment, seq, superstep };
}

/** Why a validly signed call body cannot be used, if it cannot. */
function invalidCall(
  c: CallContent & { incarnation: unknown },
): string | undefined {
  if (
    typeof c.phase !== 'string' ||
    typeof c.tool !== 'string' ||
    !Number.isInteger(c.incarnation)
  )
    return 'missing fields';
  if (!PHASES.has(c.phase))
    return `unknown phase "${c.phase}" (written by a newer version?)`;
  const count = (v: unknown) => Number.isInteger(v) && (v as number) >= 2;
  if (c.attempt !== undefined && !count(c.attempt)) return 'bad attempt';
  if (c.attempts !== undefined && !count(c.attempts)) return 'bad attempts';
  if (c.previous !== undefined && !isError(c.previous)) return 'bad previous';
  if (c.decision !== undefined) {
    const d: unknown = c.decision;
    if (
      !isObject(d) ||
      typeof d.approved !== 'boolean' ||
      (d.by !== undefined && typeof d.by !== 'string') ||
      (d.reason !== undefined && typeof d.reason !== 'string') ||
      (d.edited !== undefined && d.edited !== true)
    )
      return 'bad decision';
  }
  return undefined;
}

function isError(v: unknown): boolean {
  return (
    isObject(v) && typeof v.name === 'string' && typeof v.message === 'string'
  );
}
