import { scanKeys } from '../utils/redis-keys';
import { createServer, connect, type Server, type Socket } from 'node:net';
import calculateSlot from 'cluster-key-slot';
import Redis from 'ioredis';
import {
  CheckpointConflict,
  RedisCheckpointStore,
  type CallRecord,
  type CheckpointRecord,
  type CheckpointStore,
  type RedisCheckpointStoreOptions,
} from 'agent-adapter';
import { describeCheckpointStoreConformance } from 'agent-adapter/testing';
import { RedisKeys } from 'agent-adapter/exec/checkpoints/redis/redis.layout';
import { tamperFuzz } from '../../tools/tamper/tamper-fuzz';
import { redisRaw } from './redis.fixtures';
import { REDIS_URL, describeWithService, suiteId } from '../utils/services';

describeWithService('redis', 'RedisCheckpointStore', () => {
  const prefixes: string[] = [];
  const stores: RedisCheckpointStore[] = [];
  let admin: Redis;

  beforeAll(() => {
    admin = new Redis(REDIS_URL);
  });

  afterAll(async () => {
    await Promise.all(stores.map((s) => s.close()));
    for (const prefix of prefixes) {
      const keys = await scan(`*${prefix}*`);
      if (keys.length) await admin.del(...keys);
    }
    await admin.quit();
  });

  /** A store in a fresh namespace, with the client it owns (for killing its connection). */
  function open(options: RedisCheckpointStoreOptions = {}) {
    const prefix = suiteId('aa');
    prefixes.push(prefix);
    let client: Redis | undefined;
    const store = new RedisCheckpointStore(
      () => (client = new Redis(REDIS_URL)),
      { prefix, ...options },
    );
    return { store, client: client!, prefix };
  }

  const scan = (pattern: string) => scanKeys(admin, pattern);

  const tag = (store: CheckpointStore, runId: string) =>
    `{${(store as RedisCheckpointStore).prefix}:${runId}}`;
  const runKeys = (store: CheckpointStore, runId: string) =>
    scan(`${tag(store, runId).replace(/[[\]*?\\]/g, '\\$&')}*`);

  const fixture = {
    name: 'redis',
    make: async () => open().store,
    raw: redisRaw(() => admin, tag),
  };
  describeCheckpointStoreConformance(fixture);
  tamperFuzz(fixture);

  describe('redis specifics', () => {
    let n = 0;
    const uid = (p = 'run') => `${p}-${Date.now().toString(36)}-${++n}`;
    const cp = (
      runId: string,
      step: number,
      over: Partial<CheckpointRecord> = {},
    ): CheckpointRecord => ({
      runId,
      step,
      flow: 'f',
      status: 'running',
      segment: 1,
      sealed: `cp-${runId}-${step}`,
      ...over,
    });
    const call = (
      runId: string,
      seq: number,
      over: Partial<CallRecord> = {},
    ): CallRecord => ({
      runId,
      segment: 1,
      seq,
      superstep: 0,
      sealed: `call-${runId}-${seq}`,
      ...over,
    });
    const make = (options: RedisCheckpointStoreOptions = {}) => {
      const opened = open(options);
      stores.push(opened.store);
      return opened;
    };
    const ttls = async (keys: string[]) =>
      Promise.all(keys.map((k) => admin.ttl(k)));

    it('every key of a run gets the TTL on each write, loses it while paused, and gets it back', async () => {
      const { store } = make({ ttlSeconds: 60 });
      const id = uid();
      await store.save(cp(id, 0));
      await store.recordCall(id, 1, [call(id, 1)]);
      await store.save(cp(id, 1), { calls: [call(id, 2)] });
      await store.recordCall(id, 1, [call(id, 1, { superstep: 1 })]);
      const keys = await runKeys(store, id);
      expect(keys.sort()).toEqual(
        ['index', 'run'].map((k) => `${tag(store, id)}:${k}`),
      );
      for (const ttl of await ttls(keys)) expect(ttl).toBeGreaterThan(0);

      await store.save(cp(id, 2, { status: 'paused' }));
      expect(await ttls(keys)).toEqual(keys.map(() => -1));

      await store.save(cp(id, 3));
      for (const ttl of await ttls(keys)) expect(ttl).toBeGreaterThan(50);
      await store.save(cp(id, 4, { status: 'done' }));
      for (const ttl of await ttls(keys)) expect(ttl).toBeGreaterThan(50);
    });

    it('a long run keeps two keys, so a write refreshes a fixed number of TTLs; each lives ttl after the last write', async () => {
      const { store } = make({ ttlSeconds: 3600 });
      const id = uid();
      await store.save(cp(id, 0));
      for (let s = 0; s < 60; s++) {
        await store.recordCall(id, 1, [call(id, 1, { superstep: s })]);
        await store.save(cp(id, s + 1), {
          calls: [call(id, 2, { superstep: s })],
        });
      }
      const keys = await runKeys(store, id);
      expect(keys.length).toBe(2);
      // Not one key left with the TTL of an earlier write (EXPIRE rounds down to whole seconds).
      for (const ttl of await ttls(keys)) expect(ttl).toBeGreaterThan(3590);
      // Each superstep's records are still read on their own, first and last alike.
      for (const s of [0, 59])
        expect((await store.calls(id, s)).map((c) => c.sealed)).toEqual([
          `call-${id}-1`,
          `call-${id}-2`,
        ]);
      expect((await store.history(id)).calls).toHaveLength(120);
    });

    it('without ttlSeconds nothing expires', async () => {
      const { store } = make();
      const id = uid();
      await store.save(cp(id, 0));
      await store.recordCall(id, 1, [call(id, 1)]);
      const keys = await runKeys(store, id);
      expect(keys.length).toBe(2);
      expect(await ttls(keys)).toEqual(keys.map(() => -1));
    });

    it('keys really expire: the run is gone and listUnfinished no longer returns it', async () => {
      const { store } = make({ ttlSeconds: 1 });
      const flow = uid('flow');
      const id = uid();
      await store.save(cp(id, 0, { flow }));
      await store.recordCall(id, 1, [call(id, 1)]);
      expect((await store.listUnfinished(flow)).map((h) => h.runId)).toEqual([
        id,
      ]);
      await new Promise((r) => setTimeout(r, 2200));
      expect(await runKeys(store, id)).toEqual([]);
      expect(await store.latest(id)).toBeUndefined();
      expect(await store.head(id)).toBeUndefined();
      expect(await store.listUnfinished(flow)).toEqual([]);
      expect((await store.list({ flow })).runs).toEqual([]);
      await store.save(cp(id, 0, { flow, sealed: 'again' }));
      expect(await store.calls(id, 0)).toEqual([]);
    });

    it('all keys of one run map to one cluster slot, and so do the index keys of one prefix', async () => {
      const { store, prefix } = make();
      const id = uid();
      await store.save(cp(id, 0), { owner: 'w1', leaseExpiresAt: Date.now() });
      await store.recordCall(id, 1, [
        call(id, 1),
        call(id, 2, { superstep: 3 }),
      ]);
      const keys = await runKeys(store, id);
      expect(keys.length).toBe(2);
      expect(new Set(keys.map((k) => calculateSlot(k))).size).toBe(1);
      const index = await scan(`{${prefix}}:*`);
      expect(index.length).toBeGreaterThanOrEqual(4);
      expect(new Set(index.map((k) => calculateSlot(k))).size).toBe(1);
    });

    it('the owner lease key renews the runs the owner drives, and only while the owner holds them', async () => {
      const { store } = make();
      const [a, b] = [uid('a'), uid('b')];
      await store.save(cp(a, 0), { owner: 'w1', leaseExpiresAt: 1_000 });
      await store.save(cp(b, 0), { owner: 'w1', leaseExpiresAt: 1_000 });
      expect(await store.renewLeases('w1', 50_000, [a, b])).toBe(2);
      expect((await store.head(a))?.leaseExpiresAt).toBe(50_000);
      await store.save(cp(a, 1, { segment: 2 }), {
        owner: 'w2',
        leaseExpiresAt: 2_000,
      });
      expect((await store.head(a))?.leaseExpiresAt).toBe(2_000);
      expect(await store.renewLeases('w1', 60_000, [a, b])).toBe(1); // a is w2's now
      expect((await store.head(a))?.leaseExpiresAt).toBe(2_000);
      expect((await store.head(b))?.leaseExpiresAt).toBe(60_000);
      // b no longer driven by w1: its lease falls back to the one saved with its checkpoint.
      expect(await store.renewLeases('w1', 70_000, [])).toBe(0);
      expect((await store.head(b))?.leaseExpiresAt).toBe(1_000);
    });

    it('listUnfinished keeps an index entry whose step 0 may be in flight, and cleans stale ones', async () => {
      const { store, prefix } = make();
      const flow = uid('flow');
      const unfinished = `{${prefix}}:unfinished:${flow}`;
      const born = `{${prefix}}:born`;
      // A crash between the index write and the save script, just now and long ago:
      await admin.zadd(unfinished, 0, 'fresh', 0, 'old');
      await admin.hset(born, 'fresh', Date.now(), 'old', Date.now() - 120_000);
      // An ended run whose worker died before it removed the index entry:
      const ended = uid('ended');
      await store.save(cp(ended, 0, { flow }));
      await store.save(cp(ended, 1, { flow, status: 'failed' }));
      await admin.zadd(unfinished, 0, ended);
      const live = uid('live');
      await store.save(cp(live, 0, { flow }));

      expect((await store.listUnfinished(flow)).map((h) => h.runId)).toEqual([
        live,
      ]);
      expect((await admin.zrange(unfinished, 0, '-1')).sort()).toEqual(
        ['fresh', live].sort(),
      );
      // The creation that was in flight lands: recovery finds it.
      await store.save(cp('fresh', 0, { flow }));
      expect(
        (await store.listUnfinished(flow)).map((h) => h.runId).sort(),
      ).toEqual(['fresh', live].sort());
    });

    it("on one server a run's first save makes its index entry and its last drops it, each in its one script; a refused creation makes none", async () => {
      const { store, client, prefix } = make();
      const flow = uid('flow');
      const unfinished = `{${prefix}}:unfinished:${flow}`;
      await client.ping(); // connected: its handshake's commands are not counted
      const sent: string[] = [];
      const send = client.sendCommand.bind(client);
      client.sendCommand = (command, stream) => {
        sent.push(command.name);
        return send(command, stream);
      };
      const id = uid();
      await store.save(cp(id, 0, { flow }), { leaseExpiresAt: 5_000 });
      expect(sent).toEqual(['evalsha']);
      // Listed, due at its lease, placed in the list of runs (the place kept in its hash too).
      expect(await admin.zscore(unfinished, id)).toBe('0');
      expect(await admin.zscore(`{${prefix}}:due`, id)).toBe('5000');
      const place = await admin.zscore(`{${prefix}}:runs`, id);
      expect(place).not.toBeNull();
      expect(await admin.hget(`{${prefix}:${id}}:run`, 'created')).toBe(place);
      expect(Number(await admin.hget(`{${prefix}}:born`, id))).toBeGreaterThan(
        Date.now() - 60_000,
      );
      expect((await store.listUnfinished(flow)).map((h) => h.runId)).toEqual([
        id,
      ]);
      // A running step leaves the entry; the end drops it in the same script.
      await store.save(cp(id, 1, { flow }), { leaseExpiresAt: 6_000 });
      expect(await admin.zscore(unfinished, id)).toBe('0');
      sent.length = 0;
      await store.save(cp(id, 2, { flow, status: 'done' }));
      expect(sent).toEqual(['evalsha']);
      expect(await admin.zscore(unfinished, id)).toBeNull();
      expect(await admin.zscore(`{${prefix}}:due`, id)).toBeNull();
      // Created again: refused, and no entry comes back.
      await expect(store.save(cp(id, 0, { flow }))).rejects.toThrow(
        CheckpointConflict,
      );
      expect(await admin.zscore(unfinished, id)).toBeNull();
      expect(await admin.zscore(`{${prefix}}:due`, id)).toBeNull();
      expect(await admin.zscore(`{${prefix}}:runs`, id)).toBe(place);
    });

    it('a killed connection is survived; the write in flight is applied whole or not at all', async () => {
      const { store, client } = make({ ttlSeconds: 60 });
      const id = uid();
      await store.save(cp(id, 0));
      for (let step = 1; step <= 3; step++) {
        const clientId = await client.client('ID');
        const inflight = store
          .save(cp(id, step), {
            calls: [call(id, step, { superstep: step - 1 })],
          })
          .then(
            () => 'ok',
            (e: unknown) => e,
          );
        await admin.client('KILL', 'ID', String(clientId));
        const outcome = await inflight;
        const head = (await store.head(id))!;
        const history = await store.history(id);
        expect(history.checkpoints.map((c) => c.step)).toEqual(
          Array.from({ length: head.step + 1 }, (_, i) => i),
        );
        expect(history.calls.length).toBe(head.step);
        expect(head.calls).toBe(head.step);
        expect((await store.latest(id))?.step).toBe(head.step);
        if (outcome === 'ok') expect(head.step).toBe(step);
        else if (head.step < step)
          await store.save(cp(id, step), {
            calls: [call(id, step, { superstep: step - 1 })],
          });
      }
      // Killed while idle: the next save waits for the reconnect and succeeds.
      await admin.client('KILL', 'ID', String(await client.client('ID')));
      await store.save(cp(id, 4));
      expect((await store.head(id))?.step).toBe(4);
    });

    it('a write whose reply is lost is resent by ioredis and recognised as already applied', async () => {
      const proxy = await lossyProxy(new URL(REDIS_URL));
      const prefix = suiteId('aa');
      prefixes.push(prefix);
      const store = new RedisCheckpointStore(() => new Redis(proxy.url), {
        prefix,
      });
      try {
        const id = uid();
        await store.save(cp(id, 0));
        proxy.dropNextReply();
        await store.save(cp(id, 1)); // applied, reply dropped, connection cut, resent
        proxy.dropNextReply();
        await store.recordCall(id, 1, [call(id, 1)]);
        expect(proxy.dropped).toBe(2);
        expect(
          (await store.history(id)).checkpoints.map((c) => c.step),
        ).toEqual([0, 1]);
        expect((await store.head(id))?.calls).toBe(1);
        await store.save(cp(id, 2));
      } finally {
        await store.close();
        await proxy.close();
      }
    });

    it('refuses a prefix or run id that would break the hash tag', async () => {
      expect(
        () =>
          new RedisCheckpointStore(
            () => new Redis(REDIS_URL, { lazyConnect: true }),
            { prefix: 'a{b}' },
          ),
      ).toThrow(/prefix/);
      const { store } = make();
      await expect(store.save(cp('x{y}', 0))).rejects.toThrow(/run id/);
      await expect(store.recordCall('x}', 1, [])).rejects.toThrow(/run id/);
    });

    it('queues: an admission repairs an end its queue missed (a crash before the drop), at most once a second; a waiting run ended so is not admitted', async () => {
      const { store, prefix } = make();
      const q = new RedisKeys(prefix).queue('q');
      const now = Date.now();
      const [a, b, c] = [uid(), uid(), uid()];
      for (const id of [a, b, c])
        await store.enqueue(cp(id, 0), { queue: 'q', availableAt: now });
      const look = (concurrency: number, after: number) =>
        store.admit({ queue: 'q', now: now + after, limit: 10, concurrency });
      expect((await look(1, 0)).map((h) => h.runId)).toEqual([a]);
      // Ended in its hash, as by a save whose index drop never ran.
      await admin.hset(`${tag(store, a)}:run`, { status: 'done' });
      // Repaired at most once a second: still counted half a second later, not after a second.
      expect(await look(1, 500)).toEqual([]);
      expect((await look(1, 1_000)).map((h) => h.runId)).toEqual([b]);
      await admin.hset(`${tag(store, c)}:run`, { status: 'failed' });
      expect(await look(5, 2_000)).toEqual([]);
      expect(await admin.zrange(q.active, '0', '-1')).toEqual([b]);
      expect(
        (await store.listDue({ now: now + 1 })).map((h) => h.runId),
      ).toEqual([b]);
    });

    it('queues: a waiting run gets no TTL until it runs; a delete leaves no trace on its queue', async () => {
      const { store, prefix } = make({ ttlSeconds: 60 });
      const id = uid();
      const now = Date.now();
      await store.enqueue(cp(id, 0), {
        queue: 'q',
        key: 'k',
        dedupeKey: 'd',
        availableAt: now,
      });
      const [run] = await runKeys(store, id);
      expect(await admin.ttl(run!)).toBe(-1);
      await store.admit({ queue: 'q', now, limit: 1, perKey: 1 });
      await store.save(cp(id, 1, { segment: 2 }), { expectCalls: 0 });
      expect(await admin.ttl(run!)).toBeGreaterThan(50);
      expect(await scan(`{${prefix}}:q:*`)).not.toEqual([]);
      expect(await store.delete(id)).toBe(true);
      expect(await scan(`{${prefix}}:q:*`)).toEqual([]);
      expect(await admin.exists(new RedisKeys(prefix).queued)).toBe(0);
    });

    it('a sleeping run keeps no TTL while it sleeps, a renewal does not give it one, its wake claim does', async () => {
      const { store } = make({ ttlSeconds: 60 });
      const id = uid();
      await store.save(cp(id, 0), { owner: 'w1', leaseExpiresAt: 1_000 });
      await store.recordCall(id, 1, [call(id, 1)]);
      const keys = await runKeys(store, id);
      for (const ttl of await ttls(keys)) expect(ttl).toBeGreaterThan(0);
      await store.save(cp(id, 1, { status: 'sleeping' }), {
        owner: 'w1',
        leaseExpiresAt: Date.now() + 3_600_000,
      });
      expect(await ttls(keys)).toEqual(keys.map(() => -1));
      expect(await store.renewLeases('w1', Date.now() + 30_000, [id])).toBe(0);
      expect(await ttls(keys)).toEqual(keys.map(() => -1));
      await store.save(cp(id, 2, { segment: 2 }), {
        owner: 'w2',
        expectCalls: 1,
      });
      for (const ttl of await ttls(keys)) expect(ttl).toBeGreaterThan(50);
    });

    /**
     * Holds the store's next ZADD to `{P}:due` that `hold` picks until `release()`; `held` resolves
     * once it is held. Deterministic interleavings of a save and a renewal (redis.due.ts).
     */
    const holdZadd = (
      client: Redis,
      hold: (args: Array<string | number>) => boolean,
    ) => {
      type Zadd = (...args: Array<string | number>) => Promise<unknown>;
      const zadd = (client.zadd as unknown as Zadd).bind(client);
      let release!: () => void;
      let reached!: () => void;
      const gate = new Promise<void>((r) => (release = r));
      const held = new Promise<void>((r) => (reached = r));
      let once = true;
      (client as unknown as { zadd: Zadd }).zadd = async (...args) => {
        if (once && hold(args)) {
          once = false;
          reached();
          await gate;
        }
        return zadd(...args);
      };
      return { held, release };
    };

    it("a renewal whose raise lands after the sleep's own index write still leaves the run due at its wake time", async () => {
      const { store, client, prefix } = make();
      const due = new RedisKeys(prefix).due;
      const id = uid();
      const t0 = Date.now();
      await store.save(cp(id, 0), { owner: 'w1', leaseExpiresAt: t0 + 30_000 });
      const raise = holdZadd(client, (args) => args.includes('GT'));
      const renewing = store.renewLeases('w1', t0 + 60_000, [id]);
      await raise.held;
      await store.save(cp(id, 1, { status: 'sleeping' }), {
        owner: 'w1',
        leaseExpiresAt: t0 + 3_000,
      });
      expect(await admin.zscore(due, id)).toBe(String(t0 + 3_000));
      raise.release();
      expect(await renewing).toBe(0);
      expect(await admin.zscore(due, id)).toBe(String(t0 + 3_000));
      const dueAt = async (now: number) =>
        (await store.listDue({ now })).map((h) => h.runId);
      expect(await dueAt(t0 + 2_000)).toEqual([]);
      expect(await dueAt(t0 + 4_000)).toEqual([id]);
    });

    it("a sleep whose index write lands after another worker's claim of the run leaves it due by the claim's lease", async () => {
      const { store, client, prefix } = make();
      const other = new RedisCheckpointStore(() => new Redis(REDIS_URL), {
        prefix,
      });
      stores.push(other);
      const due = new RedisKeys(prefix).due;
      const id = uid();
      const t0 = Date.now();
      const wake = t0 + 3_600_000;
      await store.save(cp(id, 0), { owner: 'w1', leaseExpiresAt: t0 + 1_000 });
      const sleep = holdZadd(client, (args) => args[1] === wake);
      const sleeping = store.save(cp(id, 1, { status: 'sleeping' }), {
        owner: 'w1',
        leaseExpiresAt: wake,
      });
      await sleep.held;
      // Its script has run: another worker wakes the run early (an operator) and claims it.
      await other.save(cp(id, 2, { segment: 2 }), {
        owner: 'w2',
        leaseExpiresAt: t0 + 30_000,
        expectCalls: 0,
      });
      sleep.release();
      await sleeping;
      expect(Number(await admin.zscore(due, id))).toBeLessThanOrEqual(
        t0 + 30_000,
      );
      expect(
        (await store.listDue({ now: t0 + 31_000 })).map((h) => h.runId),
      ).toEqual([id]);
    });

    it('a look that drops a paused run or moves a sleeping one while another worker resumes it adds it back at the new lease', async () => {
      const { store, client, prefix } = make();
      const other = new RedisCheckpointStore(() => new Redis(REDIS_URL), {
        prefix,
      });
      stores.push(other);
      const [paused, asleep] = [uid('paused'), uid('asleep')];
      const t0 = Date.now();
      const wake = t0 + 3_600_000;
      for (const id of [paused, asleep])
        await store.save(cp(id, 0), { owner: 'w1', leaseExpiresAt: t0 });
      await store.save(cp(paused, 1, { status: 'paused' }), { owner: 'w1' });
      await store.save(cp(asleep, 1, { status: 'sleeping' }), {
        owner: 'w1',
        leaseExpiresAt: wake,
      });
      // The sleeping run's score as its crashed save left it: its old lease.
      await admin.zadd(new RedisKeys(prefix).due, t0, asleep);
      type Script = (...args: Array<string | number>) => Promise<unknown>;
      const commands = client as unknown as Record<string, Script>;
      const drop = commands.aaIndexDrop!.bind(client);
      let release!: () => void;
      const gate = new Promise<void>((r) => (release = r));
      let reached!: () => void;
      const held = new Promise<void>((r) => (reached = r));
      commands.aaIndexDrop = async (...args) => {
        reached();
        await gate;
        return drop(...args);
      };
      const raise = holdZadd(client, (args) => args[1] === 'XX');
      const look = store.listDue({ now: t0 + 1_000 });
      await Promise.all([held, raise.held]);
      // Both heads were read: a decision resumes one, an operator wakes the other.
      for (const id of [paused, asleep])
        await other.save(cp(id, 2, { segment: 2 }), {
          owner: 'w2',
          leaseExpiresAt: t0 + 30_000,
          expectCalls: 0,
        });
      release();
      raise.release();
      expect(await look).toEqual([]);
      expect(
        (await store.listDue({ now: t0 + 31_000 })).map((h) => h.runId).sort(),
      ).toEqual([paused, asleep].sort());
    });

    it('a duplicate call is refused with the out-of-order message, a cut-off one with the fenced message', async () => {
      const { store } = make();
      const id = uid();
      await store.save(cp(id, 0));
      await store.recordCall(id, 1, [call(id, 1)]);
      await expect(store.recordCall(id, 1, [call(id, 1)])).rejects.toThrow(
        /call record 1 of segment 1, superstep 0 does not come after record 1 of segment 1, superstep 0/,
      );
      await store.save(cp(id, 1, { segment: 2 }));
      const err = await store
        .recordCall(id, 1, [call(id, 2)])
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(CheckpointConflict);
      expect((err as Error).message).toMatch(
        /segment 1 was cut off \(the run's current segment is 2\)/,
      );
    });
  });
});

/**
 * A TCP proxy to Redis that can drop one reply and cut the connection, like a network failure
 * after the server applied a write but before the client heard back.
 */
async function lossyProxy(target: URL) {
  let drop = false;
  let dropped = 0;
  const sockets = new Set<Socket>();
  const server: Server = createServer((client) => {
    const upstream = connect(Number(target.port || 6379), target.hostname);
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('error', () => undefined);
      s.on('close', () => {
        sockets.delete(s);
        client.destroy();
        upstream.destroy();
      });
    }
    client.pipe(upstream);
    upstream.on('data', (reply: Buffer) => {
      if (!drop) return void client.write(reply);
      drop = false;
      dropped++;
      client.destroy();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return {
    url: `redis://127.0.0.1:${port}`,
    dropNextReply: () => void (drop = true),
    get dropped() {
      return dropped;
    },
    close: () => {
      for (const s of sockets) s.destroy();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
