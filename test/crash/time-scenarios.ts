/**
 * Durable time with real processes: the scenarios test/crash/durable-time.e2e-spec.ts asserts on
 * and `npm run bench -- --suite time` reports figures of (one harness: worker.ts's takeover mode
 * with --start and --schedule, see its header).
 *
 *  - sleepAcrossKills: runs start sleeping on one worker, which is SIGKILLed once they all sleep
 *    (with the workers already up, if asked); other workers wake them. Lateness of a wake: the
 *    mail's ledger `begin` (the first thing the node does after its sleep) minus the sealed wake
 *    time.
 *  - scheduleFleet: workers fire a per-second schedule (killed and restarted as a plan says) until
 *    the test pauses it; then the runs, per tick, and each tick's charge in the ledger. Lateness of
 *    a tick: its charge's ledger `begin` minus the tick.
 */
import {
  Executor,
  FlowRunner,
  ToolRegistry,
  type CheckpointStore,
} from 'agent-adapter';
import { KEY } from 'agent-adapter/testing/fixtures';
import { printed, sleep, type Sandbox, type Worker } from './harness';
import { openStore, type StoreKind } from './stores';
import type { LedgerLine } from './worker';

/** A store and a runner of the test's own on a sandbox (to look, pause a schedule, read a run). */
export async function lookerOn(kind: StoreKind, t: Sandbox) {
  const opened = await openStore(kind, t.env);
  const runner = new FlowRunner(new Executor(new ToolRegistry()), {
    checkpoints: opened.store,
    checkpointKey: KEY,
  });
  return {
    store: opened.store,
    runner,
    async close() {
      runner.close();
      await opened.close();
    },
  };
}

export interface SleepScenario {
  runs: number;
  sleepMs: number;
  /** Workers up before the runs start (killed with the sleeper if `killAll`). */
  before: number;
  /** Workers started right after the kill. */
  after: number;
  /** Kill every worker up, not only the one the runs slept on. */
  killAll: boolean;
  leaseMs?: number;
  everyMs?: number;
  /** Each worker's takeover `concurrency`. @default the library's (4) */
  concurrency?: number;
  /** How long to wait for every wake past the last wake time. @default 15 s */
  graceMs?: number;
}

export interface SleepFigures {
  /** Run id → sealed wake time (epoch ms). */
  wakeAt: Map<string, number>;
  /** Epoch ms of the SIGKILL. */
  killedAt: number;
  /** Epoch ms when the workers started after the kill were all up. */
  upAt: number;
  /** Run id → lateness of its wake (ms). */
  lateness: Map<string, number>;
  ledger: LedgerLine[];
  /** Pids of the workers up after the kill. */
  wakers: number[];
}

function takeoverArgs(o: {
  leaseMs?: number;
  everyMs?: number;
  concurrency?: number;
}): string[] {
  return [
    'takeover',
    '--lease-ms',
    String(o.leaseMs ?? 1_000),
    '--every-ms',
    String(o.everyMs ?? 200),
    ...(o.concurrency !== undefined
      ? ['--takeover-concurrency', String(o.concurrency)]
      : []),
  ];
}

export async function sleepAcrossKills(
  t: Sandbox,
  o: SleepScenario,
): Promise<SleepFigures> {
  const fleet = (n: number) =>
    Array.from({ length: n }, () => t.start(takeoverArgs(o)));
  const up = fleet(o.before);
  for (const w of up) await w.waitForLine(/^STARTED$/);
  const sleeper = t.start([
    ...takeoverArgs(o),
    '--start',
    'nap',
    '--count',
    String(o.runs),
    '--run-prefix',
    t.runId,
    '--sleep-ms',
    String(o.sleepMs),
  ]);
  const lines = await printed(
    sleeper,
    /^(SLEEPING|RESULT) /,
    o.runs,
    30_000 + o.runs * 200,
  );
  // Killed as soon as the last run reports sleeping.
  await Promise.all([sleeper, ...(o.killAll ? up : [])].map((w) => w.kill()));
  const killedAt = Date.now();
  const wakeAt = new Map<string, number>();
  for (const line of lines) {
    const m = /^SLEEPING (\S+) (\d+)$/.exec(line);
    if (!m) throw new Error(`a run did not sleep: ${line}`);
    wakeAt.set(m[1]!, Number(m[2]));
  }
  const restarted = fleet(o.after);
  const wakers = [...(o.killAll ? [] : up), ...restarted];
  for (const w of restarted) await w.waitForLine(/^STARTED$/, 60_000);
  const upAt = Date.now();
  const last = Math.max(...wakeAt.values());
  const lateness = new Map<string, number>();
  try {
    for (const until = last + (o.graceMs ?? 15_000); ; await sleep(100)) {
      for (const l of t.ledger())
        if (l.tool === 'email_tickets' && l.phase === 'begin') {
          const id = (l.args as { show: string }).show;
          if (!lateness.has(id)) lateness.set(id, l.at! - wakeAt.get(id)!);
        }
      // Every mail began, and every run ended (a worker's `TOOK <id>`).
      const took = new Set(
        wakers.flatMap((w) =>
          w.lines
            .filter((l) => l.startsWith('TOOK '))
            .map((l) => l.split(' ')[1]),
        ),
      );
      const ended = [...wakeAt.keys()].every((id) => took.has(id));
      if ((lateness.size >= o.runs && ended) || Date.now() > until) break;
    }
  } finally {
    await Promise.all(wakers.map((w) => w.kill()));
  }
  return {
    wakeAt,
    killedAt,
    upAt,
    lateness,
    ledger: t.ledger(),
    wakers: wakers.map((w) => w.child.pid!),
  };
}

export interface ScheduleScenario {
  name: string;
  workers: number;
  /** How long the schedule fires before the test pauses it. */
  seconds: number;
  catchUp: 'none' | 'last' | 'all';
  overlap: 'skip' | 'queue' | 'allow';
  /**
   * Kills during it: at each `at` (ms after the fleet is up), SIGKILL the workers `which` names
   * (indexes) and start them again `downMs` later.
   */
  kills?: Array<{ at: number; which: number[]; downMs: number }>;
  leaseMs?: number;
  everyMs?: number;
  concurrency?: number;
}

export interface ScheduleFigures {
  /** When the schedule was stored (its first tick is the first whole second from then). */
  since: number;
  pausedAt: number;
  /** The tick of each run stored for the schedule (epoch ms), sorted; one per run id. */
  ticks: number[];
  /** Runs not finished when the scenario stopped waiting for them. */
  unfinished: string[];
  ledger: LedgerLine[];
  /** Tick (ISO) → lateness of its charge's first ledger `begin` (ms). */
  lateness: Map<string, number>;
  kills: number;
}

export async function scheduleFleet(
  kind: StoreKind,
  t: Sandbox,
  o: ScheduleScenario,
): Promise<ScheduleFigures> {
  const args = [
    ...takeoverArgs(o),
    '--schedule',
    '* * * * * *',
    '--schedule-name',
    o.name,
    '--catch-up',
    o.catchUp,
    '--overlap',
    o.overlap,
  ];
  const workers: Worker[] = Array.from({ length: o.workers }, () =>
    t.start(args),
  );
  const looker = await lookerOn(kind, t);
  let kills = 0;
  try {
    for (const w of workers) await w.waitForLine(/^SCHEDULED$/, 60_000);
    const [info] = (await looker.runner.schedules.list()).filter(
      (s) => s.name === o.name,
    );
    if (!info) throw new Error(`schedule ${o.name} not stored`);
    const upAt = Date.now();
    let lastUp = upAt;
    for (const k of o.kills ?? []) {
      await sleep(upAt + k.at - Date.now());
      await Promise.all(k.which.map((i) => workers[i]!.kill()));
      kills += k.which.length;
      await sleep(k.downMs);
      for (const i of k.which) workers[i] = t.start(args);
      for (const i of k.which)
        await workers[i]!.waitForLine(/^SCHEDULED$/, 60_000);
      lastUp = Date.now();
    }
    // Paused after the time asked for, and not before the last restarted workers had two
    // seconds to fire what they missed.
    await sleep(
      Math.max(info.since + o.seconds * 1_000, lastUp + 2_000) - Date.now(),
    );
    const paused = await looker.runner.schedules.pause(o.name);
    const pausedAt = paused.since;
    // The runs fired before the pause end (a queued one once admitted, a killed worker's after
    // its lease): each stored tick's run, by its head.
    let ids: string[] = [];
    let unfinished: string[] = [];
    for (const until = Date.now() + 4 * (o.leaseMs ?? 1_000) + 5_000; ;) {
      ids = await runsOf(looker.store, o.name);
      const heads = await Promise.all(ids.map((id) => looker.store.head(id)));
      unfinished = ids.filter(
        (_, i) => heads[i]?.status !== 'done' && heads[i]?.status !== 'failed',
      );
      if (!unfinished.length || Date.now() > until) break;
      await sleep(100);
    }
    const ticks = ids
      .map((id) => Date.parse(id.slice(o.name.length + 1)))
      .sort((a, b) => a - b);
    const ledger = t.ledger();
    const lateness = new Map<string, number>();
    for (const l of ledger)
      if (l.tool === 'charge_card' && l.phase === 'begin') {
        const tick = (l.args as { show: string }).show;
        if (!lateness.has(tick)) lateness.set(tick, l.at! - Date.parse(tick));
      }
    return {
      since: info.since,
      pausedAt,
      ticks,
      unfinished,
      ledger,
      lateness,
      kills,
    };
  } finally {
    await Promise.all(workers.map((w) => w.kill()));
    await looker.close();
  }
}

/** The run ids stored for schedule `name` (flow `beat`). */
async function runsOf(store: CheckpointStore, name: string): Promise<string[]> {
  const ids: string[] = [];
  let cursor: string | undefined;
  do {
    const page = await store.list({
      flow: 'beat',
      limit: 500,
      ...(cursor !== undefined && { before: cursor }),
    });
    ids.push(...page.runs.map((h) => h.runId));
    cursor = page.next;
  } while (cursor !== undefined);
  return ids.filter((id) => id.startsWith(`${name}@`));
}

/** Whole-second ticks from the first at or after `from` to the last at or before `to`. */
export function ticksBetween(from: number, to: number): number[] {
  const out: number[] = [];
  for (let t = Math.ceil(from / 1000) * 1000; t <= to; t += 1000) out.push(t);
  return out;
}
