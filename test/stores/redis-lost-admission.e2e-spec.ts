/**
 * KNOWN BUG, not fixed yet (found in the twenty-fifth session of issue 20; see its note): a run its
 * queue admitted, whose worker has not claimed it yet (its hash still at step 0), and whose
 * admission the tenant slot's master lost in a failover, is admitted again after the healing.
 *
 * An admission is one script in the tenant slot `{P}` (the admitter's lease lives there too); the
 * run's hash learns of it only from the worker's claim, the run's first save. The healing
 * (redis.heal.ts) counts again the queued runs past step 0 and takes one at step 0 for a run still
 * waiting, so a run between its admission and its claim is admitted a second time while its first
 * worker drives it: two workers in one run (the later claim fences the other mid-superstep) and a
 * queue over its limits for that moment. `npm test`'s chaos sample on the Redis Cluster
 * (test/crash/chaos.e2e-spec.ts) fails on it now and then: "V3 4 runs in a call at once (limit 3)".
 *
 * `it.failing`: this passes while the bug is there, and fails once it is fixed; then make it an
 * ordinary `it`.
 */
import Redis from 'ioredis';
import { FlowRunner, RedisCheckpointStore } from 'agent-adapter';
import { KEY, executorFor, ticketsFlow } from 'agent-adapter/testing/fixtures';
import { dropPrefix } from '../utils/redis-keys';
import { REDIS_URL, describeWithService, suiteId } from '../utils/services';

describeWithService('redis', 'Redis: an admission the tenant slot lost', () => {
  let admin: Redis;
  let store: RedisCheckpointStore;
  let prefix: string;
  /** What a second worker is admitted after the failover, while worker-a is about to claim x-1. */
  let second: string[];

  // The whole story runs here, so a failure on the way fails the suite; the \`it.failing\` below
  // holds only the assertion the bug breaks.
  beforeAll(async () => {
    admin = new Redis(REDIS_URL);
    prefix = suiteId('lost-admission');
    store = new RedisCheckpointStore(() => new Redis(REDIS_URL), { prefix });
    const P = `{${prefix}}`;
    const w = new FlowRunner(executorFor([], 'w'), {
      checkpoints: store,
      checkpointKey: KEY,
    });
    try {
      await w.enqueue(
        ticketsFlow(),
        { show: 'X', seats: 1 },
        { queue: 'lq', runId: 'x-1', key: 'k' },
      );
      await store.listDue({ now: Date.now() }); // the tenant slot is stamped whole
      // The tenant slot as a replica that missed the admission has it.
      const before = new Map<string, Buffer>();
      for (const k of await admin.keys(`${P}*`))
        before.set(k, await admin.dumpBuffer(k));
      const now = Date.now() + 1000;
      const admit = (owner: string, at: number) =>
        store.admit({
          queue: 'lq',
          now: at,
          limit: 10,
          perKey: 1,
          owner,
          leaseExpiresAt: now + 60_000,
        });
      const first = await admit('worker-a', now);
      if (first.map((h) => h.runId).join() !== 'x-1')
        throw new Error(`x-1 was not admitted first: ${JSON.stringify(first)}`);
      // The failover: the promoted replica serves the slot as it was before the admission.
      for (const k of await admin.keys(`${P}*`))
        if (!before.has(k)) await admin.del(k);
      for (const [k, dump] of before)
        await admin.restore(k, 0, dump, 'REPLACE');
      await admin.set(`${P}:indexed`, 'f'.repeat(40));
      // worker-a is about to claim x-1 under its lease; another worker admits from the queue.
      second = (await admit('worker-b', now + 10)).map((h) => h.runId);
    } finally {
      w.close();
    }
  });

  afterAll(async () => {
    await store.close();
    await dropPrefix(admin, prefix);
    await admin.quit();
  });

  it.failing(
    'a run admitted but not yet claimed is not admitted again after a failover lost its admission',
    () => {
      expect(second).toEqual([]);
    },
  );
});
