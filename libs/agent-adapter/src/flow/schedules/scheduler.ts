import { CheckpointConflict, DurableSetupError, FlowError } from '../../errors';
import { Messages } from '../../errors/messages';
import type { CheckpointStore } from '../../exec/checkpoints/checkpoint-store';
import type { KeyRing } from '../../exec/durable/key-ring';
import type { Flow } from '../flow.builder';
import type { RecoveryOutcome } from '../flow.interfaces';
import type { QueueLimits } from '../runner/queue-limits';
import type { EnqueueOptions } from '../runner/queues';
import type { TakeoverSource } from '../runner/takeover';
import { cronClock, type CronClock } from './cron';
import {
  at,
  changeSchedule,
  infoOf,
  listSchedules,
  readRecord,
  RECORD_PREFIX,
  sameDefinition,
  SCHEDULER,
  SCHEDULES_FLOW,
  tickRunId,
  writeRecord,
  type RecordState,
  type ScheduleInfo,
} from './schedule-record';
import {
  scheduleSettings,
  type LocalSchedule,
  type ScheduleOptions,
} from './schedule.options';

/** How the scheduler starts a tick's run (the runner's `run` and `enqueue`). */
export interface TickStarter {
  start(
    flow: Flow<object>,
    input: object,
    options: { runId: string; ctx: LocalSchedule<object>['ctx'] },
  ): Promise<unknown>;
  enqueue(
    flow: Flow<object>,
    input: object,
    options: EnqueueOptions,
  ): Promise<unknown>;
}

/** Ticks fired per look at most: a long outage with `catchUp: 'all'` goes on at the next look. */
const TICKS_PER_LOOK = 100;
/** With `catchUp: 'none'`, a tick later than this is dropped as missed. */
const ON_TIME_MS = 60_000;

/**
 * Durable schedules: each declared here is stored once (see schedule-record.ts), and any worker
 * whose takeover has this scheduler fires its due ticks: the record's lease is its next tick, so
 * the due-work index finds it like any due run. Each tick's run id is derived from the schedule
 * and the tick, so however many workers fire a tick, the store's compare-and-set starts one run.
 * `overlap` other than `allow` puts the runs on the schedule's own queue (`schedule:<name>`,
 * one at a time; `skip` with the schedule's name as dedupe key).
 */
export class Scheduler {
  private readonly local = new Map<
    string,
    { flow: Flow<object>; schedule: LocalSchedule<object> }
  >();

  constructor(
    private readonly store: CheckpointStore,
    private readonly ring: KeyRing,
    private readonly starter: TickStarter,
  ) {}

  /**
   * Declares a schedule in this process and stores it (or its changed definition). A change
   * counts ticks from now; an unchanged schedule keeps its record, paused or not.
   */
  async add<S extends object>(
    flow: Flow<S>,
    expression: string,
    options: ScheduleOptions<S> = {},
  ): Promise<ScheduleInfo> {
    const schedule = scheduleSettings(flow.name, expression, options);
    const { name } = schedule.definition;
    const other = this.local.get(name);
    if (other && other.flow.name !== flow.name)
      throw new DurableSetupError(
        Messages.scheduleTwice(name, flow.name, other.flow.name),
      );
    for (let attempt = 1; ; attempt++) {
      const record = await readRecord(this.store, this.ring, name);
      try {
        if (record && sameDefinition(record.state, schedule.definition)) {
          this.keep(flow, schedule);
          return infoOf(record);
        }
        const now = Date.now();
        const state: RecordState = { ...schedule.definition, since: now };
        const paused = record?.head.status === 'paused';
        const next = paused ? undefined : schedule.clock.next(now - 1);
        await writeRecord(this.store, this.ring, record, state, next);
        this.keep(flow, schedule);
        return { ...state, paused: next === undefined, ...at(next) };
      } catch (error) {
        // Another worker stored it (or changed it) meanwhile: read what won and go again.
        if (!(error instanceof CheckpointConflict) || attempt >= 3) throw error;
      }
    }
  }

  /** Stops firing `name` on every worker until `resume`; its runs in flight go on. */
  pause(name: string): Promise<ScheduleInfo> {
    return changeSchedule(this.store, this.ring, name, 'pause');
  }

  /** Fires `name` again from its next tick; ticks missed while paused never run. */
  resume(name: string): Promise<ScheduleInfo> {
    return changeSchedule(this.store, this.ring, name, 'resume');
  }

  /** Every stored schedule (declared by any process), with its next tick. */
  list(): Promise<ScheduleInfo[]> {
    return listSchedules(this.store, this.ring);
  }

  /** The queues of the schedules declared here that do not allow overlap. */
  get queues(): QueueLimits[] {
    return [...this.local.values()]
      .filter(({ schedule }) => schedule.definition.overlap !== 'allow')
      .map(({ schedule }) => ({
        name: queueOf(schedule.definition.name),
        concurrency: 1,
      }));
  }

  /** What a takeover fires the due records of this process's schedules with. */
  get source(): TakeoverSource {
    return { flow: SCHEDULES_FLOW, recover: (runId) => this.fire(runId) };
  }

  private keep<S extends object>(
    flow: Flow<S>,
    schedule: LocalSchedule<S>,
  ): void {
    // Each flow has its own state type; firing only hands the flow its own input back.
    this.local.set(schedule.definition.name, {
      flow: flow as unknown as Flow<object>,
      schedule: schedule,
    });
  }

  /**
   * A due record: starts each tick's run that `catchUp` keeps (a run id already stored is a tick
   * another worker fired), then moves the record's lease to its next tick. A crash in between
   * leaves it due: the next look starts the same run ids, which the store refuses, and moves on.
   */
  private async fire(runId: string): Promise<RecoveryOutcome<unknown>> {
    const name = runId.slice(RECORD_PREFIX.length);
    const here = this.local.get(name);
    if (!here) return [runId, new FlowError(Messages.scheduleNotHere(name))];
    const record = await readRecord(this.store, this.ring, name);
    const now = Date.now();
    const due = record?.head.leaseExpiresAt;
    if (!record || record.head.status !== 'running' || due === undefined)
      return [runId, { fired: [] }];
    if (due > now) return [runId, { fired: [], nextAt: due }];
    const { state } = record;
    if (state.flow !== here.flow.name)
      return [
        runId,
        new FlowError(
          Messages.scheduleFlowMoved(name, state.flow, here.flow.name),
        ),
      ];
    // The stored definition rules (another deployment may have changed it since this one started).
    const clock = cronClock(name, state.expression, state.timezone);
    const { ticks, next } = dueTicks(clock, state, due, now);
    const fired: string[] = [];
    for (const t of ticks) fired.push(await this.startTick(here, state, t));
    if (next !== undefined)
      await this.store.renewLeases(SCHEDULER, next, [runId]);
    return [runId, { fired, ...at(next) }];
  }

  private async startTick(
    { flow, schedule }: { flow: Flow<object>; schedule: LocalSchedule<object> },
    state: RecordState,
    tick: number,
  ): Promise<string> {
    const runId = tickRunId(state.name, tick);
    const input = schedule.input(tick);
    const options = { runId, ctx: schedule.ctx };
    try {
      if (state.overlap === 'allow')
        await this.starter.start(flow, input, options);
      else
        await this.starter.enqueue(flow, input, {
          ...options,
          queue: queueOf(state.name),
          ...(state.overlap === 'skip' && { dedupeKey: state.name }),
        });
    } catch (error) {
      // The tick's run is stored already: another worker fired it.
      if (!(error instanceof CheckpointConflict)) throw error;
    }
    return runId;
  }
}

/** The queue a schedule's runs wait on when it does not allow overlap. */
export const queueOf = (name: string): string => `schedule:${name}`;

/**
 * The ticks a due record fires now, in order, as `catchUp` says, from `due` (the first tick not
 * fired) and never before `since`; and the tick it falls due at next. @internal (exported for tests)
 */
export function dueTicks(
  clock: CronClock,
  state: RecordState,
  due: number,
  now: number,
): { ticks: number[]; next: number | undefined } {
  const first = due >= state.since ? due : clock.next(state.since - 1);
  if (first === undefined || first > now) return { ticks: [], next: first };
  if (state.catchUp === 'all') {
    const ticks: number[] = [];
    let tick: number | undefined = first;
    while (tick !== undefined && tick <= now && ticks.length < TICKS_PER_LOOK) {
      ticks.push(tick);
      tick = clock.next(tick);
    }
    return { ticks, next: tick };
  }
  const last = clock.latest(now) ?? first;
  const onTime = state.catchUp === 'last' || now - last <= ON_TIME_MS;
  return { ticks: onTime ? [last] : [], next: clock.next(last) };
}
