import { createHash } from 'node:crypto';
import { CheckpointConflict, CheckpointNotFound } from '../../errors';
import { Messages } from '../../errors/messages';
import type {
  CheckpointRecord,
  CheckpointStore,
  RunHead,
} from '../../exec/checkpoints/checkpoint-store';
import { listAll } from '../../exec/checkpoints/list-all';
import { canonical } from '../../exec/durable/canonical-json';
import type { KeyRing } from '../../exec/durable/key-ring';
import { openCheckpoint, type Checkpoint } from '../../exec/durable/records';
import { SegmentWriter } from '../../exec/durable/segment-writer';
import { startCheckpoint } from '../runner/run-transitions';
import { cronClock } from './cron';

/**
 * A schedule is stored as a record in the runs' own index: a "run" of the reserved flow
 * `$schedules` (not a valid flow name), id `schedule:<name>`, its sealed state the schedule's
 * definition. An active record is `running`, owned by `$scheduler`, with its lease ending at the
 * next tick: the due-work index finds it then, like any due run, and firing it moves the lease to
 * the tick after (`renewLeases`, no checkpoint). A paused record is `paused` with no due time, so
 * it is never due. Checkpoints are written only when the definition changes, or on pause and
 * resume: a schedule's history does not grow with its ticks.
 */
export const SCHEDULES_FLOW = '$schedules';
/** The owner of every active schedule record: any worker renews it as this owner. */
export const SCHEDULER = '$scheduler';
export const RECORD_PREFIX = 'schedule:';

/** What a schedule does when a tick comes while its previous run is unfinished. @publicApi */
export type ScheduleOverlap = 'skip' | 'queue' | 'allow';
/** Which ticks missed while no worker was up still run. @publicApi */
export type ScheduleCatchUp = 'none' | 'last' | 'all';

/** A schedule as its record seals it. @publicApi */
export interface ScheduleDefinition {
  name: string;
  flow: string;
  expression: string;
  /** IANA time zone the expression is read in; absent: UTC. */
  timezone?: string;
  overlap: ScheduleOverlap;
  catchUp: ScheduleCatchUp;
}

/** The record's sealed state: the definition, and since when its ticks count. */
export interface RecordState extends ScheduleDefinition {
  /** Ticks before this (epoch ms: the record's creation, last change or resume) never run. */
  since: number;
}

/** A schedule as `schedules.list()` shows it. @publicApi */
export interface ScheduleInfo extends ScheduleDefinition {
  paused: boolean;
  /** The next tick it fires (epoch ms); absent while paused. */
  nextAt?: number;
  /** Ticks before this (its creation, last change or resume) never run. */
  since: number;
}

/** A schedule's record as read from the store, verified. */
export interface ScheduleRecord {
  head: RunHead;
  cp: Checkpoint;
  state: RecordState;
}

export const recordId = (name: string): string => `${RECORD_PREFIX}${name}`;

/** The run id of a schedule's tick: the same on every worker, so a second start is a no-op. */
export const tickRunId = (name: string, tick: number): string =>
  `${name}@${new Date(tick).toISOString()}`;

/** The record of schedule `name`, verified, or undefined when none is stored. */
export async function readRecord(
  store: CheckpointStore,
  ring: KeyRing,
  name: string,
): Promise<ScheduleRecord | undefined> {
  const runId = recordId(name);
  const [head, latest] = await Promise.all([
    store.head(runId),
    store.latest(runId),
  ]);
  if (!head || !latest) return undefined;
  return openRecord(ring, name, head, latest);
}

/** A record's head and latest checkpoint, verified: the checkpoint must be a schedule's. */
function openRecord(
  ring: KeyRing,
  name: string,
  head: RunHead,
  latest: CheckpointRecord,
): ScheduleRecord {
  const cp = openCheckpoint(ring, latest);
  if (cp.flow !== SCHEDULES_FLOW)
    throw new CheckpointConflict(
      Messages.scheduleIdTaken(name, cp.flow),
      head.runId,
    );
  return { head, cp, state: cp.state as unknown as RecordState };
}

/**
 * Writes the record's next checkpoint (or its first), with the store's compare-and-set: of two
 * workers writing at once, one wins and the other gets `CheckpointConflict`. `nextAt`: the tick the
 * record falls due at; none for a paused schedule.
 */
export async function writeRecord(
  store: CheckpointStore,
  ring: KeyRing,
  previous: ScheduleRecord | undefined,
  state: RecordState,
  nextAt: number | undefined,
): Promise<Checkpoint> {
  const text = canonical(state, `schedule "${state.name}"`);
  const digest = createHash('sha256').update(text.text).digest('hex');
  const status = nextAt === undefined ? 'paused' : 'running';
  const cp: Checkpoint = previous
    ? {
        ...previous.cp,
        step: previous.cp.step + 1,
        status,
        reason: 'schedule',
        state: text,
        digest,
      }
    : {
        ...startCheckpoint({
          runId: recordId(state.name),
          flow: { name: SCHEDULES_FLOW, kind: 'flow', digest, starts: [] },
          state: text,
          identity: {},
          idemKid: ring.current.id,
        }),
        status,
      };
  await SegmentWriter.writeAlone(
    store,
    ring,
    cp,
    {
      owner: SCHEDULER,
      ...(nextAt !== undefined && { leaseUntil: nextAt }),
    },
    previous ? { expectCalls: previous.head.calls } : {},
  );
  return cp;
}

/** Whether two definitions say the same. */
export function sameDefinition(
  a: ScheduleDefinition,
  b: ScheduleDefinition,
): boolean {
  return (
    a.name === b.name &&
    a.flow === b.flow &&
    a.expression === b.expression &&
    a.timezone === b.timezone &&
    a.overlap === b.overlap &&
    a.catchUp === b.catchUp
  );
}

/** Every stored schedule (declared by any process), by name, with its next tick. */
export async function listSchedules(
  store: CheckpointStore,
  ring: KeyRing,
): Promise<ScheduleInfo[]> {
  const out: ScheduleInfo[] = [];
  for await (const head of listAll(store, { flow: SCHEDULES_FLOW })) {
    // The listing gave the head: only the latest checkpoint is left to read.
    const latest = await store.latest(head.runId);
    const name = head.runId.slice(RECORD_PREFIX.length);
    if (latest) out.push(infoOf(openRecord(ring, name, head, latest)));
  }
  return out.sort((a, b) => (a.name < b.name ? -1 : 1));
}

/**
 * Pauses a stored schedule (no worker fires it until it is resumed) or resumes it from its next
 * tick (the ticks missed while paused never run): a checkpoint of its record, compare-and-set.
 */
export async function changeSchedule(
  store: CheckpointStore,
  ring: KeyRing,
  name: string,
  to: 'pause' | 'resume',
): Promise<ScheduleInfo> {
  const record = await readRecord(store, ring, name);
  if (!record)
    throw new CheckpointNotFound(recordId(name), Messages.noSchedule(name));
  const state = { ...record.state, since: Date.now() };
  const next =
    to === 'pause'
      ? undefined
      : cronClock(name, state.expression, state.timezone).next(state.since - 1);
  await writeRecord(store, ring, record, state, next);
  return { ...state, paused: next === undefined, ...at(next) };
}

/** `nextAt` when there is one. */
export function at(next: number | undefined): { nextAt?: number } {
  return next === undefined ? {} : { nextAt: next };
}

export function infoOf({ head, state }: ScheduleRecord): ScheduleInfo {
  const paused = head.status !== 'running';
  return { ...state, paused, ...(!paused && at(head.leaseExpiresAt)) };
}
