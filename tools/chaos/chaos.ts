/**
 * The chaos test (issue 18 item 5; what it does and checks: chaos-run.ts):
 *
 *   npm run chaos -- --store postgres|redis|redis-cluster [--runs 500] [--workers 4] [--seed 1]
 *     [--concurrency 8] [--per-key 2] [--keys 20] [--lease-ms 2000] [--every-ms 100]
 *     [--kill-every-ms 3000] [--restart-after-ms 1500] [--failover] [--tool-delay-ms 20]
 *     [--timeout-ms 600000]
 *
 * Prints one JSON report; exits 1 on any violation.
 */
import { parseArgs } from 'node:util';
import { isBackendKind } from '../../test/crash/stores';
import { chaos, percentile } from './chaos-run';

const { values } = parseArgs({
  options: {
    store: { type: 'string', default: 'postgres' },
    runs: { type: 'string', default: '500' },
    workers: { type: 'string', default: '4' },
    seed: { type: 'string', default: '1' },
    concurrency: { type: 'string', default: '8' },
    'per-key': { type: 'string', default: '2' },
    keys: { type: 'string', default: '20' },
    'lease-ms': { type: 'string', default: '2000' },
    'every-ms': { type: 'string', default: '100' },
    'kill-every-ms': { type: 'string', default: '3000' },
    'restart-after-ms': { type: 'string', default: '1500' },
    failover: { type: 'boolean', default: false },
    'tool-delay-ms': { type: 'string', default: '20' },
    'timeout-ms': { type: 'string', default: '600000' },
  },
});

async function main(): Promise<number> {
  const store = values.store;
  if (!isBackendKind(store) || store === 'sqlite')
    throw new Error('--store must be postgres, redis or redis-cluster');
  const n = (name: keyof typeof values) => Number(values[name]);
  const report = await chaos({
    store,
    runs: n('runs'),
    workers: n('workers'),
    seed: n('seed'),
    concurrency: n('concurrency'),
    perKey: n('per-key'),
    keys: n('keys'),
    leaseMs: n('lease-ms'),
    everyMs: n('every-ms'),
    killEveryMs: n('kill-every-ms'),
    restartAfterMs: n('restart-after-ms'),
    failover: values.failover,
    toolDelayMs: n('tool-delay-ms'),
    timeoutMs: n('timeout-ms'),
    log: (line) => process.stderr.write(`${line}\n`),
  });
  const { takeoverMs, ...rest } = report;
  process.stdout.write(
    `${JSON.stringify(
      {
        ...rest,
        takeovers: takeoverMs.length,
        takeoverP50Ms: percentile(takeoverMs, 50),
        takeoverP99Ms: percentile(takeoverMs, 99),
      },
      null,
      2,
    )}\n`,
  );
  return report.violations.length === 0 ? 0 : 1;
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    console.error(error);
    process.exit(2);
  },
);
