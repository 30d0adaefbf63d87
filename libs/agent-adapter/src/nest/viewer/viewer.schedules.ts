import { BadRequestException, Logger } from '@nestjs/common';
import type { CheckpointStore } from '../../exec/checkpoints/checkpoint-store';
import { listAll } from '../../exec/checkpoints/list-all';
import {
  RECORD_PREFIX,
  SCHEDULES_FLOW,
  infoOf,
  readRecord,
  type ScheduleInfo,
} from '../../flow/schedules/schedule-record';
import type { DurableFlowRunner } from '../durable-flow.runner';
import { NestMessages } from '../durable.messages';
import type { ViewerDecided } from './viewer.actions';

/** A stored schedule as the viewer lists it; one whose record does not verify is only named. */
export type ViewerSchedule =
  | ScheduleInfo
  | {
      name: string;
      /** Why its record does not verify: nothing else of it is shown, nor acted on. */
      corrupt: string;
    };

/** The schedule name rule (`runner.schedule`'s): a name the viewer acts on matches it. */
const NAME = /^[A-Za-z0-9_.-]{1,100}$/;

const logger = new Logger('DurableViewer');

/**
 * Every stored schedule (declared by any process), by name, with its next tick: the same list as
 * `FlowRunner.schedules.list()`, except that a record that does not verify is listed as corrupt
 * instead of failing the whole list (the viewer never trusts a row it cannot open).
 * @internal
 */
export async function viewerSchedules(
  runner: DurableFlowRunner,
  store: CheckpointStore,
): Promise<{ schedules: ViewerSchedule[] }> {
  const ring = runner.core.keyRing;
  const schedules: ViewerSchedule[] = [];
  for await (const head of listAll(store, { flow: SCHEDULES_FLOW })) {
    const name = head.runId.slice(RECORD_PREFIX.length);
    try {
      const record = await readRecord(store, ring, name);
      if (record) schedules.push(infoOf(record));
    } catch (e) {
      schedules.push({ name, corrupt: (e as Error).message });
    }
  }
  schedules.sort((a, b) => (a.name < b.name ? -1 : 1));
  return { schedules };
}

/**
 * Pauses or resumes a stored schedule through the module's scheduler (its compare-and-set), logged
 * with who did it. A name that breaks the schedule name rule is a 400, one that is not stored a
 * 404 (`CheckpointNotFound`, naming it): nothing is changed either way.
 * @internal
 */
export async function changeViewerSchedule(
  runner: DurableFlowRunner,
  name: string,
  to: 'pause' | 'resume',
  decided: ViewerDecided,
): Promise<ScheduleInfo> {
  if (!NAME.test(name))
    throw new BadRequestException(NestMessages.viewerScheduleName(name));
  const info = await runner.schedules[to](name);
  logger.log(
    `Schedule "${name}": ${to === 'pause' ? 'paused' : 'resumed'} in the viewer by ${decided.by ?? 'unnamed'}.`,
  );
  return info;
}
