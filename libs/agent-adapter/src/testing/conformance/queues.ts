import type { CheckpointStore } from '../../exec/checkpoints/checkpoint-store';
import { assert, equal } from './check';
import { cp, uid, type SuiteContext } from './context';

/** Queues (`enqueue`, `admit`): waiting runs, admission order, limits and deduplication. */
export function describeQueues({ describe, it, make }: SuiteContext): void {
  const ids = (heads: Array<{ runId: string }>) => heads.map((h) => h.runId);
  /** Ends a run (a checkpoint after its claim): it leaves its queue's counts. */
  const end = async (store: CheckpointStore, runId: string, flow: string) => {
    await store.save(cp(runId, 1, { flow, segment: 2, status: 'done' }), {
      expectCalls: 0,
    });
  };

  describe('queues (enqueue, admit)', () => {
    it('a waiting run is stored but neither due nor unfinished until admitted; then it is due at once', async () => {
      const store = await make();
      const [flow, queue, id] = [uid('flow'), uid('q'), uid('run')];
      const now = Date.now();
      equal(
        await store.enqueue(cp(id, 0, { flow }), { queue, availableAt: now }),
        { runId: id, created: true },
      );
      const head = await store.head(id);
      assert.strictEqual(head?.status, 'running');
      assert.strictEqual(head?.queue?.name, queue);
      assert.strictEqual(head?.queue?.availableAt, now);
      assert.strictEqual(head?.queue?.admittedAt, undefined);
      equal(ids(await store.listDue({ now: now + 60_000, flows: [flow] })), []);
      equal(ids(await store.listUnfinished(flow)), []);
      assert.ok((await store.latest(id))?.sealed, 'its step 0 is stored');

      const admitted = await store.admit({ queue, now: now + 1, limit: 10 });
      equal(ids(admitted), [id]);
      assert.strictEqual(admitted[0]?.queue?.admittedAt, now + 1);
      assert.strictEqual(admitted[0]?.queue?.availableAt, undefined);
      equal(ids(await store.listDue({ now: now + 2, flows: [flow] })), [id]);
      equal(ids(await store.listUnfinished(flow)), [id]);
      equal(await store.admit({ queue, now: now + 2, limit: 10 }), []);
      // The claim that takes it keeps its place on the queue (it counts until it ends).
      await store.save(cp(id, 1, { flow, segment: 2 }), {
        expectCalls: 0,
        owner: 'w1',
        leaseExpiresAt: now + 60_000,
      });
      assert.strictEqual((await store.head(id))?.queue?.admittedAt, now + 1);
    });

    it("an admitter's lease keeps its runs from other workers' due work until it expires", async () => {
      const store = await make();
      const [flow, queue, id] = [uid('flow'), uid('q'), uid('run')];
      const now = Date.now();
      await store.enqueue(cp(id, 0, { flow }), { queue, availableAt: now });
      const admitted = await store.admit({
        queue,
        now,
        limit: 10,
        owner: 'w1',
        leaseExpiresAt: now + 5_000,
      });
      equal(ids(admitted), [id]);
      equal(ids(await store.listDue({ now: now + 1, flows: [flow] })), []);
      equal(ids(await store.listDue({ now: now + 6_000, flows: [flow] })), [
        id,
      ]);
      // It counts as admitted meanwhile.
      equal(await store.admit({ queue, now, limit: 10, concurrency: 1 }), []);
    });

    it('admits by priority (lower first), then availability, then enqueue order; a delayed run waits for its time', async () => {
      const store = await make();
      const [flow, queue] = [uid('flow'), uid('q')];
      const t = 1_000_000;
      const [a, b, c, d, late] = ['a', 'b', 'c', 'd', 'late'].map(uid);
      const put = (id: string, priority: number, availableAt: number) =>
        store.enqueue(cp(id, 0, { flow }), { queue, priority, availableAt });
      await put(a as string, 5, t);
      await put(b as string, 1, t + 2);
      await put(c as string, 1, t + 1);
      await put(d as string, 5, t);
      await put(late as string, 0, t + 500);
      equal(ids(await store.admit({ queue, now: t + 10, limit: 3 })), [
        c,
        b,
        a,
      ]);
      equal(ids(await store.admit({ queue, now: t + 10, limit: 3 })), [d]);
      equal(ids(await store.admit({ queue, now: t + 499, limit: 3 })), []);
      equal(ids(await store.admit({ queue, now: t + 500, limit: 3 })), [late]);
      equal(
        ids(await store.admit({ queue: uid('other'), now: t + 500, limit: 3 })),
        [],
      );
    });

    it('concurrency counts admitted, unfinished runs (paused and sleeping ones too); an ended run frees its place', async () => {
      const store = await make();
      const [flow, queue] = [uid('flow'), uid('q')];
      const now = Date.now();
      const runs = Array.from({ length: 5 }, () => uid('run'));
      for (const id of runs)
        await store.enqueue(cp(id, 0, { flow }), { queue, availableAt: now });
      const look = () => store.admit({ queue, now, limit: 10, concurrency: 2 });
      equal(ids(await look()), runs.slice(0, 2));
      equal(await look(), []);
      // A paused run keeps its place.
      await store.save(
        cp(runs[0] as string, 1, { flow, segment: 2, status: 'paused' }),
        { expectCalls: 0 },
      );
      equal(await look(), []);
      await end(store, runs[1] as string, flow);
      equal(ids(await look()), [runs[2]]);
      // A sleeping run too.
      await store.save(
        cp(runs[2] as string, 1, { flow, segment: 2, status: 'sleeping' }),
        { expectCalls: 0, leaseExpiresAt: now + 60_000 },
      );
      equal(await look(), []);
      await store.save(
        cp(runs[0] as string, 2, { flow, segment: 2, status: 'done' }),
      );
      equal(ids(await look()), [runs[3]]);
    });

    it('a run admitted into a place is never stamped before the end of the run that freed it', async () => {
      const store = await make();
      const [flow, queue] = [uid('flow'), uid('q')];
      // The admitter read its clock a minute before the end landed (a slow look, a busy machine).
      const now = Date.now() - 60_000;
      const [a, b, c, d] = [uid('a'), uid('b'), uid('c'), uid('d')];
      const put = (id: string, key?: string) =>
        store.enqueue(cp(id, 0, { flow }), {
          queue,
          availableAt: now,
          ...(key !== undefined && { key }),
        });
      await put(a);
      await put(b);
      const look = () => store.admit({ queue, now, limit: 10, concurrency: 1 });
      const [first] = await look();
      assert.strictEqual(first?.runId, a, 'the first run');
      assert.strictEqual(first?.queue?.admittedAt, now, 'no end after now');
      await end(store, a, flow);
      const endedAt = (await store.head(a))?.updatedAt as number;
      assert.ok(endedAt > now, 'the end is later than the look');
      const [next] = await look();
      assert.strictEqual(next?.runId, b);
      const admittedAt = next?.queue?.admittedAt as number;
      assert.ok(
        admittedAt >= endedAt,
        `admitted at ${admittedAt}, before the end that freed its place (${endedAt})`,
      );
      assert.strictEqual((await store.head(b))?.queue?.admittedAt, admittedAt);
      // A per-key place likewise.
      await end(store, b, flow);
      await put(c, 'k');
      await put(d, 'k');
      const byKey = () => store.admit({ queue, now, limit: 1, perKey: 1 });
      equal(ids(await byKey()), [c]);
      await end(store, c, flow);
      const keyEnd = (await store.head(c))?.updatedAt as number;
      const [afterKey] = await byKey();
      assert.strictEqual(afterKey?.runId, d);
      assert.ok((afterKey?.queue?.admittedAt as number) >= keyEnd);
      // A look whose clock is past every end is stamped with its own time.
      await end(store, d, flow);
      const e = uid('e');
      await put(e);
      const later = Date.now() + 60_000;
      const [last] = await store.admit({
        queue,
        now: later,
        limit: 10,
        concurrency: 1,
      });
      assert.strictEqual(last?.queue?.admittedAt, later);
    });

    it('concurrent looks never admit past the limits', async () => {
      const store = await make();
      const [flow, queue] = [uid('flow'), uid('q')];
      const now = Date.now();
      for (let i = 0; i < 12; i++)
        await store.enqueue(cp(uid('run'), 0, { flow }), {
          queue,
          key: `k${i % 2}`,
          availableAt: now,
        });
      const looks = await Promise.all(
        Array.from({ length: 8 }, () =>
          store.admit({ queue, now, limit: 10, concurrency: 3, perKey: 2 }),
        ),
      );
      const admitted = looks.flat();
      assert.strictEqual(admitted.length, 3, 'the global limit');
      const perKey = new Map<string, number>();
      for (const h of admitted) {
        const key = h.queue?.key as string;
        perKey.set(key, (perKey.get(key) ?? 0) + 1);
      }
      assert.ok(
        [...perKey.values()].every((n) => n <= 2),
        'the per-key limit',
      );
      assert.strictEqual(new Set(ids(admitted)).size, 3, 'each run once');
    });

    it('perKey limits each key and not runs without one; a saturated key does not hold back the others', async () => {
      const store = await make();
      const [flow, queue] = [uid('flow'), uid('q')];
      const now = Date.now();
      const put = async (key?: string) => {
        const id = uid('run');
        await store.enqueue(cp(id, 0, { flow }), {
          queue,
          availableAt: now,
          ...(key !== undefined && { key }),
        });
        return id;
      };
      const [a1, a2, a3, b1, n1, n2] = [
        await put('a'),
        await put('a'),
        await put('a'),
        await put('b'),
        await put(),
        await put(),
      ];
      const look = () => store.admit({ queue, now, limit: 10, perKey: 1 });
      equal(ids(await look()).sort(), [a1, b1, n1, n2].sort());
      equal(await look(), []);
      await end(store, a1, flow);
      equal(ids(await look()), [a2]);
      void a3;
    });

    it('a rate limit admits at most n per interval, counting ended runs too', async () => {
      const store = await make();
      const [flow, queue] = [uid('flow'), uid('q')];
      const t = 5_000_000;
      const runs = Array.from({ length: 5 }, () => uid('run'));
      for (const id of runs)
        await store.enqueue(cp(id, 0, { flow }), { queue, availableAt: t });
      const rate = { limit: 2, intervalMs: 1_000 };
      const look = (now: number) =>
        store.admit({ queue, now, limit: 10, rate });
      equal(ids(await look(t)), runs.slice(0, 2));
      await end(store, runs[0] as string, flow);
      equal(await look(t + 999), []); // both still in the window
      equal(ids(await look(t + 1_000)), runs.slice(2, 4));
      equal(await look(t + 1_500), []);
    });

    it('a dedupe key holds one unfinished run per queue: 50 enqueues at once make one run; after it ends, a new one', async () => {
      const store = await make();
      const [flow, queue] = [uid('flow'), uid('q')];
      const now = Date.now();
      const dedupeKey = uid('order');
      const results = await Promise.all(
        Array.from({ length: 50 }, () =>
          store.enqueue(cp(uid('run'), 0, { flow }), {
            queue,
            dedupeKey,
            availableAt: now,
          }),
        ),
      );
      const [first] = results.filter((r) => r.created);
      assert.strictEqual(results.filter((r) => r.created).length, 1);
      assert.ok(results.every((r) => r.runId === first?.runId));
      const firstId = first?.runId as string;
      const stored = (await store.list({ flow, limit: 100 })).runs;
      equal(ids(stored), [firstId]);
      // The same key on another queue is another run.
      const elsewhere = await store.enqueue(cp(uid('run'), 0, { flow }), {
        queue: uid('q2'),
        dedupeKey,
        availableAt: now,
      });
      assert.strictEqual(elsewhere.created, true);
      // Admitted, it still holds the key; ended, it does not.
      await store.admit({ queue, now, limit: 10 });
      const again = cp(uid('run'), 0, { flow });
      equal(
        await store.enqueue(again, { queue, dedupeKey, availableAt: now }),
        { runId: firstId, created: false },
      );
      await end(store, firstId, flow);
      equal(
        await store.enqueue(again, { queue, dedupeKey, availableAt: now }),
        { runId: again.runId, created: true },
      );
    });

    it('an enqueue of a stored run id is refused and changes nothing', async () => {
      const store = await make();
      const [flow, queue, id] = [uid('flow'), uid('q'), uid('run')];
      const now = Date.now();
      await store.save(cp(id, 0, { flow }), { owner: 'w1', leaseExpiresAt: 1 });
      await assert.rejects(
        store.enqueue(cp(id, 0, { flow }), { queue, availableAt: now }),
        { name: 'CheckpointConflict' },
      );
      const head = await store.head(id);
      assert.strictEqual(head?.queue, undefined);
      equal(ids(await store.listDue({ now, flows: [flow] })), [id]);
      equal(await store.admit({ queue, now, limit: 10 }), []);
    });

    it('a waiting run ended by an operator (cancelled) is never admitted', async () => {
      const store = await make();
      const [flow, queue, id] = [uid('flow'), uid('q'), uid('run')];
      const now = Date.now();
      await store.enqueue(cp(id, 0, { flow }), { queue, availableAt: now });
      await store.save(cp(id, 1, { flow, segment: 2, status: 'failed' }), {
        expectCalls: 0,
      });
      equal(await store.admit({ queue, now, limit: 10 }), []);
      equal(ids(await store.listDue({ now, flows: [flow] })), []);
    });
  });
}
