/**
 * `npm run chaos`'s short fixed-seed sample (issue 18 item 5): worker processes take queued runs
 * while workers are SIGKILLed and replaced (and, on the Redis Cluster, a master fails over); the
 * ledger shows every run ended, no side effect twice, the queue's limits held and each takeover
 * within the lease plus 2 s. The full runs (500 runs, 4 workers) are in bench/RESULTS.md.
 */
import { chaos, type ChaosOptions } from '../../tools/chaos/chaos-run';
import { describeWithRedisCluster } from '../utils/redis-cluster';
import { describeWithService } from '../utils/services';

const SAMPLE: Omit<ChaosOptions, 'store' | 'failover'> = {
  runs: 30,
  workers: 3,
  seed: 11,
  concurrency: 3,
  perKey: 1,
  keys: 6,
  leaseMs: 1_000,
  everyMs: 100,
  killEveryMs: 1_200,
  restartAfterMs: 800,
  toolDelayMs: 40,
  timeoutMs: 120_000,
};

async function sample(
  store: ChaosOptions['store'],
  extra: Partial<ChaosOptions> = {},
) {
  const report = await chaos({
    ...SAMPLE,
    store,
    failover: false,
    // CHAOS_LOG=1 prints the driver's kills, failover and store errors.
    ...(process.env.CHAOS_LOG && {
      log: (line: string) => process.stderr.write(`chaos: ${line}\n`),
    }),
    ...extra,
  });
  expect(report.violations).toEqual([]);
  expect(report.ended).toBe(SAMPLE.runs);
  expect(report.kills).toBeGreaterThan(0);
  // The limits bound: reached, never passed.
  expect(report.mostAtOnce).toBeLessThanOrEqual(SAMPLE.concurrency);
  expect(report.mostPerKey).toBe(SAMPLE.perKey);
  return report;
}

describeWithService('postgres', 'chaos sample (postgres)', () => {
  it('30 queued runs over three workers with kills: no violation', async () => {
    await sample('postgres');
  }, 150_000);
});

describeWithService('redis', 'chaos sample (redis)', () => {
  it('30 queued runs over three workers with kills: no violation', async () => {
    await sample('redis');
  }, 150_000);
});

describeWithRedisCluster('chaos sample (Redis Cluster)', (cluster) => {
  it('30 queued runs over three workers with kills and a master failover: no violation', async () => {
    const report = await sample('redis-cluster', {
      failover: true,
      cluster: cluster(),
    });
    expect(report.failoverAtMs).toBeDefined();
  }, 180_000);
});
