import { assert, equal } from './check';
import { cp, uid, type SuiteContext } from './context';

/** Due work (`listDue`): the runs a worker should take over, and how writes move them. */
export function describeDueWork({ describe, it, make }: SuiteContext): void {
  describe('due work (listDue)', () => {
    it('running runs whose lease expired or was never set, most overdue first; not paused, ended or live ones; by flow, limited', async () => {
      const store = await make();
      const [flow, other] = [uid('flow'), uid('other')];
      const now = 50_000;
      const ids = {
        expiredLate: uid('a'),
        expiredEarly: uid('b'),
        noLease: uid('c'),
        live: uid('d'),
        paused: uid('e'),
        done: uid('f'),
        otherFlow: uid('g'),
      };
      const lease = (at: number) => ({ owner: 'w1', leaseExpiresAt: at });
      await store.save(cp(ids.expiredLate, 0, { flow }), lease(40_000));
      await store.save(cp(ids.expiredEarly, 0, { flow }), lease(10_000));
      await store.save(cp(ids.noLease, 0, { flow }));
      await store.save(cp(ids.live, 0, { flow }), lease(90_000));
      await store.save(cp(ids.paused, 0, { flow }), lease(1_000));
      await store.save(
        cp(ids.paused, 1, { flow, status: 'paused' }),
        lease(1_000),
      );
      await store.save(cp(ids.done, 0, { flow }), lease(1_000));
      await store.save(cp(ids.done, 1, { flow, status: 'done' }), lease(1_000));
      await store.save(cp(ids.otherFlow, 0, { flow: other }), lease(1_000));

      const due = async (query: { flows?: string[]; limit?: number } = {}) =>
        (await store.listDue({ now, ...query })).map((h) => h.runId);
      equal(await due({ flows: [flow] }), [
        ids.noLease,
        ids.expiredEarly,
        ids.expiredLate,
      ]);
      equal(await due({ flows: [flow], limit: 2 }), [
        ids.noLease,
        ids.expiredEarly,
      ]);
      equal(await due({ flows: [other] }), [ids.otherFlow]);
      equal(
        (await due()).sort(),
        [ids.noLease, ids.expiredEarly, ids.expiredLate, ids.otherFlow].sort(),
      );
      equal(await due({ flows: [] }), []);
      const [head] = await store.listDue({ now, flows: [flow], limit: 1 });
      assert.strictEqual(head?.status, 'running');
      assert.strictEqual(head?.flow, flow);
    });

    it('a renewal takes a run out of due work, a release (lease 0) puts it back at once; a claim with a lease takes it out, a pause too, a resume puts it back', async () => {
      const store = await make();
      const flow = uid('flow');
      const id = uid('run');
      const t0 = Date.now();
      const isDue = async (at: number) =>
        (await store.listDue({ now: at, flows: [flow] })).some(
          (h) => h.runId === id,
        );
      await store.save(cp(id, 0, { flow }), {
        owner: 'w1',
        leaseExpiresAt: t0 + 1_000,
      });
      assert.strictEqual(await isDue(t0), false);
      assert.strictEqual(await isDue(t0 + 2_000), true);

      await store.renewLeases('w1', t0 + 60_000, [id]);
      assert.strictEqual(await isDue(t0 + 2_000), false, 'renewed');
      assert.strictEqual(await isDue(t0 + 61_000), true);

      await store.renewLeases('w1', 0, [id]);
      assert.strictEqual(await isDue(t0), true, 'released');

      // Another worker claims it (the next segment, with the count it saw).
      await store.save(cp(id, 1, { flow, segment: 2 }), {
        owner: 'w2',
        leaseExpiresAt: t0 + 30_000,
        expectCalls: 0,
      });
      assert.strictEqual(await isDue(t0 + 2_000), false, 'claimed');
      assert.strictEqual(await isDue(t0 + 31_000), true);

      await store.save(cp(id, 2, { flow, segment: 2, status: 'paused' }), {
        owner: 'w2',
        leaseExpiresAt: t0 + 30_000,
      });
      assert.strictEqual(await isDue(t0 + 31_000), false, 'paused');
      // The resume: a new segment, like a claim.
      await store.save(cp(id, 3, { flow, segment: 3 }), {
        owner: 'w3',
        leaseExpiresAt: t0 + 40_000,
        expectCalls: 0,
      });
      assert.strictEqual(await isDue(t0 + 31_000), false, 'resumed, leased');
      assert.strictEqual(await isDue(t0 + 41_000), true, 'resumed, expired');

      await store.save(cp(id, 4, { flow, segment: 3, status: 'done' }), {
        owner: 'w3',
        leaseExpiresAt: t0 + 40_000,
      });
      assert.strictEqual(await isDue(t0 + 41_000), false, 'ended');
      await store.delete(id);
      assert.strictEqual(await isDue(t0 + 41_000), false, 'deleted');
    });
  });
}
