import type { Command } from 'commander';
import {
  changeSchedule,
  listSchedules,
  type ScheduleInfo,
} from '../flow/schedules/schedule-record';
import type { CommandContext } from './fork-command';
import { table, time } from './format';

/**
 * `schedules list`, `schedules pause <name>`, `schedules resume <name>`: the durable schedules
 * stored in the store, whichever process declared them. Pause and resume are a compare-and-set on
 * the schedule's record, seen by every worker at its next look.
 */
export function scheduleCommands(program: Command, c: CommandContext): void {
  const schedules = program
    .command('schedules')
    .description('list, pause and resume durable schedules')
    .helpCommand(false);

  schedules
    .command('list')
    .description('every stored schedule, with its next tick (needs the key)')
    .action(async (_o: unknown, cmd: Command) => {
      const listed = await listSchedules(c.openStore(cmd), c.key());
      c.out(cmd, listed, () =>
        listed.length === 0
          ? 'No schedules stored.\n'
          : table(
              [
                'NAME',
                'FLOW',
                'CRON',
                'ZONE',
                'OVERLAP',
                'CATCH-UP',
                'STATE',
                'NEXT',
              ],
              listed.map(row),
            ),
      );
    });

  for (const to of ['pause', 'resume'] as const) {
    schedules
      .command(to)
      .description(
        to === 'pause'
          ? 'stop every worker firing the schedule (its runs in flight go on)'
          : 'fire the schedule again from its next tick (ticks missed while paused never run)',
      )
      .argument('<name>', 'the schedule name')
      .action(async (name: string, _o: unknown, cmd: Command) => {
        const info = await changeSchedule(c.openStore(cmd), c.key(), name, to);
        c.out(cmd, info, () =>
          info.paused
            ? `Paused schedule ${name}.\n`
            : `Resumed schedule ${name}: next tick ${time(info.nextAt)}.\n`,
        );
      });
  }
}

function row(s: ScheduleInfo): string[] {
  return [
    s.name,
    s.flow,
    s.expression,
    s.timezone ?? 'UTC',
    s.overlap,
    s.catchUp,
    s.paused ? 'paused' : 'active',
    s.paused ? '-' : time(s.nextAt),
  ];
}
