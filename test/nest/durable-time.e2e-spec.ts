/**
 * Durable time in the Nest module: a `@Node` method sleeps (`ctx.sleep`) and another application's
 * takeover wakes the run on time; `@DurableCron`: two applications on one SQLite file declare the
 * same schedule, its ticks run once each, over both; `FlowRunner.schedules` lists, pauses and
 * resumes it; a bad declaration fails the bootstrap, naming the class and the option.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SQLiteCheckpointStore, type NodeContext } from 'agent-adapter';
import {
  DurableCron,
  DurableModule,
  Flow,
  FlowRegistry,
  FlowRunner,
  Node,
} from 'agent-adapter/nest';
import { KEY } from './fixtures/tickets.fixtures';
import { Apps } from './utils';

interface Beat {
  tick?: string;
  seen?: boolean;
}

/** Node runs per tick, over every application of the test. */
const seen = new Map<string, number>();

@DurableCron('* * * * * *', {
  name: 'heartbeat',
  input: (tick) => ({ tick: tick.toISOString() }),
})
@Flow('heartbeat-flow')
class Heartbeat {
  @Node({ start: true, end: true })
  beat(state: Beat): Partial<Beat> {
    seen.set(state.tick!, (seen.get(state.tick!) ?? 0) + 1);
    return { seen: true };
  }
}

@Flow('nap')
class Nap {
  @Node({ start: true, next: 'wake' })
  async doze(_s: Beat, ctx: NodeContext): Promise<Partial<Beat>> {
    await ctx.sleep(400);
    return { seen: true };
  }

  @Node({ end: true })
  wake(): Partial<Beat> {
    return { tick: 'awake' };
  }
}

@DurableCron('not a cron')
@Flow('broken-cron')
class BrokenCron {
  @Node({ start: true, end: true })
  beat(): Partial<Beat> {
    return {};
  }
}

@DurableCron('* * * * *')
class NotAFlow {}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('@DurableCron in the Nest module (e2e, SQLite)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'aa-nest-cron-'));
  const apps = new Apps();
  const stores: SQLiteCheckpointStore[] = [];
  let n = 0;
  afterEach(async () => {
    await apps.closeAll();
    while (stores.length) await stores.pop()!.close();
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  const boot = (path: string, providers: unknown[]) => {
    const store = new SQLiteCheckpointStore(path);
    stores.push(store);
    return apps.boot(
      [DurableModule.forRoot({ store, key: KEY, takeover: { everyMs: 100 } })],
      { providers: providers as never[] },
    );
  };

  it('a @Node method sleeps: the run is sleeping, its worker closes, the other application wakes it on time', async () => {
    const path = join(dir, `runs-${++n}.db`);
    const [a, b] = [await boot(path, [Nap]), await boot(path, [Nap])];
    const slept = await a.get(FlowRunner).start(Nap, {});
    expect(slept.status).toBe('sleeping');
    await a.close();
    const runner = b.get(FlowRunner);
    let done = await runner.get(slept.runId);
    for (let i = 0; i < 100 && done.status !== 'done'; i++) {
      await sleep(20);
      done = await runner.get(slept.runId);
    }
    expect(done).toMatchObject({
      status: 'done',
      state: { seen: true, tick: 'awake' },
    });
    expect(Date.now()).toBeGreaterThanOrEqual(slept.wakeAt!);
  });

  it('two applications declare it: each tick runs once, over both; list, pause and resume', async () => {
    const path = join(dir, `runs-${++n}.db`);
    const [a, b] = [
      await boot(path, [Heartbeat]),
      await boot(path, [Heartbeat]),
    ];
    expect(a.get(FlowRegistry).get(Heartbeat)?.schedules).toHaveLength(1);
    seen.clear();
    await sleep(3_300);
    expect(seen.size).toBeGreaterThanOrEqual(2);
    expect([...seen.values()].every((count) => count === 1)).toBe(true);

    const runner = b.get(FlowRunner);
    const [listed] = await runner.schedules.list();
    expect(listed).toMatchObject({
      name: 'heartbeat',
      flow: 'heartbeat-flow',
      expression: '* * * * * *',
      paused: false,
    });
    await a.get(FlowRunner).schedules.pause('heartbeat');
    await sleep(300);
    const before = seen.size;
    await sleep(1_500);
    expect(seen.size).toBe(before);
    await runner.schedules.resume('heartbeat');
    await sleep(1_500);
    expect(seen.size).toBeGreaterThan(before);
    expect([...seen.values()].every((count) => count === 1)).toBe(true);
  });

  it('a bad expression, and @DurableCron on a class that is not a @Flow, fail the bootstrap by name', async () => {
    const path = join(dir, `runs-${++n}.db`);
    await expect(boot(path, [BrokenCron])).rejects.toThrow(
      /Schedule "broken-cron": the cron expression "not a cron" is invalid/,
    );
    await expect(boot(path, [NotAFlow])).rejects.toThrow(
      '@DurableCron on NotAFlow, which is not a @Flow: put it on the @Flow class whose runs it starts.',
    );
  });
});
