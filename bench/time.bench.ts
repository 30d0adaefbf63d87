/**
 * `npm run bench -- --suite time [--stores postgres,redis] [--runs 100] [--sleep-ms 6000]
 * [--ticks 20] [--concurrency 4]`: durable time with real worker processes (the crash harness: test/crash/worker.ts,
 * the scenarios of test/crash/time-scenarios.ts), per store:
 *
 *   wake, restart   --runs runs sleep --sleep-ms on one worker; every worker (it and two others)
 *                   is SIGKILLed once they all sleep, and two fresh ones started: lateness of
 *                   each wake (the node's first call after the sleep, from the ledger, minus the
 *                   sealed wake time)
 *   wake, live      the same, only the sleeping worker killed; the two others were up all along
 *   tick, skip      a schedule every second on two workers for --ticks s (overlap 'skip': each
 *                   tick's run goes through the schedule's queue): lateness of each tick (its
 *                   run's charge, from the ledger, minus the tick)
 *   tick, allow     the same with overlap 'allow' (the firing worker starts the run itself)
 *
 * Workers look every 500 ms (wakes) / 200 ms (ticks), lease 1 s, takeover concurrency
 * --concurrency (4, the library's default). Figures: p50 / p99 / max in ms, in bench/out/time.json.
 */
import { loadavg } from 'node:os';
import { killAll } from '../test/utils/child-process';
import { quantile, sandboxes } from '../test/crash/harness';
import { isStoreKind, type StoreKind } from '../test/crash/stores';
import { scheduleFleet, sleepAcrossKills } from '../test/crash/time-scenarios';
import { writeResults, type Measure } from './lib/results';
import { arg } from './lib/util';

const stores = arg('stores', 'postgres,redis')
  .split(',')
  .map((s) => {
    if (!isStoreKind(s)) throw new Error(`--stores: unknown store "${s}"`);
    return s;
  });
const RUNS = Number(arg('runs', '100'));
const SLEEP_MS = Number(arg('sleep-ms', '6000'));
const TICKS = Number(arg('ticks', '20'));
/** Each worker's takeover concurrency (runs taken over at once). */
const CONCURRENCY = Number(arg('concurrency', '4'));

const measures: Measure[] = [];
const rows: string[][] = [];

function record(store: StoreKind, what: string, values: number[]): void {
  const p50 = quantile(values, 0.5);
  const p99 = quantile(values, 0.99);
  const max = Math.max(...values);
  rows.push([store, what, String(values.length), `${p50}`, `${p99}`, `${max}`]);
  measures.push(
    { measure: `${what}: lateness p50`, store, value: p50, unit: 'ms' },
    { measure: `${what}: lateness p99`, store, value: p99, unit: 'ms' },
  );
}

async function main(): Promise<void> {
  console.log(
    `time: ${RUNS} sleeping runs (${SLEEP_MS} ms), ${TICKS} ticks per schedule, takeover concurrency ${CONCURRENCY}, on ${stores.join(', ')}; load ${loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')}`,
  );
  for (const store of stores) {
    const boxes = sandboxes(store, 'benchtime');
    try {
      for (const restart of [true, false]) {
        const t = boxes.fresh();
        const f = await sleepAcrossKills(t, {
          runs: RUNS,
          sleepMs: SLEEP_MS,
          before: 2,
          after: restart ? 2 : 0,
          killAll: restart,
          everyMs: 500,
          concurrency: CONCURRENCY,
          graceMs: 30_000,
        });
        if (f.lateness.size < RUNS)
          console.warn(`${store}: only ${f.lateness.size} of ${RUNS} woke`);
        if (restart && f.upAt > Math.min(...f.wakeAt.values()))
          console.warn(
            `${store}: the restarted workers were up after the first wake time: raise --sleep-ms`,
          );
        record(
          store,
          restart ? 'wake, restart of every worker' : 'wake, live workers',
          [...f.lateness.values()],
        );
      }
      for (const overlap of ['skip', 'allow'] as const) {
        const t = boxes.fresh();
        const f = await scheduleFleet(store, t, {
          name: `bench-${overlap}`,
          workers: 2,
          seconds: TICKS,
          catchUp: 'last',
          overlap,
          concurrency: CONCURRENCY,
        });
        record(store, `tick, overlap '${overlap}'`, [...f.lateness.values()]);
      }
    } finally {
      await killAll();
      await boxes.cleanup();
    }
  }
  const head = ['store', 'what', 'n', 'p50 ms', 'p99 ms', 'max ms'];
  console.log(
    `\n| ${head.join(' | ')} |\n| ${head.map(() => '---').join(' | ')} |`,
  );
  for (const r of rows) console.log(`| ${r.join(' | ')} |`);
  console.log(
    `load at the end: ${loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')}`,
  );
  writeResults('time', measures);
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
