/**
 * What a Redis Cluster failover can lose, on a real local cluster (three masters, one replica
 * each, started for this suite). The replica is cut off before the write it must miss: SIGSTOPped
 * and its replication link closed by its master (`CLIENT KILL TYPE replica`), so nothing sent
 * after can sit in its socket buffer; then the master is SIGKILLed, the replica SIGCONTed and
 * promoted (`CLUSTER FAILOVER TAKEOVER`). Each case uses its own shard.
 */
import calculateSlot from 'cluster-key-slot';
import { Redis } from 'ioredis';
import {
  CheckpointStoreUnavailable,
  DurableSetupError,
  Executor,
  FailoverNeedsDecision,
  Flow,
  FlowRunner,
  RecoveryNeedsDecision,
  RedisCheckpointStore,
  KeyRing,
  ToolRegistry,
  type NeedsDecision,
  type RedisCheckpointStoreOptions,
} from 'agent-adapter';
import { inspectRun } from 'agent-adapter/cli/inspect';
import { markRestored } from 'agent-adapter/cli/restore';
import { CrashingStore, SimulatedCrash } from 'agent-adapter/testing';
import { KEY } from 'agent-adapter/testing/fixtures';
import { suiteId } from '../utils/services';
import { describeWithRedisCluster } from '../utils/redis-cluster';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function until(check: () => Promise<boolean>, what: string) {
  for (let i = 0; i < 300; i++) {
    if (await check()) return;
    await sleep(50);
  }
  throw new Error(`timed out waiting for ${what}`);
}

async function on<T>(
  port: number,
  ...command: [string, ...Array<string | number>]
) {
  const node = new Redis({ port, host: '127.0.0.1', maxRetriesPerRequest: 1 });
  try {
    return (await node.call(...command)) as T;
  } finally {
    node.disconnect();
  }
}

describeWithRedisCluster(
  'RedisCheckpointStore across a Redis Cluster failover',
  (cluster) => {
    const prefix = suiteId('aaf');
    const used = new Set<number>();
    const closers: Array<() => unknown> = [];
    afterAll(async () => {
      for (const close of closers.reverse()) await close();
    });

    /**
     * A run id whose slot is on a master not used yet, with its replica. Right after the cluster
     * formed, a replica may not be attached yet (CI once looped here for ever on such a reading):
     * the nodes are read again until one fits, for up to 30 s.
     */
    async function runOnFreshShard(name: string, tenant = false) {
      const deadline = Date.now() + 30_000;
      for (;;) {
        const text = await cluster().describe();
        const shard = pickShard(name, text, tenant);
        if (shard) return shard;
        if (Date.now() > deadline)
          throw new Error(`no unused master with a replica:\n${text}`);
        await sleep(200);
      }
    }

    /**
     * A run id on an unused master with a replica; with `tenant`, on the master of the tenant's
     * `{prefix}` slot (its indexes and queues), which the failover cases then leave alone.
     */
    function pickShard(name: string, text: string, tenant: boolean) {
      const { parsed, masterOf } = nodesOf(text);
      const tenantMaster = masterOf(calculateSlot(prefix));
      // 5,000 ids land on every slot range many times over.
      for (let i = 0; i < 5_000; i++) {
        const runId = `${name}-${i}`;
        const master = masterOf(calculateSlot(`{${prefix}:${runId}}`));
        const replica = parsed.find((n) => n.of === master?.id);
        if (!master || !replica || used.has(master.port)) continue;
        if (tenant !== (master === tenantMaster)) continue;
        used.add(master.port);
        const pid = cluster().nodes.find((n) => n.port === replica.port)!
          .process.pid!;
        return { runId, master: master.port, replica: replica.port, pid };
      }
      return undefined;
    }

    /** CLUSTER NODES read: each node, and the live master serving a slot. */
    function nodesOf(text: string) {
      const parsed = text
        .trim()
        .split('\n')
        .map((line) => {
          const f = line.split(' ');
          return {
            id: f[0]!,
            port: Number(f[1]!.split(':')[1]!.split('@')[0]),
            master: f[2]!.includes('master') && !f[2]!.includes('fail'),
            of: f[3]!,
            slots: f.slice(8).map((r) => r.split('-').map(Number)),
          };
        });
      const masterOf = (slot: number) =>
        parsed.find(
          (n) =>
            n.master &&
            n.slots.some(([a, b]) => slot >= a! && slot <= (b ?? a)!),
        );
      return { parsed, masterOf };
    }

    /** The pid of the replica of the tenant's `{prefix}` slot. */
    async function tenantReplicaPid(): Promise<number> {
      const { parsed, masterOf } = nodesOf(await cluster().describe());
      const master = masterOf(calculateSlot(prefix))!;
      const replica = parsed.find((n) => n.of === master.id)!;
      return cluster().nodes.find((n) => n.port === replica.port)!.process.pid!;
    }

    async function caughtUp(master: number) {
      await until(async () => {
        const info = await on<string>(master, 'INFO', 'replication');
        const at = Number(/master_repl_offset:(\d+)/.exec(info)![1]);
        const acked = Number(/slave0:.*offset=(\d+)/.exec(info)?.[1] ?? -1);
        return acked >= at;
      }, 'the replica to catch up');
    }

    /** The replica gets nothing more from its master from here on. */
    async function cutOff(shard: { master: number; pid: number }) {
      process.kill(shard.pid, 'SIGSTOP');
      await on(shard.master, 'CLIENT', 'KILL', 'TYPE', 'replica');
    }

    async function failOver(shard: {
      master: number;
      replica: number;
      pid: number;
    }) {
      await cluster().kill(shard.master);
      process.kill(shard.pid, 'SIGCONT');
      await on(shard.replica, 'CLUSTER', 'FAILOVER', 'TAKEOVER');
      await until(async () => {
        const role = await on<unknown[]>(shard.replica, 'ROLE');
        return role[0] === 'master';
      }, 'the promotion');
      await cluster().healthy(30_000);
    }

    /** A worker: its own store and runner, with a flow whose node pays once the gate opens. */
    function worker(options: Omit<RedisCheckpointStoreOptions, 'prefix'> = {}) {
      // A short lease: a drive the failover stopped is due (and shown needing a decision) soon.
      const store = new RedisCheckpointStore(() => cluster().connect(), {
        prefix,
        ...options,
      });
      const runner = new FlowRunner(new Executor(registry), {
        checkpoints: store,
        checkpointKey: KEY,
        leaseMs: 1000,
      });
      closers.push(
        () => store.close(),
        () => runner.close(),
      );
      return { store, runner };
    }

    let charges = 0;
    let hold: Promise<void> = Promise.resolve();
    let gate: Promise<void> = Promise.resolve();
    const registry = new ToolRegistry().register('charge', async () => {
      charges++;
      await hold;
      return `ch_${charges}`;
    });
    const flow = new Flow('pay')
      .node('pay', async (_s, ctx) => {
        await gate;
        return { charge: await ctx.call('charge') };
      })
      // A second superstep: the pay superstep's checkpoint does not end the run (an ending write
      // is let through after a failover: nothing runs after it).
      .node('receipt', () => ({ receipt: true }))
      .edge('pay', 'receipt')
      .end('receipt');
    /** Opens with the returned function. */
    const closed = () => {
      let open!: () => void;
      const p = new Promise<void>((r) => (open = r));
      return [p, open] as const;
    };

    it('the replicas option is checked: a bad value is a DurableSetupError naming it', () => {
      for (const bad of [
        { count: 0, timeoutMs: 100 },
        { count: 1, timeoutMs: 0 },
        { count: 1.5, timeoutMs: 100 },
        null,
      ])
        expect(
          () =>
            new RedisCheckpointStore(() => cluster().connect(), {
              replicas: bad as never,
            }),
        ).toThrow(DurableSetupError);
      expect(
        () =>
          new RedisCheckpointStore(() => cluster().connect(), {
            replicas: { count: 0, timeoutMs: 100 },
          }),
      ).toThrow(/replicas: count must be an integer >= 1, got 0/);
    });

    it('with replicas and the replica stopped: the started record is not confirmed, the store is unavailable and the tool never runs', async () => {
      // The tenant's shard: the failover cases below must not move the slot of its indexes.
      const shard = await runOnFreshShard('stopped', true);
      const { store, runner } = worker({
        replicas: { count: 1, timeoutMs: 200 },
      });
      charges = 0;
      const [g, open] = closed();
      gate = g;
      const run = runner.run(flow, {}, { runId: shard.runId });
      run.catch(() => undefined);
      await until(
        async () => (await store.head(shard.runId)) !== undefined,
        'step 0',
      );
      process.kill(shard.pid, 'SIGSTOP');
      try {
        open();
        await expect(run).rejects.toThrow(CheckpointStoreUnavailable);
        await expect(run).rejects.toThrow(/reached 0 of the 1 replica/);
        expect(charges).toBe(0);
      } finally {
        process.kill(shard.pid, 'SIGCONT');
      }
      await cluster().healthy(30_000);
      // The started record reached the master: the call is in doubt, never run by recovery.
      const other = worker();
      await expect(other.runner.recover(flow, shard.runId)).rejects.toThrow(
        RecoveryNeedsDecision,
      );
      expect(charges).toBe(0);
    }, 40_000);

    it("with replicas and the tenant slot's replica stopped: no run is started and no enqueue answers with an id; once it is back, both go through", async () => {
      const { store, runner } = worker({
        replicas: { count: 1, timeoutMs: 200 },
      });
      charges = 0;
      gate = Promise.resolve();
      hold = Promise.resolve();
      // A run waiting on tenant-q, for the admission below.
      await runner.enqueue(flow, {}, { queue: 'tenant-q' });
      const pid = await tenantReplicaPid();
      process.kill(pid, 'SIGSTOP');
      try {
        // The run's index entry is not on the replica: the run is not started, nothing runs.
        const run = runner.run(flow, {}, { runId: 'tenant-run' });
        await expect(run).rejects.toThrow(CheckpointStoreUnavailable);
        await expect(run).rejects.toThrow(/reached 0 of the 1 replica/);
        expect(await store.head('tenant-run')).toBeUndefined();
        expect(charges).toBe(0);
        // The queue entry and its dedupe key are not on the replica: no id is answered.
        const enqueue = runner.enqueue(flow, {}, { dedupeKey: 'order-9' });
        await expect(enqueue).rejects.toThrow(CheckpointStoreUnavailable);
        // An admission not on the replica is not answered: no worker drives the run on it.
        const admit = store.admit({
          queue: 'tenant-q',
          now: Date.now(),
          limit: 1,
        });
        await expect(admit).rejects.toThrow(CheckpointStoreUnavailable);
      } finally {
        process.kill(pid, 'SIGCONT');
      }
      await cluster().healthy(30_000);
      expect(await runner.run(flow, {}, { runId: 'tenant-run' })).toMatchObject(
        { status: 'done' },
      );
      expect(charges).toBe(1);
      // The enqueue that was not answered holds its dedupe key: the retry gets that run.
      const first = await runner.enqueue(flow, {}, { dedupeKey: 'order-9' });
      const again = await runner.enqueue(flow, {}, { dedupeKey: 'order-9' });
      expect(again.runId).toBe(first.runId);
    }, 40_000);

    it('without WAIT: a started record the master acknowledged and lost in the failover is detected; neither the live worker nor a recovery runs the charge again; marked restored, the charge is in doubt and its finding is replayed', async () => {
      const shard = await runOnFreshShard('async');
      const first = worker();
      charges = 0;
      const [g, open] = closed();
      const [h, release] = closed();
      gate = g;
      hold = h;
      const run = first.runner.run(flow, {}, { runId: shard.runId });
      run.catch(() => undefined);
      await until(
        async () => (await first.store.head(shard.runId)) !== undefined,
        'step 0',
      );
      await caughtUp(shard.master);
      await cutOff(shard);
      open();
      await until(async () => charges === 1, 'the charge');
      // Acknowledged by the master: the started record is stored there.
      expect((await first.store.head(shard.runId))?.calls).toBe(1);
      await failOver(shard);

      const second = worker();
      // What survived is an earlier state that looks whole: no record of the charge at all.
      const survived = await second.store.head(shard.runId);
      expect(survived).toMatchObject({ step: 0, calls: 0 });
      expect(await second.store.calls(shard.runId, 0)).toEqual([]);
      // The live worker's next write (the charge's result and the checkpoint) is refused.
      release();
      await expect(run).rejects.toThrow(FailoverNeedsDecision);
      // A recovery stops before writing, naming the failover; the charge does not run again.
      const recovery = second.runner.recover(flow, shard.runId);
      await expect(recovery).rejects.toThrow(FailoverNeedsDecision);
      await expect(recovery).rejects.toThrow(/promoted replica/);
      await expect(recovery).rejects.toBeInstanceOf(RecoveryNeedsDecision);
      expect(charges).toBe(1);

      // The operator's way on. get() and runs inspect name the failover (once the dead drive's
      // lease ran out)...
      await until(
        async () =>
          (await second.runner.get(flow, shard.runId)).needsDecision
            ?.failover !== undefined,
        'get() to name the failover',
      );
      const ring = KeyRing.from(KEY);
      const inspected = await inspectRun(second.store, ring, shard.runId);
      expect(inspected).toMatchObject({
        verdict: 'needs-decision',
        failover: { lostHistory: expect.stringMatching(/^[0-9a-f]{40}$/) },
      });
      expect(inspected.summary).toMatch(/runs restored --failover/);
      // ...`runs restored --failover` marks the run (only it: no other run here lost a master)...
      const { marked } = await markRestored(second.store, ring, {
        failover: true,
        by: 'ops',
      });
      expect(marked).toEqual([shard.runId]);
      expect(await second.store.failover(shard.runId)).toBeUndefined();
      // ...and the charge the failover may have lost is in doubt, not run again.
      const held = second.runner.recover(flow, shard.runId);
      await expect(held).rejects.toThrow(RecoveryNeedsDecision);
      await expect(held).rejects.not.toBeInstanceOf(FailoverNeedsDecision);
      expect(charges).toBe(1);
      let needs: NeedsDecision | undefined;
      await until(async () => {
        needs = (await second.runner.get(flow, shard.runId)).needsDecision;
        return needs !== undefined;
      }, 'the charge in doubt');
      expect(needs?.failover).toBeUndefined();
      expect(needs?.calls.map((c) => [c.tool, c.callId])).toEqual([
        ['charge', 'pay#0'],
      ]);
      // The card's system says it was charged (ch_1): recorded, and the recovery replays it.
      const done = await second.runner.resolve(flow, shard.runId, {
        calls: [{ call: 'pay#0', ran: true, result: 'ch_1' }],
        by: 'ops',
      });
      expect(done).toMatchObject({
        status: 'done',
        state: { charge: 'ch_1', receipt: true },
      });
      expect(charges).toBe(1);
    }, 60_000);

    it('with replicas (WAIT): the started record is on the replica before the charge runs; after the same failover the call is in doubt, not lost', async () => {
      const shard = await runOnFreshShard('wait');
      const first = worker({ replicas: { count: 1, timeoutMs: 2000 } });
      charges = 0;
      const [g, open] = closed();
      const [h, release] = closed();
      gate = g;
      hold = h;
      const run = first.runner.run(flow, {}, { runId: shard.runId });
      run.catch(() => undefined);
      await until(
        async () => (await first.store.head(shard.runId)) !== undefined,
        'step 0',
      );
      open();
      await until(async () => charges === 1, 'the charge');
      await cutOff(shard);
      await failOver(shard);

      const second = worker();
      expect(await second.store.head(shard.runId)).toMatchObject({ calls: 1 });
      const recovery = second.runner.recover(flow, shard.runId);
      await expect(recovery).rejects.toThrow(RecoveryNeedsDecision);
      await expect(recovery).rejects.not.toBeInstanceOf(FailoverNeedsDecision);
      expect(charges).toBe(1);
      release();
      await run.catch(() => undefined);
    }, 50_000);

    // Last: it fails over the tenant's master, which the cases above leave alone.
    it("without WAIT: a failover of the tenant slot's master that lost a run's index entries; the first look after it puts them back, and the run is taken over and ends with one charge", async () => {
      const { parsed, masterOf } = nodesOf(await cluster().describe());
      const tenant = masterOf(calculateSlot(prefix))!;
      const replica = parsed.find((n) => n.of === tenant.id)!;
      const shard = {
        master: tenant.port,
        replica: replica.port,
        pid: cluster().nodes.find((n) => n.port === replica.port)!.process.pid!,
      };
      // The run's own keys on another master: only its index entries live on the tenant's.
      let runId = '';
      for (let i = 0; !runId; i++) {
        const id = `indexed-${i}`;
        if (masterOf(calculateSlot(`{${prefix}:${id}}`)) !== tenant) runId = id;
      }
      const first = worker();
      const dying = new CrashingStore(first.store);
      const doomed = new FlowRunner(new Executor(registry), {
        checkpoints: dying,
        checkpointKey: KEY,
        leaseMs: 1000,
      });
      closers.push(() => doomed.close());
      // A look stamps the tenant with its master's replication id.
      await first.store.listDue({ now: Date.now() });
      charges = 0;
      hold = Promise.resolve();
      const [g, open] = closed();
      gate = g;
      await caughtUp(shard.master);
      await cutOff(shard);
      const run = doomed.run(flow, {}, { runId });
      run.catch(() => undefined);
      await until(
        async () => (await first.store.head(runId)) !== undefined,
        'step 0',
      );
      expect(
        await on(shard.master, 'ZSCORE', `{${prefix}}:due`, runId),
      ).not.toBeNull();
      // The worker dies (its lease is no longer renewed), then the tenant's master.
      expect(() => dying.kill()).toThrow(SimulatedCrash);
      await failOver(shard);
      const entry = (key: string) => on(shard.replica, 'ZSCORE', key, runId);
      expect(await entry(`{${prefix}}:due`)).toBeNull();
      expect(await entry(`{${prefix}}:unfinished:${flow.name}`)).toBeNull();

      const second = worker();
      await until(
        async () =>
          (await second.store.listDue({ now: Date.now() })).some(
            (h) => h.runId === runId,
          ),
        'the run to fall due',
      );
      expect(await entry(`{${prefix}}:unfinished:${flow.name}`)).not.toBeNull();
      expect(
        (await second.store.listUnfinished(flow.name)).map((h) => h.runId),
      ).toContain(runId);
      open();
      expect(await second.runner.recover(flow, runId)).toMatchObject({
        status: 'done',
        state: { charge: 'ch_1', receipt: true },
      });
      expect(charges).toBe(1);
    }, 60_000);
  },
);
