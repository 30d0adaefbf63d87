/**
 * Durable schedules (`runner.schedule`): one run per tick however many workers declare it, ticks
 * missed while no worker was up handled by `catchUp`, overlap, pause and resume, and a list with
 * each schedule's next tick. Real time, per-second schedules, on the memory store and SQLite.
 */
import {
  DurableSetupError,
  Executor,
  Flow,
  FlowRunner,
  ToolRegistry,
  type CheckpointStore,
  type ScheduleOptions,
  type Takeover,
} from 'agent-adapter';
import {
  KEY,
  memoryAndSqlite,
  sleep,
  until,
} from '../../../../../test/utils/specs';
import { cronClock } from './cron';
import { dueTicks } from './scheduler';

interface Tick {
  at?: string;
  slept?: boolean;
}

/** A flow whose runs record their tick; with `holdMs`, each run sleeps that long first. */
function tickFlow(name: string, holdMs = 0) {
  return new Flow<Tick>(name)
    .node('tick', async (_s, ctx) => {
      if (holdMs > 0) await ctx.sleep(holdMs);
      return { slept: holdMs > 0 };
    })
    .end('tick');
}

function worker(store: CheckpointStore, name: string) {
  return new FlowRunner(new Executor(new ToolRegistry()), {
    checkpoints: store,
    checkpointKey: KEY,
    workerId: name,
    leaseMs: 2_000,
  });
}

/** The tick runs stored for schedule `name`, by id. */
async function tickRuns(store: CheckpointStore, flow: string, name: string) {
  const { runs } = await store.list({ flow, limit: 1000 });
  return runs
    .map((h) => h.runId)
    .filter((id) => id.startsWith(`${name}@`))
    .sort();
}

describe.each(memoryAndSqlite('schedules'))('schedules on %s', (_n, fresh) => {
  let store: CheckpointStore;
  fresh((s) => (store = s));
  const takeovers: Takeover[] = [];
  const runners: FlowRunner[] = [];
  afterEach(async () => {
    await Promise.all(takeovers.splice(0).map((t) => t.stop()));
    for (const r of runners.splice(0)) r.close();
  });
  function fleetOf<S extends object>(
    n: number,
    flow: Flow<S>,
    expression: string,
    options: ScheduleOptions<S> = {},
  ) {
    return Promise.all(
      Array.from({ length: n }, async (_, i) => {
        const w = worker(store, `w${i}`);
        runners.push(w);
        const info = await w.schedule(flow, expression, options);
        takeovers.push(w.takeOver([flow], { everyMs: 200 }));
        return info;
      }),
    );
  }

  it('three workers, a tick every second: one run per tick, named after the schedule and the tick', async () => {
    const flow = tickFlow('beat');
    const start = Date.now();
    const [info] = await fleetOf(3, flow, '* * * * * *', {
      input: (tick) => ({ at: tick.toISOString() }),
    });
    expect(info).toMatchObject({
      name: 'beat',
      flow: 'beat',
      expression: '* * * * * *',
      overlap: 'skip',
      catchUp: 'last',
      paused: false,
    });
    expect(info?.nextAt).toBeGreaterThan(start);
    await sleep(3_600);
    const ids = await tickRuns(store, 'beat', 'beat');
    // Ticks between the declaration and now: 3 or 4, each once.
    expect(ids.length).toBeGreaterThanOrEqual(3);
    expect(ids.length).toBeLessThanOrEqual(4);
    expect(new Set(ids).size).toBe(ids.length);
    for (const id of ids) {
      const tick = Date.parse(id.slice('beat@'.length));
      expect(tick % 1000).toBe(0);
      const run = await runners[0]!.get(flow, id);
      expect(run.status).toBe('done');
      expect(run.state.at).toBe(new Date(tick).toISOString());
    }
    // One record however many declared it.
    const listed = await runners[1]!.schedules.list();
    expect(listed.map((s) => s.name)).toEqual(['beat']);
  });

  it('ticks missed while no worker was up: all, the last, or none (only an on-time one)', async () => {
    const flows = {
      all: tickFlow('missed-all'),
      last: tickFlow('missed-last'),
      none: tickFlow('missed-none'),
    };
    const w = worker(store, 'boot');
    runners.push(w);
    // 'queue' for 'all': with 'skip', a catch-up tick is skipped while the one before is queued.
    for (const [catchUp, flow] of Object.entries(flows))
      await w.schedule(flow, '* * * * * *', {
        catchUp: catchUp as 'all' | 'last' | 'none',
        overlap: catchUp === 'all' ? 'queue' : 'skip',
      });
    // No takeover for 2.5 s: the ticks pass with nobody to fire them.
    await sleep(2_500);
    const looked = Date.now();
    const t = w.takeOver(Object.values(flows), { everyMs: 5_000 });
    takeovers.push(t);
    await t.lookNow();
    // Only the ticks that were due at the look (a later one may have fired on time since).
    const firedAtLook = async (name: string) =>
      (await tickRuns(store, name, name)).filter(
        (id) => Date.parse(id.slice(name.length + 1)) <= looked,
      );
    // The look starts the firing and goes on; under load it can take a while. The wait ends once
    // 'all' has fired up to the tick 'last' fired; the counts below are still the test's to check.
    let all: string[] = [];
    let last: string[] = [];
    let none: string[] = [];
    const read = async () => {
      all = await firedAtLook('missed-all');
      last = await firedAtLook('missed-last');
      none = await firedAtLook('missed-none');
    };
    await until(async () => {
      await read();
      return (
        all.length >= 2 &&
        none.length > 0 &&
        last.length > 0 &&
        all.at(-1) === last.at(-1)!.replace('missed-last', 'missed-all')
      );
    }, 5_000);
    // A tick fired late would land after the wait ends: look once more after a pause.
    await sleep(300);
    await read();
    expect(all.length).toBeGreaterThanOrEqual(2);
    expect(last).toHaveLength(1);
    // `none` drops ticks more than a minute late; these are seconds late, so the last one runs.
    expect(none).toHaveLength(1);
    expect(last[0]).toBe(all.at(-1)!.replace('missed-all', 'missed-last'));
  });

  it('pause stops every worker firing it; resume fires from the next tick, the paused ones never', async () => {
    const flow = tickFlow('pausable');
    await fleetOf(2, flow, '* * * * * *');
    await sleep(1_300);
    const paused = await runners[0]!.schedules.pause('pausable');
    expect(paused).toMatchObject({ paused: true });
    expect(paused.nextAt).toBeUndefined();
    const before = await tickRuns(store, 'pausable', 'pausable');
    expect(before.length).toBeGreaterThanOrEqual(1);
    await sleep(2_200);
    expect(await tickRuns(store, 'pausable', 'pausable')).toEqual(before);
    const listed = await runners[1]!.schedules.list();
    expect(listed[0]).toMatchObject({ name: 'pausable', paused: true });
    const resumed = await runners[1]!.schedules.resume('pausable');
    expect(resumed.paused).toBe(false);
    await sleep(1_400);
    const after = await tickRuns(store, 'pausable', 'pausable');
    expect(after.length).toBeGreaterThan(before.length);
    // Nothing between the pause and the resume ran.
    const resumedAt = resumed.since;
    const pausedAt = paused.since;
    for (const id of after.filter((x) => !before.includes(x))) {
      const tick = Date.parse(id.slice('pausable@'.length));
      expect(tick < pausedAt || tick >= resumedAt).toBe(true);
    }
  });

  it("overlap: 'skip' never starts a tick while the last run is unfinished; 'allow' does", async () => {
    const skip = tickFlow('slow-skip', 1_500);
    const allow = tickFlow('slow-allow', 1_500);
    await fleetOf(2, skip, '* * * * * *', { overlap: 'skip' });
    await fleetOf(1, allow, '* * * * * *', { overlap: 'allow' });
    // Sampled every 100 ms: the most runs of each flow unfinished at once.
    const most = { skip: 0, allow: 0 };
    for (const end = Date.now() + 3_500; Date.now() < end; await sleep(100)) {
      most.skip = Math.max(
        most.skip,
        (await store.listUnfinished('slow-skip')).length,
      );
      most.allow = Math.max(
        most.allow,
        (await store.listUnfinished('slow-allow')).length,
      );
    }
    expect(most.skip).toBe(1);
    expect(most.allow).toBeGreaterThanOrEqual(2);
    // 'skip' dropped the ticks it met with a run unfinished: fewer runs than 'allow'.
    expect(
      (await tickRuns(store, 'slow-skip', 'slow-skip')).length,
    ).toBeLessThan((await tickRuns(store, 'slow-allow', 'slow-allow')).length);
  });

  it('a changed definition is stored and counts from now; bad declarations are refused, naming the option', async () => {
    const flow = tickFlow('changing');
    const w = worker(store, 'w');
    runners.push(w);
    const first = await w.schedule(flow, '0 0 * * *');
    const again = await w.schedule(flow, '0 0 * * *');
    expect(again.since).toBe(first.since);
    const changed = await w.schedule(flow, '0 12 * * *', {
      timezone: 'Europe/Berlin',
    });
    expect(changed).toMatchObject({
      expression: '0 12 * * *',
      timezone: 'Europe/Berlin',
    });
    expect(new Date(changed.nextAt!).getUTCMinutes()).toBe(0);
    expect([10, 11]).toContain(new Date(changed.nextAt!).getUTCHours());
    const bad = (expression: string, options: object) =>
      w.schedule(flow, expression, options);
    await expect(bad('61 * * * *', {})).rejects.toThrow(
      /Schedule "changing": the cron expression "61 \* \* \* \*" is invalid/,
    );
    await expect(bad('* * * * *', { timezone: 'Nope/Zone' })).rejects.toThrow(
      /time zone "Nope\/Zone"/,
    );
    await expect(bad('* * * * *', { overlap: 'maybe' })).rejects.toThrow(
      /overlap must be 'skip', 'queue' or 'allow'/,
    );
    await expect(bad('* * * * *', { catchUp: 'some' })).rejects.toThrow(
      DurableSetupError,
    );
    await expect(bad('* * * * *', { name: 'a b' })).rejects.toThrow(
      /Schedule name "a b" is invalid/,
    );
    await expect(w.schedules.pause('nope')).rejects.toThrow(
      /No schedule "nope"/,
    );
    // Nothing stored was changed by the refused declarations.
    const [stored] = await w.schedules.list();
    expect(stored).toMatchObject({ expression: '0 12 * * *' });
  });
});

describe('dueTicks (which missed ticks fire)', () => {
  const clock = cronClock('t', '0 * * * * *', undefined); // every minute
  const min = 60_000;
  const t0 = Date.parse('2026-01-01T00:00:00Z');
  const state = (catchUp: 'none' | 'last' | 'all', since = t0) => ({
    name: 't',
    flow: 'f',
    expression: '0 * * * * *',
    overlap: 'skip' as const,
    catchUp,
    since,
  });

  it('after a 5-hour outage of an hourly schedule: all five, the last, or none (90 s late)', () => {
    const hourly = cronClock('h', '0 0 * * * *', undefined);
    const hour = 60 * min;
    const now = t0 + 4 * hour + 90_000;
    const every = [0, 1, 2, 3, 4].map((h) => t0 + h * hour);
    expect(dueTicks(hourly, state('all'), t0, now)).toEqual({
      ticks: every,
      next: t0 + 5 * hour,
    });
    expect(dueTicks(hourly, state('last'), t0, now)).toEqual({
      ticks: [t0 + 4 * hour],
      next: t0 + 5 * hour,
    });
    expect(dueTicks(hourly, state('none'), t0, now)).toEqual({
      ticks: [],
      next: t0 + 5 * hour,
    });
    // On time (seconds late): 'none' fires it.
    expect(dueTicks(clock, state('none'), t0, t0 + 5_000).ticks).toEqual([t0]);
  });

  it('never before `since`, nothing before the due tick comes, and at most 100 per look', () => {
    const since = t0 + 2 * min + 1;
    expect(dueTicks(clock, state('all', since), t0, t0 + 4 * min)).toEqual({
      ticks: [t0 + 3 * min, t0 + 4 * min],
      next: t0 + 5 * min,
    });
    expect(dueTicks(clock, state('all'), t0 + min, t0 + 30_000)).toEqual({
      ticks: [],
      next: t0 + min,
    });
    const long = dueTicks(clock, state('all'), t0, t0 + 1_000 * min);
    expect(long.ticks).toHaveLength(100);
    expect(long.next).toBe(t0 + 100 * min);
  });
});
