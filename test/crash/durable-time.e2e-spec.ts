/**
 * Durable time with real processes and real SIGKILL (worker.ts takeover mode: --start nap|late,
 * --schedule; the scenarios in time-scenarios.ts, shared with `npm run bench -- --suite time`):
 *
 *  1. A run sleeping 3 s survives the SIGKILL of its worker (killed as soon as the run reports
 *     sleeping) and is finished by another, already-running worker 3 to 5 s after it began to
 *     sleep; its tool before the sleep ran once.
 *  2. A schedule every second on two worker processes for 10 s: 10 runs (one more or one fewer at
 *     the edges, or a second one fewer where a loaded machine stalled both workers), never two for
 *     one tick (distinct run ids within the window, and each tick's charge once in the ledger).
 *  3. A paused approval with a 2 s deadline (onTimeout 'deny'), its pausing worker killed: another
 *     worker's clock denies it at the deadline; the tool never ran.
 *  4. Heavier versions, a small sample here, the full size with CRASH_FULL=1: three workers, a
 *     schedule every second (catchUp 'all'), workers SIGKILLed and restarted during it, one
 *     outage of all three: one run for each tick of the window, none twice (30 ticks in full);
 *     runs sleeping across a restart of every worker wake within 1 s of their time (100 in full;
 *     p50/p99 of the lateness printed); a deadline racing a person's decision (200 in full): one
 *     decision each time. The race runs in this process, against the store, with two runners on
 *     two connections (a person's resume, the clock's recover): a process per race is too slow.
 *
 * Postgres and Redis; SQLite too with CRASH_FULL=1. The tests of a file run five at a time
 * (`it.concurrent`, jest's maxConcurrency): they mostly wait for time to pass.
 */
import {
  Executor,
  FlowRunner,
  ToolRegistry,
  type CheckpointStore,
} from 'agent-adapter';
import { KEY } from 'agent-adapter/testing/fixtures';
import { bodyOf } from '../../tools/crash/fuzz-flow';
import { killAll } from '../utils/child-process';
import { describeWithService } from '../utils/services';
import { printed, quantile, sandboxes, sleep } from './harness';
import {
  lookerOn,
  scheduleFleet,
  sleepAcrossKills,
  ticksBetween,
} from './time-scenarios';
import { openStore, serviceOf, type StoreKind } from './stores';
import { timeFlows } from './time-flows';
import type { LedgerLine, Outcome } from './worker';

const FULL = process.env.CRASH_FULL === '1';
const SCHEDULE_TICKS = FULL ? 30 : 6;
const SLEEPERS = FULL ? 100 : 12;
const RACES = FULL ? 200 : 20;
/** The sleep across the restart: longer than a kill and two worker boots on a loaded machine. */
const SLEEP_MS = 6_000;

const begins = (ledger: LedgerLine[], tool: string) =>
  ledger.filter((l) => l.tool === tool && l.phase === 'begin');

/** Per `show` argument, how many times `tool` began. */
function beganPer(ledger: LedgerLine[], tool: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const l of begins(ledger, tool)) {
    const show = (l.args as { show: string }).show;
    out.set(show, (out.get(show) ?? 0) + 1);
  }
  return out;
}

const ms = (values: Iterable<number>) => {
  const v = [...values];
  return `min ${Math.min(...v)} ms, p50 ${quantile(v, 0.5)} ms, p99 ${quantile(v, 0.99)} ms, max ${Math.max(...v)} ms`;
};

function timeSuite(kind: StoreKind): void {
  const boxes = sandboxes(kind, 'time');
  afterAll(async () => {
    await killAll();
    await boxes.cleanup();
  });

  it.concurrent(
    'a run sleeping 3 s, its worker SIGKILLed once it sleeps: another worker, already up, finishes it 3-5 s after it began to sleep; the charge ran once',
    async () => {
      const t = boxes.fresh();
      const f = await sleepAcrossKills(t, {
        runs: 1,
        sleepMs: 3_000,
        before: 1,
        after: 0,
        killAll: false,
        everyMs: 500,
      });
      const id = `${t.runId}-0`;
      const wakeAt = f.wakeAt.get(id)!;
      const late = f.lateness.get(id);
      expect(late).toBeDefined();
      // Woken by the live worker (the sleeper was dead by then), after its time, within 2 s of it.
      const woke = f.ledger.find(
        (l) => l.tool === 'email_tickets' && l.phase === 'begin',
      )!;
      expect(woke.pid).toBe(f.wakers[0]);
      expect(wakeAt).toBeLessThan(woke.at!);
      expect(f.killedAt).toBeLessThan(wakeAt);
      const slept = woke.at! - (wakeAt - 3_000);
      expect(slept).toBeGreaterThanOrEqual(3_000);
      expect(slept).toBeLessThan(5_000);
      expect(begins(f.ledger, 'charge_card')).toHaveLength(1);
      expect(begins(f.ledger, 'email_tickets')).toHaveLength(1);
      const looker = await lookerOn(kind, t);
      try {
        const run = await looker.runner.get(timeFlows().nap, id);
        expect(run.status).toBe('done');
        expect(run.state.note).toBe(`sent ${id}`);
      } finally {
        await looker.close();
      }
    },
    60_000,
  );

  it.concurrent(
    'a schedule every second on two worker processes for 10 s: 10 runs (+1/-2), never two for one tick',
    async () => {
      const t = boxes.fresh();
      const name = `beat-${t.runId}`;
      const f = await scheduleFleet(kind, t, {
        name,
        workers: 2,
        seconds: 10,
        catchUp: 'last',
        overlap: 'skip',
      });
      const expected = ticksBetween(f.since, f.pausedAt).length;
      expect(f.unfinished).toEqual([]);
      // One more than the window holds would be a tick fired twice or outside it. One fewer: the
      // tick just before the pause. One more fewer is allowed for a loaded CI machine: with
      // catch-up 'last', a second in which neither worker got to look (both stalled) fires only
      // its last tick (seen once: 2 fewer on a 2-core VM running the suites side by side).
      expect(f.ticks.length).toBeLessThanOrEqual(expected + 1);
      expect(f.ticks.length).toBeGreaterThanOrEqual(expected - 2);
      expect(f.ticks.length).toBeGreaterThanOrEqual(8);
      expect(f.ticks.length).toBeLessThanOrEqual(11);
      // Run ids are one per tick (a store key each): the ticks they name are distinct and whole
      // seconds in the schedule's time.
      expect(new Set(f.ticks).size).toBe(f.ticks.length);
      for (const tick of f.ticks) {
        expect(tick % 1000).toBe(0);
        expect(tick).toBeGreaterThanOrEqual(f.since);
        expect(tick).toBeLessThanOrEqual(f.pausedAt);
      }
      // Each tick's charge ran once, and only for the ticks whose runs are stored.
      const charged = beganPer(f.ledger, 'charge_card');
      expect([...charged.keys()].sort()).toEqual(
        f.ticks.map((x) => new Date(x).toISOString()),
      );
      expect([...charged.values()].every((n) => n === 1)).toBe(true);
      console.log(
        `durable time (${kind}): ${f.ticks.length} ticks on 2 workers (${new Set(f.ledger.map((l) => l.pid)).size} fired some); tick lateness ${ms(f.lateness.values())}`,
      );
    },
    60_000,
  );

  it.concurrent(
    "a paused approval with a 2 s deadline (deny), its worker SIGKILLed: another worker's clock denies it at the deadline; the tool never ran",
    async () => {
      const t = boxes.fresh();
      const args = ['takeover', '--lease-ms', '1000', '--every-ms', '500'];
      const live = t.start(args);
      await live.waitForLine(/^STARTED$/);
      const pauser = t.start([
        ...args,
        '--start',
        'late',
        '--run-prefix',
        t.runId,
        '--deadline-ms',
        '2000',
      ]);
      const [line] = await printed(pauser, /^(PAUSED|RESULT) /, 1, 30_000);
      await pauser.kill();
      const killedAt = Date.now();
      const m = /^PAUSED (\S+) (\d+)$/.exec(line!);
      expect(m).not.toBeNull();
      const [, id, at] = m!;
      const deadline = Number(at);
      expect(killedAt).toBeLessThan(deadline);
      const [took] = await printed(live, /^TOOK /, 1, 10_000);
      await live.kill();
      const outcome = JSON.parse(took!.replace(/^TOOK \S+ /, '')) as Outcome & {
        at: number;
      };
      expect(took!.startsWith(`TOOK ${id} `)).toBe(true);
      expect(outcome).toMatchObject({ status: 'done', note: 'denied' });
      expect(outcome.at).toBeGreaterThanOrEqual(deadline);
      expect(outcome.at - deadline).toBeLessThan(1_000);
      expect(begins(t.ledger(), 'refund_late')).toHaveLength(0);
      // Sealed as the clock's decision.
      const looker = await lookerOn(kind, t);
      try {
        const decided = (await looker.store.history(id!)).checkpoints
          .map((c) => bodyOf(c.sealed))
          .filter((b) => b.reason === 'resume');
        expect(decided).toHaveLength(1);
        expect(decided[0]!.decisions).toEqual([
          expect.objectContaining({ approved: false, timedOut: true }),
        ]);
      } finally {
        await looker.close();
      }
    },
    60_000,
  );

  it.concurrent(
    `three workers, a schedule every second (catchUp 'all'), workers SIGKILLed and restarted, all three down once: one run for each of ${SCHEDULE_TICKS}+ ticks, none twice`,
    async () => {
      const t = boxes.fresh();
      const name = `beat-${t.runId}`;
      const seconds = SCHEDULE_TICKS + 1;
      // One worker at a time killed and restarted every few seconds; once, all three down for 2.5 s.
      const kills = FULL
        ? [
            { at: 3_000, which: [0], downMs: 500 },
            { at: 7_000, which: [1], downMs: 1_500 },
            { at: 11_000, which: [0, 1, 2], downMs: 2_500 },
            { at: 17_000, which: [2], downMs: 300 },
            { at: 21_000, which: [0], downMs: 1_000 },
            { at: 25_000, which: [1, 2], downMs: 800 },
          ]
        : [
            { at: 1_200, which: [0], downMs: 300 },
            { at: 2_500, which: [0, 1, 2], downMs: 2_200 },
          ];
      const f = await scheduleFleet(kind, t, {
        name,
        workers: 3,
        seconds,
        catchUp: 'all',
        overlap: 'allow',
        kills,
      });
      const window = ticksBetween(f.since, f.pausedAt - 500);
      expect(window.length).toBeGreaterThanOrEqual(SCHEDULE_TICKS);
      // Every tick of the window has its run, once; nothing outside the schedule's time.
      expect(f.ticks.filter((x) => x <= window.at(-1)!)).toEqual(window);
      expect(new Set(f.ticks).size).toBe(f.ticks.length);
      for (const tick of f.ticks) expect(tick).toBeLessThanOrEqual(f.pausedAt);
      // No tick's charge twice. A run cut inside its charge is in doubt, and stays unfinished.
      const charged = beganPer(f.ledger, 'charge_card');
      for (const [tick, n] of charged) expect(`${tick} ${n}`).toBe(`${tick} 1`);
      for (const tick of f.ticks) {
        const iso = new Date(tick).toISOString();
        if (!f.unfinished.includes(`${name}@${iso}`))
          expect(charged.get(iso)).toBe(1);
      }
      console.log(
        `durable time (${kind}): ${f.ticks.length} ticks, ${window.length} in the window, ${f.kills} kills, ${f.unfinished.length} unfinished; tick lateness ${ms(f.lateness.values())}`,
      );
    },
    (SCHEDULE_TICKS + 60) * 1_000,
  );

  it.concurrent(
    `${SLEEPERS} runs sleeping across a SIGKILL of every worker wake within 1 s of their time`,
    async () => {
      const t = boxes.fresh();
      const f = await sleepAcrossKills(t, {
        runs: SLEEPERS,
        sleepMs: SLEEP_MS,
        before: 2,
        after: 2,
        // Long enough that a loaded sleeper keeps its runs until they sleep (a 1 s lease, rounded
        // down to a quarter, let the fleet take one over once in CI: fenced, as it must be). A
        // sleeping run is due at its wake time, whatever the lease.
        leaseMs: 3_000,
        killAll: true,
        everyMs: 500,
      });
      // Every worker was dead, and the new ones up, before the first wake time.
      const first = Math.min(...f.wakeAt.values());
      expect(f.killedAt).toBeLessThan(first);
      if (f.upAt > first)
        throw new Error(
          `the restarted workers were up ${f.upAt - first} ms after the first wake time (a loaded machine: boots took ${f.upAt - f.killedAt} ms); raise the sleep`,
        );
      expect(f.lateness.size).toBe(SLEEPERS);
      const late = [...f.lateness.values()];
      console.log(
        `durable time (${kind}): ${SLEEPERS} sleeping runs across a restart: wake lateness ${ms(late)}`,
      );
      for (const x of late) expect(x).toBeGreaterThanOrEqual(0);
      expect(Math.max(...late)).toBeLessThan(1_000);
      // Every call once: the charges before the sleep, the mails after it.
      const charged = beganPer(f.ledger, 'charge_card');
      const mailed = beganPer(f.ledger, 'email_tickets');
      expect(charged.size).toBe(SLEEPERS);
      expect(mailed.size).toBe(SLEEPERS);
      expect(
        [...charged.values(), ...mailed.values()].every((n) => n === 1),
      ).toBe(true);
      // Only the workers started after the kill woke them.
      for (const l of begins(f.ledger, 'email_tickets'))
        expect(f.wakers).toContain(l.pid);
    },
    90_000,
  );

  it(`a deadline racing a person's decision ${RACES} times (in this process, two runners on two connections): one decision each time`, async () => {
    const t = boxes.fresh();
    const person = await openStore(kind, t.env);
    const clock = await openStore(kind, t.env);
    const ran: string[] = [];
    const registry = new ToolRegistry().register(
      'refund_late',
      (a: { show: string }) => {
        ran.push(a.show);
        return `refunded ${a.show}`;
      },
      { approval: { timeoutMs: 40, onTimeout: 'deny' } },
    );
    const runnerOn = (store: CheckpointStore, workerId: string) =>
      new FlowRunner(new Executor(registry), {
        checkpoints: store,
        checkpointKey: KEY,
        workerId,
      });
    const a = runnerOn(person.store, 'person');
    const b = runnerOn(clock.store, 'clock');
    const flow = timeFlows().late;
    let personWon = 0;
    let clockWon = 0;
    try {
      for (let i = 0; i < RACES; i++) {
        const id = `${t.runId}-${i}`;
        const paused = await a.run(flow, { show: id }, { runId: id });
        expect(paused.status).toBe('paused');
        // Around the deadline: some races start before it (the clock finds nothing due yet).
        await sleep(
          Math.max(0, paused.pending!.deadline! - Date.now() + (i % 7) - 3),
        );
        const [p, c] = await Promise.allSettled([
          a.resume(flow, id, { approved: true, by: 'ann' }),
          b.recover(flow, id),
        ]);
        // Whatever was left paused (the clock came before the deadline), the clock decides now.
        if ((await person.store.head(id))?.status === 'paused') {
          await sleep(Math.max(0, paused.pending!.deadline! - Date.now() + 5));
          await b.recover(flow, id);
        }
        const decisions = (await person.store.history(id)).checkpoints
          .map((x) => bodyOf(x.sealed))
          .filter((x) => x.reason === 'resume');
        expect(decisions).toHaveLength(1);
        const [decided] = decisions[0]!.decisions as Array<{
          approved: boolean;
          timedOut?: boolean;
          by?: string;
        }>;
        const refunds = ran.filter((x) => x === id).length;
        if (decided!.timedOut) {
          clockWon++;
          expect(decided!.approved).toBe(false);
          expect(p.status).toBe('rejected');
          expect(refunds).toBe(0);
        } else {
          personWon++;
          expect(decided).toMatchObject({ approved: true, by: 'ann' });
          expect(refunds).toBe(1);
          if (c.status === 'fulfilled') expect(c.value.status).not.toBe('done');
        }
        expect((await person.store.head(id))?.status).toBe('done');
      }
    } finally {
      a.close();
      b.close();
      await person.close();
      await clock.close();
    }
    console.log(
      `durable time (${kind}): ${RACES} races of a deadline and a person: the person won ${personWon}, the clock ${clockWon}`,
    );
    expect(personWon + clockWon).toBe(RACES);
  }, 120_000);
}

// SQLite (one host's processes on one file) with the full size only: the sample's budget is spent.
const KINDS: StoreKind[] = FULL
  ? ['postgres', 'redis', 'sqlite']
  : ['postgres', 'redis'];
for (const kind of KINDS) {
  const service = serviceOf(kind);
  if (service)
    describeWithService(service, `durable time (${kind})`, () =>
      timeSuite(kind),
    );
  else describe(`durable time (${kind})`, () => timeSuite(kind));
}
