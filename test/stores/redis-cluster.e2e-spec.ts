/**
 * The Redis store on a real Redis Cluster (three masters, three replicas, started for this suite):
 * the whole conformance suite through ioredis `Cluster`, whose commands follow MOVED and ASK, so
 * every script's keys must sit in one slot, as the layout's hash tags promise.
 */
import calculateSlot from 'cluster-key-slot';
import { Redis, type Cluster } from 'ioredis';
import {
  FailoverNeedsDecision,
  RedisCheckpointStore,
  type CheckpointStore,
} from 'agent-adapter';
import { describeCheckpointStoreConformance } from 'agent-adapter/testing';
import { RedisKeys } from 'agent-adapter/exec/checkpoints/redis/redis.layout';
import { redisRaw } from './redis.fixtures';
import { suiteId } from '../utils/services';
import { describeWithRedisCluster } from '../utils/redis-cluster';

describeWithRedisCluster(
  'RedisCheckpointStore on a Redis Cluster',
  (cluster) => {
    const stores: RedisCheckpointStore[] = [];
    let admin: Cluster | undefined;
    const client = () => (admin ??= cluster().connect());

    afterAll(async () => {
      await Promise.all(stores.map((s) => s.close()));
      await admin?.quit();
    });

    function open(): RedisCheckpointStore {
      const store = new RedisCheckpointStore(() => cluster().connect(), {
        prefix: suiteId('aac'),
      });
      stores.push(store);
      return store;
    }
    const tag = (store: CheckpointStore, runId: string) =>
      `{${(store as RedisCheckpointStore).prefix}:${runId}}`;

    it('the cluster has three masters, and one prefix spreads its runs over them', async () => {
      expect(await cluster().masters()).toHaveLength(3);
      const keys = new RedisKeys('aac');
      const slots = new Set(
        Array.from({ length: 64 }, (_, i) =>
          calculateSlot(keys.runHash(`r${i}`)),
        ),
      );
      // Runs land on many slots (so on every master), the index keys of a prefix on one.
      expect(slots.size).toBeGreaterThan(32);
      expect(
        new Set(
          [keys.runs, keys.born, keys.seq, keys.unfinished('f')].map(
            calculateSlot,
          ),
        ).size,
      ).toBe(1);
    });

    describeCheckpointStoreConformance({
      name: 'redis-cluster',
      make: async () => open(),
      raw: redisRaw(client, tag),
    });

    // Last: it leaves the cluster with one master replaced.
    it('a master SIGKILLed: its replica is promoted and the store goes on, on every slot, with what was replicated (its runs once accepted)', async () => {
      const store = open();
      const ids = Array.from({ length: 40 }, (_, i) => `fail-${i}`);
      const cp = (runId: string, step: number) => ({
        runId,
        step,
        flow: 'f',
        status: 'running' as const,
        segment: 1,
        sealed: `cp-${runId}-${step}`,
      });
      for (const id of ids) await store.save(cp(id, 0), { head: `h0-${id}` });
      // Every write on a replica before the kill (asynchronous replication loses what is not).
      const masters = await cluster().masters();
      expect(masters).toHaveLength(3);
      for (const port of masters) {
        const node = new Redis({ port, host: '127.0.0.1' });
        expect(await node.call('WAIT', '1', '5000')).toBe(1);
        node.disconnect();
      }
      const victim = masters[0]!;
      await cluster().kill(victim);
      // The others notice after the node timeout (1.5 s), then its replica is promoted.
      let now: number[] = [];
      for (let i = 0; i < 300 && now.length < 3; i++) {
        await new Promise((r) => setTimeout(r, 100));
        now = await cluster().masters();
      }
      expect(now).toHaveLength(3);
      expect(now).not.toContain(victim);
      await cluster().healthy(30_000);

      // Runs last written on the replaced master: the store cannot know that nothing was lost
      // (redis.failover.ts), so their writes are refused until an operator accepts what it holds.
      // The read-only check names exactly the runs a write refuses.
      const flagged: string[] = [];
      for (const id of ids) if (await store.failover(id)) flagged.push(id);
      const refused: string[] = [];
      for (const id of ids) {
        const save = { head: `h1-${id}`, expectCalls: 0 };
        await store.save(cp(id, 1), save).catch((error: unknown) => {
          expect(error).toBeInstanceOf(FailoverNeedsDecision);
          refused.push(id);
        });
      }
      expect(refused.length).toBeGreaterThan(0);
      expect(refused.length).toBeLessThan(ids.length);
      expect(flagged).toEqual(refused);
      for (const id of refused)
        await store.save(cp(id, 1), {
          head: `h1-${id}`,
          expectCalls: 0,
          acceptLostWrites: true,
        });
      for (const id of ids) expect(await store.failover(id)).toBeUndefined();
      const heads = await Promise.all(ids.map((id) => store.head(id)));
      expect(heads.map((h) => h?.step)).toEqual(ids.map(() => 1));
      expect(
        (await store.listDue({ now: Date.now(), flows: ['f'] })).length,
      ).toBe(ids.length);
    }, 60_000);
  },
);
