import { DurableSetupError } from '../../errors';
import { Messages } from '../../errors/messages';
import { requirePackage } from '../../peers/optional-packages';

/** The part of croner's `Cron` a schedule uses (croner is an optional peer, loaded on first use). */
interface CronLike {
  nextRun(after?: Date): Date | null;
  previousRuns(n: number, before?: Date): Date[];
}
type CronConstructor = new (
  pattern: string,
  options: { paused: true; timezone?: string },
) => CronLike;

/** A cron expression's ticks, in a time zone (IANA name; default UTC). */
export interface CronClock {
  /** The first tick strictly after `after` (epoch ms), or undefined when there is none. */
  next(after: number): number | undefined;
  /** The last tick at or before `at` (epoch ms), or undefined when there is none. */
  latest(at: number): number | undefined;
}

/**
 * Parses `expression` once (5 fields, or 6 with seconds first; croner's syntax) and checks the time
 * zone by computing a first tick, so a bad schedule fails where it is declared, naming it.
 */
export function cronClock(
  schedule: string,
  expression: string,
  timezone: string | undefined,
): CronClock {
  const { Cron } = requirePackage<{ Cron: CronConstructor }>(
    'croner',
    'schedules',
    `Schedule "${schedule}"`,
  );
  let cron: CronLike;
  try {
    cron = new Cron(expression, {
      paused: true,
      ...(timezone !== undefined && { timezone }),
    });
    cron.nextRun(new Date());
  } catch (error) {
    throw new DurableSetupError(
      Messages.badCron(schedule, expression, timezone, String(error)),
    );
  }
  return {
    next: (after) => cron.nextRun(new Date(after))?.getTime(),
    latest: (at) => cron.previousRuns(1, new Date(at + 1))[0]?.getTime(),
  };
}
