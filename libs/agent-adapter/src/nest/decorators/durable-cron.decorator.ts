import { DURABLE_CRON_METADATA } from '../durable.constants';
import type { ScheduleOptions } from '../../flow/schedules/schedule.options';

/** One `@DurableCron` on a class, as stored. @internal */
export interface CronMetadata {
  expression: string;
  options: ScheduleOptions<object>;
}

/**
 * Runs the `@Flow` class's flow on a cron schedule, exactly once per tick however many replicas
 * run the application: the tick's run id is derived from the schedule and the tick, so a second
 * start is refused by the store (see `FlowRunner.schedule`). Stack it for several schedules (each
 * then needs its own `name`). A worker with the module's takeover on fires the ticks; pause,
 * resume and list through `FlowRunner.schedules`.
 *
 * @param expression 5 fields (minute hour day month weekday), or 6 with seconds first
 * @publicApi
 */
export function DurableCron<S extends object = object>(
  expression: string,
  options: ScheduleOptions<S> = {},
): ClassDecorator {
  return (target) => {
    const declared =
      (Reflect.getOwnMetadata(DURABLE_CRON_METADATA, target) as
        CronMetadata[] | undefined) ?? [];
    const entry: CronMetadata = {
      expression,
      options: options,
    };
    Reflect.defineMetadata(DURABLE_CRON_METADATA, [...declared, entry], target);
  };
}
