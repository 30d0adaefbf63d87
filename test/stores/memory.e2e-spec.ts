import {
  MemoryCheckpointStore,
  type CallRecord,
  type CheckpointRecord,
  type CheckpointStore,
  type HeadlessPage,
  type HeadlessQuery,
  type ListQuery,
  type ListUnfinishedOptions,
  type RunHead,
  type RunPage,
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
  /** Runs whose head reads as deleted (their rows stay, as a deleted SQL head row leaves them). */
  private readonly headless = new Set<string>();
  dropHead(runId: string): void {
    this.headless.add(runId);
  }
  override async head(runId: string): Promise<RunHead | undefined> {
    return this.headless.has(runId) ? undefined : super.head(runId);
  }
  override async listHeadless(
    query: HeadlessQuery = {},
  ): Promise<HeadlessPage> {
    const { cursor = '', limit = 100 } = query;
    const after = [...this.headless].sort().filter((id) => id > cursor);
    const runIds = after.slice(0, limit);
    return {
      runIds,
      ...(after.length > limit && { next: runIds[runIds.length - 1] }),
    };
  }
  override async list(query?: ListQuery): Promise<RunPage> {
    const page = await super.list(query);
    return {
      ...page,
      runs: page.runs.filter((r) => !this.headless.has(r.runId)),
    };
  }
  override async listUnfinished(
    flow: string,
    options?: ListUnfinishedOptions,
  ): Promise<RunHead[]> {
    return (await super.listUnfinished(flow, options)).filter(
      (r) => !this.headless.has(r.runId),
    );
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
    editHead: async (store, runId, columns) => {
      Object.assign(raw(store).headOf(runId), columns);
    },
    deleteHead: async (store, runId) => {
      // The memory store keeps a run's rows under its head: a headless run is one whose head
      // lookup finds nothing, its rows still there for history().
      raw(store).dropHead(runId);
    },
    deleteCheckpoint: async (store, runId, step) => {
      const rows = raw(store).checkpointsOf(runId);
      rows.splice(
        rows.findIndex((x) => x.step === step),
        1,
      );
    },
  },
} satisfies CheckpointStoreFixture;
describeCheckpointStoreConformance(fixture);
tamperFuzz(fixture);
