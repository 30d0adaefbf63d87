/**
 * The Redis store through a plain ioredis client on a cluster-enabled server that holds every slot
 * (a one-node cluster, started for this suite). On one server the store makes a run's index entry
 * inside its step-0 save script, whose keys are in two slots; such a server refuses that
 * (CROSSSLOT, before running anything), and the store falls back to the entry made first, as on a
 * Cluster. The whole conformance suite runs on it.
 */
import { Redis } from 'ioredis';
import { RedisCheckpointStore, type CheckpointStore } from 'agent-adapter';
import { describeCheckpointStoreConformance } from 'agent-adapter/testing';
import { redisRaw } from './redis.fixtures';
import { suiteId } from '../utils/services';
import { describeWithRedisCluster } from '../utils/redis-cluster';

describeWithRedisCluster(
  'RedisCheckpointStore through a plain client of a one-node cluster',
  (cluster) => {
    const stores: RedisCheckpointStore[] = [];
    let admin: Redis | undefined;
    const plain = () => new Redis({ host: '127.0.0.1', port: port() });
    const port = () => cluster().nodes[0]!.port;
    const client = () => (admin ??= plain());

    afterAll(async () => {
      await Promise.all(stores.map((s) => s.close()));
      await admin?.quit();
    });

    function open(): RedisCheckpointStore {
      const store = new RedisCheckpointStore(plain, {
        prefix: suiteId('aa1'),
      });
      stores.push(store);
      return store;
    }
    const tag = (store: CheckpointStore, runId: string) =>
      `{${(store as RedisCheckpointStore).prefix}:${runId}}`;

    it('the server refuses keys of two slots in one script, so a first save falls back to the entry made first', async () => {
      await expect(
        client().eval('return 1', 2, '{a}:x', '{b}:x'),
      ).rejects.toThrow(/CROSSSLOT/);
      const store = open();
      const cp = (runId: string, step: number) => ({
        runId,
        step,
        flow: 'f',
        status: 'running' as const,
        segment: 1,
        sealed: `cp-${runId}-${step}`,
      });
      for (const id of ['a', 'b']) await store.save(cp(id, 0));
      await store.save(cp('a', 1));
      expect((await store.listUnfinished('f')).map((h) => h.runId)).toEqual([
        'a',
        'b',
      ]);
      const prefix = store.prefix;
      expect(await client().zscore(`{${prefix}}:unfinished:f`, 'b')).toBe('0');
      expect(await client().hget(`{${prefix}:b}:run`, 'created')).toBe(
        await client().zscore(`{${prefix}}:runs`, 'b'),
      );
    });

    describeCheckpointStoreConformance({
      name: 'redis-one-node-cluster',
      make: async () => open(),
      raw: redisRaw(client, tag),
    });
  },
  { masters: 1, replicas: 0 },
);
