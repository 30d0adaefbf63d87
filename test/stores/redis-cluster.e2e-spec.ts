/**
 * The Redis store on a real Redis Cluster (three masters, three replicas, started for this suite):
 * the whole conformance suite through ioredis `Cluster`, whose commands follow MOVED and ASK, so
 * every script's keys must sit in one slot, as the layout's hash tags promise.
 */
import calculateSlot from 'cluster-key-slot';
import type { Cluster } from 'ioredis';
import { RedisCheckpointStore, type CheckpointStore } from 'agent-adapter';
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
  },
);
