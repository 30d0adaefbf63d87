import type { Cluster, Redis } from 'ioredis';
import type { CheckpointStore } from 'agent-adapter';
import type { RawStoreAccess } from 'agent-adapter/testing';
import { HEAD_FIELDS } from 'agent-adapter/exec/checkpoints/redis/redis.layout';

/**
 * Raw row access for the tamper tests on the Redis store's layout (see redis.scripts.ts): the run
 * hash (`call:<superstep>:<segment>:<seq>`, `cp:<step>`, `cols:<step>`, the head's fields) and the
 * call index, through `client()` (read when used). `tag` gives a run's hash tag, `{prefix:runId}`.
 */
export function redisRaw(
  client: () => Redis | Cluster,
  tag: (store: CheckpointStore, runId: string) => string,
): RawStoreAccess {
  const admin = {
    hset: (key: string, fields: Record<string, string | number>) =>
      client().hset(key, fields),
    hdel: (key: string, f: string) => client().hdel(key, f),
    zadd: (key: string, score: number, member: string) =>
      client().zadd(key, score, member),
  };
  const field = (k: { segment: number; superstep: number; seq: number }) =>
    `${k.superstep}:${k.segment}:${k.seq}`;
  return {
    rewriteCall: async (store, runId, k, sealed) => {
      await admin.hset(`${tag(store, runId)}:run`, {
        [`call:${field(k)}`]: sealed,
      });
    },
    // The record only: its index entry stays, as after a partial loss.
    deleteCall: async (store, runId, k) => {
      await admin.hdel(`${tag(store, runId)}:run`, `call:${field(k)}`);
    },
    rewriteCheckpoint: async (store, runId, step, sealed) => {
      await admin.hset(`${tag(store, runId)}:run`, { [`cp:${step}`]: sealed });
    },
    insertCalls: async (store, runId, records, headCalls) => {
      const t = tag(store, runId);
      for (const r of records) {
        await admin.hset(`${t}:run`, { [`call:${field(r)}`]: r.sealed });
        await admin.zadd(`${t}:index`, r.superstep, field(r));
      }
      await admin.hset(`${t}:run`, { calls: headCalls });
    },
    insertCheckpoint: async (store, runId, record, head) => {
      await admin.hset(`${tag(store, runId)}:run`, {
        [`cp:${record.step}`]: record.sealed,
        [`cols:${record.step}`]: JSON.stringify([
          record.flow,
          record.status,
          record.segment,
        ]),
        step: record.step,
        status: record.status,
        segment: head.segment,
      });
    },
    editHead: async (store, runId, columns) => {
      await admin.hset(`${tag(store, runId)}:run`, columns);
    },
    deleteHead: async (store, runId) => {
      for (const f of HEAD_FIELDS)
        await admin.hdel(`${tag(store, runId)}:run`, f);
    },
    deleteCheckpoint: async (store, runId, step) => {
      await admin.hdel(`${tag(store, runId)}:run`, `cp:${step}`);
      await admin.hdel(`${tag(store, runId)}:run`, `cols:${step}`);
    },
  };
}
