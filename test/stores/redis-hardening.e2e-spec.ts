/**
 * RedisCheckpointStore under what Redis does to keys: TTLs running out during a long superstep,
 * and keys lost to eviction. Regression tests from a protocol review.
 */
import Redis from 'ioredis';
import {
  CheckpointStoreCorrupt,
  FlowRunner,
  RecoveryNeedsDecision,
  RedisCheckpointStore,
} from 'agent-adapter';
import { runCli } from 'agent-adapter/cli/program';
import { KeyRing } from 'agent-adapter/exec/durable/key-ring';
import { openCheckpoint } from 'agent-adapter/exec/durable/records';
import { CrashingStore, SimulatedCrash, settle } from 'agent-adapter/testing';
import { call, cp } from 'agent-adapter/testing/conformance/context';
import {
  KEY,
  executorFor,
  ticketsFlow,
  type LedgerEntry,
} from 'agent-adapter/testing/fixtures';
import { dropPrefix } from '../utils/redis-keys';
import { REDIS_URL, describeWithService, suiteId } from '../utils/services';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describeWithService('redis', 'Redis hardening', () => {
  const prefixes: string[] = [];
  const stores: RedisCheckpointStore[] = [];
  let admin: Redis;

  beforeAll(() => {
    admin = new Redis(REDIS_URL);
  });

  afterAll(async () => {
    await Promise.all(stores.map((s) => s.close()));
    for (const prefix of prefixes) await dropPrefix(admin, prefix);
    await admin.quit();
  });

  function open(ttlSeconds?: number) {
    const prefix = suiteId('rf');
    prefixes.push(prefix);
    const store = new RedisCheckpointStore(() => new Redis(REDIS_URL), {
      prefix,
      ...(ttlSeconds !== undefined && { ttlSeconds }),
    });
    stores.push(store);
    return { store, prefix };
  }

  /** The operator CLI, in process, on the store with this prefix: exit code and output. */
  async function cli(prefix: string, ...args: string[]) {
    const url = new URL(REDIS_URL);
    url.searchParams.set('prefix', prefix);
    let stdout = '';
    let stderr = '';
    const code = await runCli(['--store', url.toString(), ...args], {
      stdout: (t) => (stdout += t),
      stderr: (t) => (stderr += t),
      env: { CHECKPOINT_KEY: KEY },
    });
    return { code, stdout, stderr };
  }

  /** Runs the tickets flow as `runId`; `dieIn` kills the worker inside that tool. */
  async function order(
    store: RedisCheckpointStore,
    runId: string,
    dieIn?: string,
  ) {
    const dying = new CrashingStore(store);
    const w = new FlowRunner(
      executorFor([], 'w', {
        onTool: (t) => (t === dieIn ? dying.kill() : undefined),
      }),
      { checkpoints: dying, checkpointKey: KEY },
    );
    await w
      .run(ticketsFlow(), { show: 'O', seats: 1 }, { runId })
      .catch(() => undefined);
    w.close();
    await settle();
  }

  it('a live run whose superstep outlasts ttlSeconds does not expire while its worker renews the lease', async () => {
    const { store } = open(1);
    const w = new FlowRunner(
      executorFor([], 'w', {
        onTool: async (t) => {
          if (t === 'hold_seats') await sleep(2500);
        },
      }),
      { checkpoints: store, checkpointKey: KEY, leaseMs: 300 },
    );
    const outcome = await w
      .run(ticketsFlow(), { show: 'T', seats: 1 }, { runId: 'ttl-1' })
      .then(
        (r) => r,
        (e: unknown) => e,
      );
    w.close();
    // Today: every key expired during hold_seats (lease renewals never touch them); the worker
    // then fails with 'cannot save step 1, the run has no checkpoint yet' and the run is gone.
    expect(outcome).toMatchObject({ status: 'done' });
  });

  it("an ended run's index removal may fail (in the end's own script on one server, sent after it unawaited on a Cluster): the run is done and a reader cleans the entry", async () => {
    const { store, prefix } = open();
    const due = `{${prefix}}:due`;
    const w = new FlowRunner(
      executorFor([], 'w', {
        // During the last call the due set is swapped for a string: the end's removal fails on it.
        onTool: async (t) => {
          if (t !== 'email_tickets') return;
          await admin.rename(due, `${due}-aside`);
          await admin.set(due, 'not a sorted set');
        },
      }),
      { checkpoints: store, checkpointKey: KEY },
    );
    const result = await w.run(
      ticketsFlow(),
      { show: 'E', seats: 1 },
      { runId: 'end-1' },
    );
    w.close();
    expect(result.status).toBe('done');
    // This client's next command runs after the removal, which failed (WRONGTYPE) midway.
    expect(await store.head('end-1')).toMatchObject({ status: 'done' });
    await admin.del(due);
    await admin.rename(`${due}-aside`, due);
    expect(await admin.zscore(due, 'end-1')).not.toBeNull();
    // A look at due work reads the ended head, leaves the run alone and drops its entry.
    expect(await store.listDue({ now: Date.now() + 3_600_000 })).toEqual([]);
    expect(await admin.zscore(due, 'end-1')).toBeNull();
  });

  it("index entries lost with the tenant slot's master are put back from the run hashes at the first look after its replication id changed", async () => {
    const { store, prefix } = open();
    const P = `{${prefix}}`;
    const flow = ticketsFlow().name;
    await order(store, 'cut-a', 'charge_card');
    await order(store, 'done-a');
    const ids = async (heads: Promise<Array<{ runId: string }>>) =>
      (await heads).map((h) => h.runId);
    // A fresh tenant's first look scans (finding what is indexed already) and stamps it.
    expect(await ids(store.listUnfinished(flow))).toEqual(['cut-a']);
    const stamp = await admin.get(`${P}:indexed`);
    expect(stamp).toMatch(/^[0-9a-f]{40}$/);
    // What a failover of the `{P}` master may lose: both runs' entries, the sequence's count.
    for (const id of ['cut-a', 'done-a']) {
      await admin.zrem(`${P}:unfinished:${flow}`, id);
      await admin.zrem(`${P}:due`, id);
      await admin.zrem(`${P}:runs`, id);
      await admin.hdel(`${P}:born`, id);
    }
    await admin.set(`${P}:seq`, '0');
    // The same master: a look reads the stamp only, and the run stays unseen.
    expect(await store.listUnfinished(flow)).toEqual([]);
    expect(await store.listDue({ now: Date.now() + 3_600_000 })).toEqual([]);
    // Another replication id (a promoted replica, a restart): the next look rebuilds first.
    await admin.set(`${P}:indexed`, 'f'.repeat(40));
    expect(await ids(store.listDue({ now: Date.now() + 3_600_000 }))).toEqual([
      'cut-a',
    ]);
    expect(await admin.get(`${P}:indexed`)).toBe(stamp);
    expect(await ids(store.listUnfinished(flow))).toEqual(['cut-a']);
    expect(await admin.zscore(`${P}:unfinished:${flow}`, 'done-a')).toBeNull();
    // Both are listed again, in their places, and the next run is placed after them.
    expect(await ids(store.list().then((p) => p.runs))).toEqual([
      'done-a',
      'cut-a',
    ]);
    expect(await admin.get(`${P}:seq`)).toBe('2');
    await order(store, 'new-a');
    expect(await ids(store.list().then((p) => p.runs))).toEqual([
      'new-a',
      'done-a',
      'cut-a',
    ]);
    // And the cut run is recovered from there: its charge was in doubt, so it stops for a decision.
    const w = new FlowRunner(executorFor([], 'w2'), {
      checkpoints: store,
      checkpointKey: KEY,
    });
    await expect(w.recover(ticketsFlow(), 'cut-a')).rejects.toThrow(
      RecoveryNeedsDecision,
    );
    w.close();
  });

  it('a queued run whose enqueue the tenant slot lost is queued again as it was placed; an enqueue of its dedupe key waits for that and answers with it, starting no second run', async () => {
    const { store, prefix } = open();
    const P = `{${prefix}}`;
    const w = new FlowRunner(executorFor([], 'w'), {
      checkpoints: store,
      checkpointKey: KEY,
    });
    const order = (seats: number, runId: string, more = {}) =>
      w.enqueue(
        ticketsFlow(),
        { show: 'Q', seats },
        { queue: 'hq', runId, ...more },
      );
    await order(1, 'q-kept', { priority: 5 });
    await order(2, 'q-lost', { priority: 7, dedupeKey: 'order-7' });
    await store.listDue({ now: Date.now() });
    // Every trace of the second enqueue in `{P}` is gone; its run hash (step 0, queue hq) is not.
    const lose = async () => {
      await admin.hdel(`${P}:q:hq:runs`, 'q-lost');
      await admin.zrem(`${P}:q:hq:delayed`, 'q-lost');
      await admin.hdel(`${P}:q:hq:dedupe`, 'order-7');
      await admin.hdel(`${P}:queued`, 'q-lost');
      await admin.zrem(`${P}:runs`, 'q-lost');
      // What a promotion or a restart does to the master's replication id.
      await admin.set(`${P}:indexed`, 'f'.repeat(40));
    };
    await lose();
    // The enqueue finds no holder of the key, but its script makes it heal first: the lost run
    // holds the key again, and is the answer.
    expect(await order(9, 'q-dup', { dedupeKey: 'order-7' })).toEqual({
      runId: 'q-lost',
      created: false,
    });
    expect(await store.head('q-dup')).toBeUndefined();
    // A look heals the same way.
    await lose();
    expect(await store.listDue({ now: Date.now() })).toEqual([]);
    expect(await admin.hget(`${P}:queued`, 'q-lost')).toBe('hq');
    expect(await admin.hget(`${P}:q:hq:dedupe`, 'order-7')).toBe('q-lost');
    const admitted = await store.admit({
      queue: 'hq',
      now: Date.now() + 1000,
      limit: 10,
    });
    const byId = new Map(admitted.map((h) => [h.runId, h.queue]));
    expect([...byId.keys()].sort()).toEqual(['q-kept', 'q-lost']);
    expect(byId.get('q-kept')).toMatchObject({ name: 'hq', priority: 5 });
    expect(byId.get('q-lost')).toMatchObject({ name: 'hq', priority: 7 });
    w.close();
  });

  it.each([
    ['a due look', true],
    ['the next admission, before any look', false],
  ])(
    "a run its queue admitted and no longer counts (the admission lost with the tenant slot's master) is counted again by %s: its key stays full",
    async (_, look) => {
      const { store, prefix } = open();
      const P = `{${prefix}}`;
      const dying = new CrashingStore(store);
      const w = new FlowRunner(
        executorFor([], 'w', {
          onTool: (t) => (t === 'charge_card' ? dying.kill() : undefined),
        }),
        {
          checkpoints: dying,
          checkpointKey: KEY,
          queues: { cq: { perKey: 1 } },
        },
      );
      await w.enqueue(
        ticketsFlow(),
        { show: 'C', seats: 1 },
        { queue: 'cq', runId: 'c-1', key: 'shop-1', dedupeKey: 'c-order-1' },
      );
      const t = w.takeOver([ticketsFlow()], { everyMs: 60_000 });
      await t.lookNow();
      for (let i = 0; i < 100 && !dying.dead; i++) await sleep(20);
      await t.stop();
      w.close();
      await settle();
      expect((await store.head('c-1'))?.step).toBeGreaterThan(0);
      const counted = async () => [
        await admin.zscore(`${P}:q:cq:active`, 'c-1'),
        await admin.hget(`${P}:q:cq:keys`, 'shop-1'),
        await admin.hget(`${P}:q:cq:dedupe`, 'c-order-1'),
      ];
      expect(await counted()).toEqual([expect.any(String), '1', 'c-1']);
      // The admission is lost (and so is the rest of the run's queue state).
      await admin.zrem(`${P}:q:cq:active`, 'c-1');
      await admin.hdel(`${P}:q:cq:keys`, 'shop-1');
      await admin.hdel(`${P}:q:cq:dedupe`, 'c-order-1');
      await admin.hdel(`${P}:q:cq:runs`, 'c-1');
      await admin.hdel(`${P}:queued`, 'c-1');
      await admin.set(`${P}:indexed`, 'f'.repeat(40));
      if (look) {
        await store.listDue({ now: Date.now() });
        expect(await counted()).toEqual([expect.any(String), '1', 'c-1']);
      }
      // So a second run of the key waits while the first is unfinished. Without a look first, the
      // admission's script finds the master changed and heals before it counts.
      const w2 = new FlowRunner(executorFor([], 'w2'), {
        checkpoints: store,
        checkpointKey: KEY,
      });
      await w2.enqueue(
        ticketsFlow(),
        { show: 'C', seats: 2 },
        { queue: 'cq', runId: 'c-2', key: 'shop-1' },
      );
      w2.close();
      const admitted = await store.admit({
        queue: 'cq',
        now: Date.now() + 1000,
        limit: 10,
        perKey: 1,
      });
      expect(admitted).toEqual([]);
      expect(await counted()).toEqual([expect.any(String), '1', 'c-1']);
    },
  );

  it('a run hash whose last call key (lastCall) is edited or gone refuses every append as CheckpointStoreCorrupt, and nothing is written', async () => {
    const { store, prefix } = open();
    for (const [edit, why] of [
      ['1:0', /"1:0" is not segment:superstep:seq/],
      [undefined, /it is missing, and the run has call records/],
    ] as const) {
      const runId = suiteId('last');
      await store.save(cp(runId, 0), { calls: [call(runId, 1)] });
      const hash = `{${prefix}:${runId}}:run`;
      expect(await admin.hget(hash, 'lastCall')).toBe('1:0:1');
      if (edit === undefined) await admin.hdel(hash, 'lastCall');
      else await admin.hset(hash, 'lastCall', edit);
      for (const write of [
        () => store.recordCall(runId, 1, [call(runId, 2)]),
        () => store.save(cp(runId, 1), { calls: [call(runId, 2)] }),
      ]) {
        const err = await write().catch((e: unknown) => e);
        expect(err).toBeInstanceOf(CheckpointStoreCorrupt);
        expect((err as Error).message).toMatch(why);
      }
      expect((await store.head(runId))?.step).toBe(0);
      expect((await store.history(runId)).calls.map((c) => c.seq)).toEqual([1]);
    }
  });

  it('a lost call-log key (eviction, partial loss) is CheckpointStoreCorrupt, not a call that never ran', async () => {
    const { store, prefix } = open();
    const ledger: LedgerEntry[] = [];
    const runId = suiteId('order');
    const dying = new CrashingStore(store);
    const w1 = new FlowRunner(
      executorFor(ledger, 'w1', {
        onTool: (t) => (t === 'email_tickets' ? dying.kill() : undefined),
      }),
      { checkpoints: dying, checkpointKey: KEY },
    );
    await expect(
      w1.run(ticketsFlow(), { show: 'E', seats: 1 }, { runId }),
    ).rejects.toBeInstanceOf(SimulatedCrash);
    await settle();
    // email_tickets (superstep 2) is logged `started`: in doubt. The run's call index is evicted
    // (maxmemory-policy volatile-lru/allkeys-lru evicts per key; the run keys all carry a TTL).
    // The head's `calls` counter still says 5 records exist; none can be found.
    expect(await admin.hget(`{${prefix}:${runId}}:run`, 'calls')).toBe('5');
    expect(await admin.del(`{${prefix}:${runId}}:index`)).toBe(1);

    const w2 = new FlowRunner(executorFor(ledger, 'w2'), {
      checkpoints: store,
      checkpointKey: KEY,
    });
    const outcome = await w2.recover(ticketsFlow(), runId).then(
      (r) => r,
      (e: unknown) => e,
    );
    // Today: recovery sees no call at all, claims, and sends the mail again without a decision.
    expect(ledger.filter((e) => e.tool === 'email_tickets')).toEqual([]);
    expect(
      outcome instanceof RecoveryNeedsDecision ||
        outcome instanceof CheckpointStoreCorrupt,
    ).toBe(true);
  });

  it('a cols:<step> field that is not JSON is one corrupt checkpoint: history, list and verify still work (exit 1)', async () => {
    const { store, prefix } = open();
    await order(store, 'good-1');
    await order(store, 'bad-cols');
    await admin.hset(`{${prefix}:bad-cols}:run`, 'cols:1', '{not json');
    await admin.hset(`{${prefix}:bad-cols}:run`, 'cols:3', 'null');

    // Today: history throws a SyntaxError, so verify exits 3 and every reader of history breaks.
    const history = await store.history('bad-cols');
    expect(history.checkpoints.map((c) => c.step)).toEqual([0, 1, 2, 3]);
    const ring = KeyRing.from(KEY);
    expect(() => openCheckpoint(ring, history.checkpoints[1]!)).toThrow(
      CheckpointStoreCorrupt,
    );
    expect(() => openCheckpoint(ring, history.checkpoints[1]!)).toThrow(
      /checkpoint step 1 is unreadable \(its columns/,
    );
    expect(() => openCheckpoint(ring, history.checkpoints[2]!)).not.toThrow();
    expect(() => openCheckpoint(ring, history.checkpoints[3]!)).toThrow(
      /checkpoint step 3 is unreadable \(its columns \(cols:3\) are not \[flow, status, segment\]\)/,
    );
    expect((await store.list()).runs.map((r) => r.runId).sort()).toEqual([
      'bad-cols',
      'good-1',
    ]);

    const one = await cli(prefix, 'runs', 'verify', 'bad-cols');
    expect(one.stderr).toBe('');
    expect(one.code).toBe(1);
    expect(one.stdout).toMatch(/CORRUPT {2}bad-cols/);
    expect(one.stdout).toMatch(/checkpoint step 1: .*unreadable/);
    expect(one.stdout).toMatch(/checkpoint step 3: .*unreadable/);
    // Only the two rows: no head mismatch against step 3's placeholder columns.
    expect(one.stdout.match(/^ {2}- /gm)).toHaveLength(2);
    const all = await cli(prefix, 'runs', 'verify', '--all');
    expect(all.code).toBe(1);
    expect(all.stdout).toMatch(/ok {2}good-1/);
    expect(all.stdout).toContain('2 run(s) checked, 1 with problems.');
  });

  it('a removed call-index entry, which recovery refuses, is reported by runs verify (exit 1)', async () => {
    const { store, prefix } = open();
    await order(store, 'cut-1', 'email_tickets');
    const index = `{${prefix}:cut-1}:index`;
    // The cut superstep (2): email_tickets logged `started` before its worker died.
    const [member] = await admin.zrangebyscore(index, 2, 2);
    expect(member).toBeDefined();
    expect(await admin.zrem(index, member!)).toBe(1);

    const w2 = new FlowRunner(executorFor([], 'w2'), {
      checkpoints: store,
      checkpointKey: KEY,
    });
    await expect(w2.recover(ticketsFlow(), 'cut-1')).rejects.toBeInstanceOf(
      CheckpointStoreCorrupt,
    );
    // Today: every row verifies (the record is still in the run hash), so verify says ok, exit 0.
    const verified = await cli(prefix, 'runs', 'verify', 'cut-1');
    expect(verified.code).toBe(1);
    expect(verified.stdout).toMatch(/CORRUPT {2}cut-1/);
    expect(verified.stdout).toMatch(
      /head counts 5 call records.*account for 4/,
    );
  });
});
