/**
 * `npm run bench -- --suite replicas [--runs 200]`: what the Redis store's `replicas` option
 * (WAIT after every run write) costs, on a local Redis Cluster (3 masters, 1 replica each) started
 * for the bench: runs of one superstep with one tool call (a save, a `started`, a save with the
 * `done`), one at a time, without WAIT and with { count: 1, timeoutMs: 1000 }; per-run latency
 * p50/p99. Sequential on purpose: WAIT's cost is a round trip to the replica per write.
 */
import {
  Executor,
  Flow,
  FlowRunner,
  RedisCheckpointStore,
  ToolRegistry,
  type RedisCheckpointStoreOptions,
} from 'agent-adapter';
import { KEY } from 'agent-adapter/testing/fixtures';
import { startRedisCluster } from '../test/utils/redis-cluster';
import { arg } from './lib/util';

const runs = Number(arg('runs', '200'));

function quantile(sorted: number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}

async function main(): Promise<void> {
  const cluster = await startRedisCluster();
  try {
    const registry = new ToolRegistry().register('charge', () => 'ch');
    const flow = new Flow('bench')
      .node('pay', async (_s, ctx) => ({ c: await ctx.call('charge') }))
      .end('pay');
    const variants: Array<[string, RedisCheckpointStoreOptions]> = [
      ['async', {}],
      ['WAIT 1', { replicas: { count: 1, timeoutMs: 1000 } }],
    ];
    // Twice, alternating, so a warm-up or a neighbour's load does not favour one.
    for (const round of [1, 2])
      for (const [name, options] of variants) {
        const store = new RedisCheckpointStore(() => cluster.connect(), {
          prefix: `bench${round}${name.replace(/\W/g, '')}`,
          ...options,
        });
        const runner = new FlowRunner(new Executor(registry), {
          checkpoints: store,
          checkpointKey: KEY,
        });
        for (let i = 0; i < 20; i++) await runner.run(flow, {}); // warm-up
        const times: number[] = [];
        const t0 = performance.now();
        for (let i = 0; i < runs; i++) {
          const t = performance.now();
          await runner.run(flow, {});
          times.push(performance.now() - t);
        }
        const total = performance.now() - t0;
        times.sort((a, b) => a - b);
        console.log(
          `round ${round} ${name.padEnd(7)} ${runs} runs: p50 ${quantile(times, 0.5).toFixed(2)} ms, p99 ${quantile(times, 0.99).toFixed(2)} ms, ${((runs / total) * 1000).toFixed(0)} runs/s`,
        );
        runner.close();
        await store.close();
      }
  } finally {
    await cluster.stop();
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
