/**
 * An admission the tenant slot `{P}` lost in a failover, of a run its worker has not claimed yet
 * (its hash still at step 0). The admission is one `{P}` script; the admitter then keeps it in the
 * run's hash (`admission`) before it drives the run, within ADMISSION_TRACE_MS of sending it. The
 * healing (redis.heal.ts) counts a step-0 run with a kept admission as admitted, and reads the
 * runs it found waiting again once that bound has passed since it saw the master change; an
 * admission is kept only over no other admitter's live lease. Before this, the run was admitted a
 * second time while its first worker drove it (the chaos sample's "V3 4 runs in a call at once").
 *
 * Each test plays the failover on one Redis: the `{P}` keys are saved with DUMP before worker-a's
 * admission and RESTOREd after it, with the master's id stamp changed, as a promoted replica that
 * missed the admission serves them. The run hashes keep what was written to them.
 */
import Redis from 'ioredis';
import { setTimeout as sleep } from 'node:timers/promises';
import { markRestored } from 'agent-adapter/cli/restore';
import {
  storeScript,
  type RedisClient,
} from 'agent-adapter/exec/checkpoints/redis/redis.client';
import { RedisKeys } from 'agent-adapter/exec/checkpoints/redis/redis.layout';
import {
  FlowRunner,
  KeyRing,
  RedisCheckpointStore,
  type AdmitQuery,
  type RunHead,
} from 'agent-adapter';
import { KEY, executorFor, ticketsFlow } from 'agent-adapter/testing/fixtures';
import { dropPrefix } from '../utils/redis-keys';
import { REDIS_URL, describeWithService, suiteId } from '../utils/services';

/** ADMISSION_TRACE_MS in redis.layout.ts. */
const TRACE_MS = 250;
const LEASE_MS = 60_000;

/** An admission from `queue` by `owner` (default `w`), under a lease of LEASE_MS. */
function admitFrom(
  store: RedisCheckpointStore,
  queue: string,
  extra: Partial<AdmitQuery> = {},
): Promise<RunHead[]> {
  return store.admit({
    queue,
    now: Date.now() + 1000,
    limit: 10,
    owner: 'w',
    leaseExpiresAt: Date.now() + LEASE_MS,
    ...extra,
  });
}

describeWithService('redis', 'Redis: an admission the tenant slot lost', () => {
  let admin: Redis;
  const opened: Array<{ store: RedisCheckpointStore; prefix: string }> = [];

  beforeAll(() => {
    admin = new Redis(REDIS_URL);
  });

  afterAll(async () => {
    for (const { store, prefix } of opened) {
      await store.close();
      await dropPrefix(admin, prefix);
    }
    await admin.quit();
  });

  /**
   * What `{P}` holds now: the function it resolves with puts `{P}` back to that, as a failover
   * that lost every write since.
   */
  async function tenantNow(P: string): Promise<() => Promise<void>> {
    const kept = new Map<string, Buffer>();
    for (const k of await admin.keys(`${P}*`))
      kept.set(k, await admin.dumpBuffer(k));
    return async () => {
      for (const k of await admin.keys(`${P}*`))
        if (!kept.has(k)) await admin.del(k);
      for (const [k, dump] of kept) await admin.restore(k, 0, dump, 'REPLACE');
    };
  }

  /** A store on a new prefix, and the ioredis client it drives. */
  function open(): {
    store: RedisCheckpointStore;
    client: () => Redis;
    P: string;
  } {
    const prefix = suiteId('lost-admission');
    let made: Redis | undefined;
    const store = new RedisCheckpointStore(
      () => (made = new Redis(REDIS_URL)),
      { prefix },
    );
    opened.push({ store, prefix });
    return { store, client: () => made!, P: `{${prefix}}` };
  }

  /** `open`, with one run enqueued as `place` says, and the tenant slot stamped whole. */
  async function openWithRun(place: {
    queue: string;
    runId: string;
    key?: string;
  }) {
    const opened = open();
    const w = new FlowRunner(executorFor([], 'w'), {
      checkpoints: opened.store,
      checkpointKey: KEY,
    });
    await w.enqueue(ticketsFlow(), { show: place.runId, seats: 1 }, place);
    w.close();
    await opened.store.listDue({ now: Date.now() });
    return opened;
  }

  /**
   * x-1 enqueued on `lq` with key k; worker-a admitted it (its admission kept in x-1's hash);
   * then the failover: `{P}` as before the admission, under a new master id.
   */
  async function admittedThenLost(limits: Partial<AdmitQuery>) {
    const { store, client, P } = await openWithRun({
      queue: 'lq',
      runId: 'x-1',
      key: 'k',
    });
    const loseSince = await tenantNow(P);
    const now = Date.now() + 1000;
    const lease = now + LEASE_MS;
    // Each admitter its own lease: `{P}` says whose admission it counts.
    const admit = (owner: string, at = now): Promise<RunHead[]> =>
      store.admit({
        queue: 'lq',
        now: at,
        limit: 10,
        ...limits,
        owner,
        leaseExpiresAt: owner === 'worker-a' ? lease : lease + 5_000,
      });
    const first = await admit('worker-a');
    expect(first.map((h) => h.runId)).toEqual(['x-1']);
    const kept = await admin.hget(`{${P.slice(1, -1)}:x-1}:run`, 'admission');
    expect(kept).toBe(`${lease}|worker-a`);
    await loseSince();
    await admin.set(`${P}:indexed`, 'f'.repeat(40));
    const hash = `{${P.slice(1, -1)}:x-1}:run`;
    /** `{P}` counts x-1 as admitted (once, its key full, out of the ready set), due at `due`. */
    const expectCounted = async (due: number) =>
      expect({
        active: await admin.zscore(`${P}:q:lq:active`, 'x-1'),
        key: await admin.hget(`${P}:q:lq:keys`, 'k'),
        due: await admin.zscore(`${P}:due`, 'x-1'),
        ready: await admin.zcard(`${P}:q:lq:ready`),
      }).toEqual({
        active: expect.any(String),
        key: '1',
        due: String(due),
        ready: 0,
      });
    return { store, client, P, hash, kept, lease, admit, expectCounted };
  }

  it.each([
    ['with a per-key limit', { perKey: 1 }],
    ['without limits', {}],
  ])(
    'a run admitted but not yet claimed is not admitted again after a failover lost its admission (%s): it is counted as admitted, due when its admitter’s lease ends',
    async (_, limits) => {
      const { admit, expectCounted, lease } = await admittedThenLost(limits);
      expect(await admit('worker-b', Date.now() + 1010)).toEqual([]);
      await expectCounted(lease);
    },
  );

  it('an admission kept while the healing runs, before its bound, is seen by its second look', async () => {
    const { admit, expectCounted, hash, kept, lease } = await admittedThenLost({
      perKey: 1,
    });
    // worker-a's write of its admission into the hash has not landed yet when the healing starts.
    await admin.hdel(hash, 'admission');
    const started = performance.now();
    const second = admit('worker-b', Date.now() + 1010);
    await sleep(TRACE_MS / 2);
    await admin.hset(hash, 'admission', kept!);
    expect(await second).toEqual([]);
    // The healing waited out the bound before it looked again at the run it found waiting.
    expect(performance.now() - started).toBeGreaterThanOrEqual(TRACE_MS);
    // Counted by the healing (due when worker-a's lease ends), not by worker-b's admission.
    await expectCounted(lease);
  });

  it('an admission kept under a lease that lapsed unclaimed (its admitter is gone) is not counted: the run waits, and is admitted again under its limits', async () => {
    const { admit, expectCounted, hash, lease } = await admittedThenLost({
      perKey: 1,
    });
    await admin.hset(hash, 'admission', `${Date.now() - 1}|worker-a`);
    const again = await admit('worker-b', Date.now() + 1010);
    expect(again.map((h) => h.runId)).toEqual(['x-1']);
    expect(await admin.hget(hash, 'admission')).toBe(
      `${lease + 5_000}|worker-b`,
    );
    await expectCounted(lease + 5_000);
  });

  it('an admission kept after the healing missed it: the second admitter does not drive the run over the first one’s live lease, and the run stays counted', async () => {
    const { store, admit, expectCounted, hash, kept, lease, P } =
      await admittedThenLost({ perKey: 1 });
    await admin.hdel(hash, 'admission');
    await store.listDue({ now: Date.now() }); // heals: x-1 is waiting, as far as it can tell
    // Then worker-a's admission lands in the hash, and x-1 falls due when worker-a's lease ends.
    await admin.hset(hash, 'admission', kept!);
    await admin.zadd(`${P}:due`, lease, 'x-1');
    expect(await admit('worker-b', Date.now() + 1010)).toEqual([]);
    expect(await admin.hget(hash, 'admission')).toBe(kept);
    // Counted by worker-b's admission, which leaves the due time of the run that is driven.
    await expectCounted(lease);
  });

  /**
   * `first` enqueued on `queue` with dedupe key `key`, admitted (then `afterAdmit`) and run to its
   * end, which frees the key; then `second` enqueued with it.
   */
  async function keyHandedOn(
    queue: string,
    key: string,
    [first, second]: [string, string],
    afterAdmit: (P: string) => Promise<void> = async () => undefined,
  ) {
    const opened = open();
    const w = new FlowRunner(executorFor([], 'w'), {
      checkpoints: opened.store,
      checkpointKey: KEY,
      workerId: 'w',
    });
    const place = { queue, dedupeKey: key };
    const enqueue = (runId: string) =>
      w.enqueue(ticketsFlow(), { show: runId, seats: 1 }, { ...place, runId });
    await enqueue(first);
    await opened.store.listDue({ now: Date.now() }); // stamped whole
    const admitted = await admitFrom(opened.store, queue);
    expect(admitted.map((h) => h.runId)).toEqual([first]);
    await afterAdmit(opened.P);
    expect((await w.recover(ticketsFlow(), first)).status).toBe('done');
    expect(await enqueue(second)).toMatchObject({
      runId: second,
      created: true,
    });
    w.close();
    return opened;
  }

  it('waiting runs an operator marked restored (past step 0, never admitted) are not counted by a healing: their queue admits them under its limits, and one it admitted stays counted when `{P}` loses that admission', async () => {
    const { store, P } = open();
    const w = new FlowRunner(executorFor([], 'w'), {
      checkpoints: store,
      checkpointKey: KEY,
    });
    for (const id of ['m-1', 'm-2'])
      await w.enqueue(
        ticketsFlow(),
        { show: id, seats: 1 },
        { queue: 'mq', runId: id, key: 'k' },
      );
    w.close();
    await store.listDue({ now: Date.now() }); // stamped whole
    // After a failover, `runs restored --failover` marks every run the lost master wrote, waiting
    // runs too (here: `runs restored`, every run). Each is at step 1 now, and has made no call.
    const { marked } = await markRestored(store, KeyRing.from(KEY), {
      by: 'op',
    });
    expect(marked.sort()).toEqual(['m-1', 'm-2']);
    const loseSince = await tenantNow(P);
    const admit = () =>
      admitFrom(store, 'mq', { perKey: 1, owner: 'worker-a' });
    /** Due runs (a look, which heals first), then what `{P}` counts. */
    const counts = async () => {
      const due = await store.listDue({ now: Date.now() + 1000 });
      return {
        due: due.map((h) => h.runId),
        key: await admin.hget(`${P}:q:mq:keys`, 'k'),
        active: await admin.zrange(`${P}:q:mq:active`, '0', '-1'),
        waiting:
          (await admin.zcard(`${P}:q:mq:ready`)) +
          (await admin.zcard(`${P}:q:mq:delayed`)),
      };
    };
    // A healing leaves both waiting (nothing due, nothing counted), and puts back their index
    // entries: the marks' due entries were lost too.
    await admin.zrem(`${P}:due`, 'm-1', 'm-2');
    await admin.set(`${P}:indexed`, 'f'.repeat(40));
    expect(await counts()).toEqual({
      due: [],
      key: null,
      active: [],
      waiting: 2,
    });
    expect(await admin.zrange(`${P}:due`, '0', '-1', 'WITHSCORES')).toEqual([
      'm-1',
      '0',
      'm-2',
      '0',
    ]);
    // Past step 0, an admitted run is not its admitter's to drive: it is due at once, for any
    // worker, even where the mark's own due entry is gone.
    await admin.zrem(`${P}:due`, 'm-1', 'm-2');
    expect(await admit()).toEqual([]);
    const after = await counts();
    expect(after).toEqual({
      key: '1',
      active: [expect.stringMatching(/^m-[12]$/)],
      waiting: 1,
      due: after.active,
    });
    // `{P}` loses that admission; the run's hash keeps it, so the healing counts it again.
    await loseSince();
    await admin.set(`${P}:indexed`, 'e'.repeat(40));
    expect(await counts()).toEqual(after);
  });

  it('a run a worker took over before its admitter kept the admission (it died in between) stays counted when `{P}` loses that admission: the worker holds it', async () => {
    const { store, P } = await openWithRun({
      queue: 'cq',
      runId: 'c-1',
      key: 'k',
    });
    const loseSince = await tenantNow(P);
    const hash = `{${P.slice(1, -1)}:c-1}:run`;
    await admitFrom(store, 'cq', {
      perKey: 1,
      owner: 'worker-a',
      leaseExpiresAt: Date.now() - 1,
    });
    await admin.hdel(hash, 'admission'); // worker-a died before keeping it
    // worker-b takes the run over and is in its first call.
    let entered!: () => void;
    let release!: () => void;
    const inCall = new Promise<void>((r) => (entered = r));
    const held = new Promise<void>((r) => (release = r));
    const b = new FlowRunner(
      executorFor([], 'b', {
        onTool: async () => {
          entered();
          await held;
        },
      }),
      { checkpoints: store, checkpointKey: KEY, workerId: 'worker-b' },
    );
    const driving = b.recover(ticketsFlow(), 'c-1');
    await inCall;
    expect(await admin.hmget(hash, 'step', 'owner', 'admission')).toEqual([
      '1',
      'worker-b',
      null,
    ]);
    // `{P}` loses the admission.
    await loseSince();
    await admin.set(`${P}:indexed`, 'f'.repeat(40));
    await store.listDue({ now: Date.now() });
    expect({
      active: await admin.zrange(`${P}:q:cq:active`, '0', '-1'),
      key: await admin.hget(`${P}:q:cq:keys`, 'k'),
    }).toEqual({ active: ['c-1'], key: '1' });
    release();
    expect((await driving).status).toBe('done');
    b.close();
  });

  it.each([
    [
      'that ended meanwhile (its release lost too): it is queued again',
      false,
      false,
    ],
    [
      'whose end was lost too (its hash on the failed master): it is queued again',
      true,
      false,
    ],
    [
      'that ended meanwhile, the run admitted before the loss: it is counted again',
      false,
      true,
    ],
  ])(
    'a run whose enqueue `{P}` lost, its dedupe key still naming a run %s, with its key',
    async (_, rolledBack, admittedBefore) => {
      // `{P}` as it was with d-1 admitted; d-1 ends, freeing the key, and d-2 takes it.
      let loseSince!: () => Promise<void>;
      const { store, P } = await keyHandedOn(
        'dq',
        'order-7',
        ['d-1', 'd-2'],
        async (P) => void (loseSince = await tenantNow(P)),
      );
      await sleep(50); // the unawaited write that keeps d-2's placement in its hash
      const admitD2 = () => admitFrom(store, 'dq');
      if (admittedBefore)
        expect((await admitD2()).map((h) => h.runId)).toEqual(['d-2']);
      // `{P}` loses all of it: the key names d-1 again, and d-2 is on no queue.
      await loseSince();
      if (rolledBack)
        await admin.hset(`{${P.slice(1, -1)}:d-1}:run`, 'status', 'running');
      await admin.set(`${P}:indexed`, 'f'.repeat(40));
      await store.listDue({ now: Date.now() }); // heals
      expect(await admin.hget(`${P}:q:dq:dedupe`, 'order-7')).toBe('d-2');
      expect((await admitD2()).map((h) => h.runId)).toEqual(
        admittedBefore ? [] : ['d-2'],
      );
      expect(await admin.zscore(`${P}:q:dq:active`, 'd-2')).not.toBeNull();
    },
  );

  it('a healing that read a run before another look’s healing put it back does nothing to it: the key stays with the live run that took it since', async () => {
    const { store, client, P } = await keyHandedOn('hq', 'order-9', [
      's-1',
      's-2',
    ]);
    const prefix = P.slice(1, -1);
    const admit = () => admitFrom(store, 'hq');
    // The late healing's enqueue of s-1, as it read it, and again with the holder it then finds.
    const placement = await admin.hget(`{${prefix}:s-1}:run`, 'placement');
    for (const seen of ['', 's-2'])
      expect(
        await storeScript(
          client() as unknown as RedisClient,
          'aaEnqueue',
          new RedisKeys(prefix).enqueue('hq'),
          ['s-1', 'hq', 'order-9', seen, placement!, '0'.repeat(16), '1'],
        ),
      ).toEqual(['ok']);
    expect(await admin.hget(`${P}:q:hq:dedupe`, 'order-9')).toBe('s-2');
    expect((await admit()).map((h) => h.runId)).toEqual(['s-2']);
  });

  it('an admitter whose admission is kept later than the bound does not drive the run: it stays counted, and is released for the next look of any worker', async () => {
    const { store, client, P } = await openWithRun({
      queue: 'sq',
      runId: 'y-1',
    });
    // The write that keeps the admission in the run's hash is slow.
    type Command = (...args: unknown[]) => Promise<unknown>;
    const slow = client() as unknown as Record<string, Command>;
    const keep = slow.aaAdmission!;
    slow.aaAdmission = async (...args) => {
      await sleep(TRACE_MS + 200);
      return keep.apply(slow, args);
    };
    const lease = Date.now() + LEASE_MS;
    const admitted = await store.admit({
      queue: 'sq',
      now: Date.now() + 1000,
      limit: 10,
      concurrency: 5,
      owner: 'worker-slow',
      leaseExpiresAt: lease,
    });
    expect(admitted).toEqual([]);
    const hash = `{${P.slice(1, -1)}:y-1}:run`;
    expect(await admin.hget(hash, 'admission')).toBe(`${lease}|worker-slow`);
    expect(await admin.zscore(`${P}:q:sq:active`, 'y-1')).not.toBeNull();
    expect(await admin.zscore(`${P}:due`, 'y-1')).toBe('0');
  });
});
