import { DurableSetupError } from '../../errors';
import { Messages } from '../../errors/messages';
import { described } from '../../errors/messages/text';
import type { RunIdentity } from '../../exec/durable/records';
import { cronClock, type CronClock } from './cron';
import type {
  ScheduleCatchUp,
  ScheduleDefinition,
  ScheduleOverlap,
} from './schedule-record';

/** For `FlowRunner.schedule` and `@DurableCron`. `S`: the flow's state. @publicApi */
export interface ScheduleOptions<S = object> {
  /**
   * The schedule's name, unique in the store: its record is `schedule:<name>` and each tick's run
   * is `<name>@<tick, ISO 8601>`. @default the flow's name
   */
  name?: string;
  /** The IANA time zone the expression is read in ("Europe/Berlin"). @default UTC */
  timezone?: string;
  /**
   * A tick while the schedule's previous run is unfinished: `skip` it, `queue` it (it starts once
   * the run before it ends), or `allow` both at once. @default 'skip'
   */
  overlap?: ScheduleOverlap;
  /**
   * Ticks missed while no worker was up: `none` (only a tick less than a minute late runs),
   * `last` (the latest missed tick runs, once), `all` (each runs, in order). @default 'last'
   */
  catchUp?: ScheduleCatchUp;
  /** Each tick's run input: fixed, or made from the tick's time (the same on every worker). */
  input?: Partial<S> | ((tick: Date) => Partial<S>);
  /**
   * Who the runs act for. With a `principal`, the takeovers that drive them need `ctxFor` to give
   * it (as for any run acting with one). @default none
   */
  ctx?: RunIdentity;
}

/** A declared schedule, checked, as this process fires it. */
export interface LocalSchedule<S> {
  definition: ScheduleDefinition;
  clock: CronClock;
  input: (tick: number) => Partial<S>;
  ctx: RunIdentity;
}

const NAME = /^[A-Za-z0-9_.-]{1,100}$/;
const OVERLAPS: readonly unknown[] = ['skip', 'queue', 'allow'];
const CATCH_UPS: readonly unknown[] = ['none', 'last', 'all'];

/** The one check of a schedule's options, with their defaults: refused with the option named. */
export function scheduleSettings<S>(
  flow: string,
  expression: unknown,
  options: ScheduleOptions<S> = {},
): LocalSchedule<S> {
  const name = options.name ?? flow;
  if (typeof name !== 'string' || !NAME.test(name))
    throw new DurableSetupError(Messages.scheduleName(name));
  const bad = (option: string, rule: string, value: unknown) =>
    new DurableSetupError(
      Messages.scheduleOption(name, option, rule, described(value)),
    );
  if (typeof expression !== 'string' || expression.trim() === '')
    throw bad('the expression', 'a cron expression', expression);
  const { timezone, overlap = 'skip', catchUp = 'last', input, ctx } = options;
  if (timezone !== undefined && typeof timezone !== 'string')
    throw bad('timezone', 'an IANA time zone name', timezone);
  if (!OVERLAPS.includes(overlap))
    throw bad('overlap', "'skip', 'queue' or 'allow'", overlap);
  if (!CATCH_UPS.includes(catchUp))
    throw bad('catchUp', "'none', 'last' or 'all'", catchUp);
  if (
    input !== undefined &&
    typeof input !== 'function' &&
    (typeof input !== 'object' || input === null || Array.isArray(input))
  )
    throw bad('input', 'an object or a function (tick) => object', input);
  if (ctx !== undefined && (typeof ctx !== 'object' || ctx === null))
    throw bad('ctx', 'an object { user?, thread?, principal? }', ctx);
  const clock = cronClock(name, expression, timezone);
  return {
    definition: {
      name,
      flow,
      expression,
      ...(timezone !== undefined && { timezone }),
      overlap,
      catchUp,
    },
    clock,
    input: (tick) =>
      typeof input === 'function' ? input(new Date(tick)) : (input ?? {}),
    ctx: ctx ?? {},
  };
}
