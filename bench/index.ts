/**
 * `npm run bench -- [--suite superstep,throughput,recover,queue] [suite flags]`: runs each benchmark
 * suite in its own process (so one suite's heap and JIT state never colour another's figures;
 * the recovery suite measures peak RSS), passing the flags through. Each suite writes
 * bench/out/<suite>.json; `npm run bench:compare` prints them against the targets.
 *
 *   superstep   one superstep per backend vs three raw writes; 4 parallel calls; state size;
 *               sealing (--supersteps, --rounds, --stores, --cpu)
 *   throughput  concurrent runs and worker processes on Postgres and Redis
 *   recover     recoverEach over thousands of unfinished runs per store: time against a floor,
 *               peak RSS and live heap against N (--stores, --runs, --concurrency, --api)
 *   queue       queued runs taken by 1, 2 and 4 worker processes: runs/s and p99 against raw
 *               statements doing the same (--stores, --runs, --processes, --concurrency)
 *   time        durable time with worker processes: wake lateness of sleeping runs across a
 *               SIGKILL of every worker, and of a per-second schedule's ticks, p50/p99
 *               (--stores, --runs, --sleep-ms, --ticks)
 *   replicas    the Redis store's `replicas` option (WAIT) against none, on a local Redis
 *               Cluster: one-call runs, p50/p99 (--runs)
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { arg } from './lib/util';

const SUITES = [
  'superstep',
  'throughput',
  'recover',
  'queue',
  'time',
  'replicas',
];
const wanted = arg(
  'suite',
  process.argv.includes('--cpu') ? 'superstep' : SUITES.join(','),
)
  .split(',')
  .filter(Boolean);
const unknown = wanted.filter((s) => !SUITES.includes(s));
if (unknown.length) {
  console.error(
    `unknown bench suite ${unknown.map((s) => `"${s}"`).join(', ')} (one of ${SUITES.join(', ')})`,
  );
  process.exit(2);
}
let failed = 0;
for (const suite of wanted) {
  const file = join(__dirname, `${suite}.bench.ts`);
  if (!existsSync(file)) {
    console.error(`bench suite "${suite}": ${file} does not exist yet`);
    failed++;
    continue;
  }
  console.log(`\n=== ${suite} ===\n`);
  const child = spawnSync(
    process.execPath,
    [
      '-r',
      join(__dirname, '..', 'test', 'utils', 'ts-register.js'),
      file,
      ...process.argv.slice(2),
    ],
    { stdio: 'inherit' },
  );
  if (child.status !== 0) failed++;
}
process.exit(failed ? 1 : 0);
