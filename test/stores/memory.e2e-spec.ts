import {
  MemoryCheckpointStore,
  type CallRecord,
  type CheckpointRecord,
  type CheckpointStore,
  type RunHead,
} from 'agent-adapter';
import {
  describeCheckpointStoreConformance,
  type CheckpointStoreFixture,
} from 'agent-adapter/testing';
import { tamperFuzz } from '../../tools/tamper/tamper-fuzz';

/** The memory store with raw access for the tamper tests. */
class RawMemoryStore extends MemoryCheckpointStore {
  callsOf(runId: string): Map<string, CallRecord> {
    return this.runs.get(runId)!.calls;
  }
  checkpointsOf(runId: string): CheckpointRecord[] {
    return this.runs.get(runId)!.checkpoints;
  }
  headOf(runId: string): RunHead {
    return this.runs.get(runId)!.head;
  }
}

const raw = (s: CheckpointStore) => s as RawMemoryStore;
const key = (k: { segment: number; superstep: number; seq: number }) =>
  `${k.segment}/${k.superstep}/${k.seq}`;

const fixture = {
  name: 'memory',
  make: async () => new RawMemoryStore(),
  raw: {
    rewriteCall: async (store, runId, k, sealed) => {
      const calls = raw(store).callsOf(runId);
      calls.set(key(k), { ...calls.get(key(k))!, sealed });
    },
    deleteCall: async (store, runId, k) => {
      raw(store).callsOf(runId).delete(key(k));
    },
    rewriteCheckpoint: async (store, runId, step, sealed) => {
      const c = raw(store)
        .checkpointsOf(runId)
        .find((x) => x.step === step)!;
      c.sealed = sealed;
    },
    insertCalls: async (store, runId, records, headCalls) => {
      const calls = raw(store).callsOf(runId);
      for (const r of records) calls.set(key(r), { ...r });
      raw(store).headOf(runId).calls = headCalls;
    },
    insertCheckpoint: async (store, runId, record, head) => {
      const rows = raw(store).checkpointsOf(runId);
      const at = rows.findIndex((x) => x.step === record.step);
      if (at >= 0) rows.splice(at, 1);
      rows.push({ ...record });
      rows.sort((a, b) => a.step - b.step);
      const h = raw(store).headOf(runId);
      Object.assign(h, {
        step: record.step,
        status: record.status,
        segment: head.segment,
      });
    },
  },
} satisfies CheckpointStoreFixture;
describeCheckpointStoreConformance(fixture);
tamperFuzz(fixture);
