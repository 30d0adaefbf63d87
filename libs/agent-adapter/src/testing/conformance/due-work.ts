import {
  CheckpointConflict,
  type RunStatus,
  type SaveOptions,
} from '../../index';
import { assert, equal, rejectsWith } from './check';
import { call, cp, uid, type SuiteContext } from './context';

/** Due work (`listDue`): the runs a worker should take over, and how writes move them. */
export function describeDueWork({ describe, it, make }: SuiteContext): void {
  describe('due work (listDue)', () => {
    it('running runs whose lease expired or was never set, sleeping runs whose wake time came or that have none, paused runs whose deadline passed, most overdue first; not paused without a deadline, ended or not yet due ones; by flow, limited', async () => {
      const store = await make();
      const [flow, other] = [uid('flow'), uid('other')];
      const now = 50_000;
      // The letters order the runs that are due at once (no due time): by run id.
      const ids = {
        expiredLate: uid('a'),
        expiredEarly: uid('b'),
        noLease: uid('c'),
        live: uid('d'),
        paused: uid('e'),
        done: uid('f'),
        otherFlow: uid('g'),
        sleepingNoTime: uid('h'),
        sleepingDue: uid('i'),
        sleepingLater: uid('j'),
        pausedLate: uid('k'),
        pausedLater: uid('l'),
      };
      const lease = (at: number) => ({ owner: 'w1', leaseExpiresAt: at });
      /** Step 0 leased, then step 1 in `status` with `next` (its due time, if any). */
      const twoSteps = async (
        id: string,
        status: RunStatus,
        next: SaveOptions,
      ) => {
        await store.save(cp(id, 0, { flow }), lease(1_000));
        await store.save(cp(id, 1, { flow, status }), next);
      };
      await store.save(cp(ids.expiredLate, 0, { flow }), lease(40_000));
      await store.save(cp(ids.expiredEarly, 0, { flow }), lease(10_000));
      await store.save(cp(ids.noLease, 0, { flow }));
      await store.save(cp(ids.live, 0, { flow }), lease(90_000));
      await twoSteps(ids.paused, 'paused', { owner: 'w1' });
      await twoSteps(ids.done, 'done', lease(1_000));
      await store.save(cp(ids.otherFlow, 0, { flow: other }), lease(1_000));
      await twoSteps(ids.sleepingNoTime, 'sleeping', { owner: 'w1' });
      await twoSteps(ids.sleepingDue, 'sleeping', lease(20_000));
      await twoSteps(ids.sleepingLater, 'sleeping', lease(50_000));
      await twoSteps(ids.pausedLate, 'paused', lease(30_000));
      await twoSteps(ids.pausedLater, 'paused', lease(70_000));

      const due = async (query: { flows?: string[]; limit?: number } = {}) =>
        (await store.listDue({ now, ...query })).map((h) => h.runId);
      const dueInFlow = [
        ids.noLease,
        ids.sleepingNoTime,
        ids.expiredEarly,
        ids.sleepingDue,
        ids.pausedLate,
        ids.expiredLate,
      ];
      equal(await due({ flows: [flow] }), dueInFlow);
      equal(await due({ flows: [flow], limit: 2 }), dueInFlow.slice(0, 2));
      equal(await due({ flows: [other] }), [ids.otherFlow]);
      equal((await due()).sort(), [...dueInFlow, ids.otherFlow].sort());
      equal(await due({ flows: [] }), []);
      const heads = await store.listDue({ now, flows: [flow] });
      equal(
        heads.map((h) => [h.status, h.flow]),
        [
          ['running', flow],
          ['sleeping', flow],
          ['running', flow],
          ['sleeping', flow],
          ['paused', flow],
          ['running', flow],
        ],
      );
      assert.strictEqual(heads[3]?.leaseExpiresAt, 20_000);
      assert.strictEqual(heads[4]?.leaseExpiresAt, 30_000);
      // Later, the ones not yet due are; the paused run without a deadline never is.
      const later = (
        await store.listDue({ now: 10_000_000_000, flows: [flow] })
      ).map((h) => h.runId);
      equal(
        later.sort(),
        [...dueInFlow, ids.live, ids.sleepingLater, ids.pausedLater].sort(),
      );
    });

    it('a renewal takes a run out of due work, a release (lease 0) puts it back at once; a claim with a lease takes it out, a pause without a deadline too, a resume puts it back', async () => {
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
      });
      assert.strictEqual(await isDue(t0 + 31_000), false, 'paused');
      assert.strictEqual(await isDue(t0 + 1e10), false, 'paused, ever');
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

    it("a paused run is due once its decision's deadline passes, never without one; its owner's renewals and releases after the pause change neither", async () => {
      const store = await make();
      const flow = uid('flow');
      const [id, open] = [uid('deadline'), uid('open')];
      const t0 = Date.now();
      const isDue = async (runId: string, at: number) =>
        (await store.listDue({ now: at, flows: [flow] })).some(
          (h) => h.runId === runId,
        );
      for (const runId of [id, open]) {
        await store.save(cp(runId, 0, { flow }), {
          owner: 'w1',
          leaseExpiresAt: t0 + 30_000,
        });
        // Renewed while it runs: the pause must undo the renewed lease too.
        assert.strictEqual(
          await store.renewLeases('w1', t0 + 60_000, [runId]),
          1,
        );
      }
      await store.save(cp(id, 1, { flow, status: 'paused' }), {
        owner: 'w1',
        leaseExpiresAt: t0 + 5_000,
      });
      await store.save(cp(open, 1, { flow, status: 'paused' }), {
        owner: 'w1',
      });
      const check = async (when: string) => {
        assert.strictEqual(await isDue(id, t0 + 4_000), false, when);
        assert.strictEqual(await isDue(id, t0 + 6_000), true, when);
        assert.strictEqual(await isDue(open, t0 + 1e10), false, when);
        const [deadline, waiting] = [
          await store.head(id),
          await store.head(open),
        ];
        assert.strictEqual(deadline?.status, 'paused');
        assert.strictEqual(deadline?.leaseExpiresAt, t0 + 5_000, when);
        assert.strictEqual(waiting?.leaseExpiresAt, undefined, when);
      };
      await check('paused');
      // The owner's renewal in flight when it paused: lands after, renews nothing.
      assert.strictEqual(
        await store.renewLeases('w1', t0 + 90_000, [id, open]),
        0,
      );
      await check('renewed after the pause');
      assert.strictEqual(await store.renewLeases('w1', 0, [id, open]), 0);
      await check('released after the pause');
      assert.strictEqual(await isDue(open, t0), false, 'released, paused');
    });

    it('a sleeping run is due at its wake time, not before (at once without one); renewals and releases after the sleep leave it; it is unfinished, records no call, and its wake claim leases it like any running run', async () => {
      const store = await make();
      const flow = uid('flow');
      const [id, now] = [uid('sleeper'), uid('now')];
      const t0 = Date.now();
      const wake = t0 + 3_000;
      const isDue = async (runId: string, at: number) =>
        (await store.listDue({ now: at, flows: [flow] })).some(
          (h) => h.runId === runId,
        );
      for (const runId of [id, now]) {
        await store.save(cp(runId, 0, { flow }), {
          owner: 'w1',
          leaseExpiresAt: t0 + 30_000,
        });
        assert.strictEqual(
          await store.renewLeases('w1', t0 + 60_000, [runId]),
          1,
        );
      }
      await store.save(cp(id, 1, { flow, status: 'sleeping' }), {
        owner: 'w1',
        leaseExpiresAt: wake,
      });
      await store.save(cp(now, 1, { flow, status: 'sleeping' }), {
        owner: 'w1',
      });
      const check = async (when: string) => {
        assert.strictEqual(await isDue(id, wake - 1_000), false, when);
        assert.strictEqual(await isDue(id, wake + 1_000), true, when);
        assert.strictEqual(await isDue(now, t0), true, when);
        const head = await store.head(id);
        assert.strictEqual(head?.status, 'sleeping', when);
        assert.strictEqual(head?.leaseExpiresAt, wake, when);
        assert.strictEqual(head?.owner, 'w1', when);
        assert.strictEqual((await store.head(now))?.leaseExpiresAt, undefined);
      };
      await check('asleep');
      assert.strictEqual(
        await store.renewLeases('w1', t0 + 90_000, [id, now]),
        0,
      );
      await check('renewed after the sleep');
      assert.strictEqual(await store.renewLeases('w1', 0, [id, now]), 0);
      await check('released after the sleep');

      const unfinished = await store.listUnfinished(flow);
      equal(
        unfinished.map((h) => [h.runId, h.status]).sort(),
        [
          [id, 'sleeping'],
          [now, 'sleeping'],
        ].sort(),
      );
      await rejectsWith(
        store.recordCall(id, 1, [call(id, 1, { superstep: 1 })]),
        CheckpointConflict,
      );

      // The wake: a claim of the next segment, with the count it saw.
      await store.save(cp(id, 2, { flow, segment: 2 }), {
        owner: 'w2',
        leaseExpiresAt: t0 + 40_000,
        expectCalls: 0,
      });
      assert.strictEqual(await isDue(id, wake + 1_000), false, 'woken');
      assert.strictEqual(await isDue(id, t0 + 41_000), true, 'lease expired');
      assert.strictEqual(await store.renewLeases('w1', t0 + 99_000, [id]), 0);
      assert.strictEqual(await store.renewLeases('w2', t0 + 80_000, [id]), 1);
      assert.strictEqual(await isDue(id, t0 + 41_000), false, 'renewed');
      assert.strictEqual(await isDue(id, t0 + 81_000), true, 'expired again');
      await store.recordCall(id, 2, [
        call(id, 1, { segment: 2, superstep: 1 }),
      ]);
      assert.strictEqual((await store.head(id))?.calls, 1);
      // Back to sleep in the same segment, then on: a sleeping run is saved onward like a paused one.
      await store.save(cp(id, 3, { flow, segment: 2, status: 'sleeping' }), {
        owner: 'w2',
        leaseExpiresAt: t0 + 10_000,
      });
      assert.strictEqual(await isDue(id, t0 + 11_000), true, 'asleep again');
      await store.save(cp(id, 4, { flow, segment: 2, status: 'done' }), {
        owner: 'w2',
      });
      assert.strictEqual(await isDue(id, t0 + 1e10), false, 'ended');
    });
  });
}
