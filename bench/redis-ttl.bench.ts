/**
 * The cost of `ttlSeconds` per write on a long run, on the Redis store alone:
 *
 *   node -r ./test/utils/ts-register.js bench/redis-ttl.bench.ts [--supersteps 500] [--ttl 3600]
 *
 * One run of N supersteps, each one call record and one checkpoint carrying another (the runner's
 * pattern), with ttlSeconds set. Reports the server's commands per write (from INFO commandstats:
 * EXPIRE/PERSIST are what a TTL costs) and the time per superstep at the start and at the end of the
 * run. With a TTL cost that grows with history, both grow with the superstep number.
 */
import { RedisCheckpointStore, type CallRecord } from 'agent-adapter';
import Redis from 'ioredis';
import { dropPrefix } from '../test/utils/redis-keys';
import { REDIS_URL, arg, median, suffix } from './lib/util';

const SUPERSTEPS = Number(arg('supersteps', '500'));
/** 0: no TTL, the layout's own cost. */
const TTL = Number(arg('ttl', '3600'));
const WINDOW = 50;

/** Server-wide command counts, and `<command>.usec` (server time spent in it). */
async function commandCounts(redis: Redis): Promise<Map<string, number>> {
  const info = await redis.info('commandstats');
  const counts = new Map<string, number>();
  for (const m of info.matchAll(/^cmdstat_([^:]+):calls=(\d+),usec=(\d+)/gm)) {
    counts.set(m[1]!, Number(m[2]));
    counts.set(`${m[1]!}.usec`, Number(m[3]));
  }
  return counts;
}

async function main(): Promise<void> {
  const prefix = `ttlbench${suffix()}`;
  const store = new RedisCheckpointStore(() => new Redis(REDIS_URL), {
    prefix,
    ttlSeconds: TTL,
  });
  const raw = new Redis(REDIS_URL);
  const runId = 'long-run';
  const call = (superstep: number, seq: number): CallRecord => ({
    runId,
    segment: 1,
    superstep,
    seq,
    sealed: `call ${superstep}/${seq}`.padEnd(300, '.'),
  });
  const sealed = (step: number) => `checkpoint ${step}`.padEnd(1500, '.');
  await store.save({
    runId,
    step: 0,
    flow: 'f',
    status: 'running',
    segment: 1,
    sealed: sealed(0),
  });
  const perSuperstep: number[] = [];
  const expiresAt: number[] = [];
  const before = await commandCounts(raw);
  let windowStart = before;
  for (let s = 0; s < SUPERSTEPS; s++) {
    const t0 = process.hrtime.bigint();
    await store.recordCall(runId, 1, [call(s, 1)]);
    await store.save(
      {
        runId,
        step: s + 1,
        flow: 'f',
        status: 'running',
        segment: 1,
        sealed: sealed(s + 1),
      },
      { calls: [call(s, 2)] },
    );
    perSuperstep.push(Number(process.hrtime.bigint() - t0) / 1e6);
    if (s === WINDOW - 1) {
      const now = await commandCounts(raw);
      expiresAt.push(
        (now.get('expire') ?? 0) - (windowStart.get('expire') ?? 0),
      );
    }
    if (s === SUPERSTEPS - WINDOW - 1) windowStart = await commandCounts(raw);
  }
  const after = await commandCounts(raw);
  expiresAt.push((after.get('expire') ?? 0) - (windowStart.get('expire') ?? 0));
  const writes = SUPERSTEPS * 2;
  const total = (name: string) =>
    (after.get(name) ?? 0) - (before.get(name) ?? 0);
  const keys = await raw.keys(`{${prefix}:${runId}}*`);
  const ttls = await Promise.all(keys.map((k) => raw.ttl(k)));
  console.log(
    JSON.stringify(
      {
        supersteps: SUPERSTEPS,
        ttlSeconds: TTL,
        writes,
        expirePerWrite: +(total('expire') / writes).toFixed(1),
        // Server time in the store's scripts (the client's timing includes the network and the VM's
        // noise; this is the steadier figure).
        serverUsPerWrite: +(
          (total('evalsha.usec') + total('eval.usec')) /
          writes
        ).toFixed(1),
        expirePerWriteFirst50Supersteps: +(
          expiresAt[0]! /
          (WINDOW * 2)
        ).toFixed(1),
        expirePerWriteLast50Supersteps: +(expiresAt[1]! / (WINDOW * 2)).toFixed(
          1,
        ),
        msPerSuperstepFirst50: +median(perSuperstep.slice(0, WINDOW)).toFixed(
          3,
        ),
        msPerSuperstepLast50: +median(perSuperstep.slice(-WINDOW)).toFixed(3),
        runKeys: keys.length,
        keysWithoutTtl: ttls.filter((t) => t < 0).length,
      },
      null,
      2,
    ),
  );
  await store.delete(runId);
  await dropPrefix(raw, prefix); // the tenant's index keys too (seq, runs): leave nothing behind
  await store.close();
  await raw.quit();
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
