import { CheckpointConflict } from '../../index';
import { Messages } from '../../errors/messages';
import {
  assert,
  containing,
  equal,
  instanceOf,
  matches,
  rejectsWith,
} from './check';
import { call, cp, uid, type SuiteContext } from './context';

/** `save` is a compare-and-set on (run, step, segment), with the calls it carries written atomically. */
export function describeCompareAndSetSave({
  describe,
  it,
  make,
}: SuiteContext): void {
  describe('compare-and-set save', () => {
    it('step 0 creates a run; latest and head return what was saved', async () => {
      const store = await make();
      const id = uid();
      assert.strictEqual(await store.latest(id), undefined);
      assert.strictEqual(await store.head(id), undefined);
      const big = cp(id, 0, { sealed: 'x'.repeat(200_000) + '€' });
      await store.save(big, { owner: 'w1', leaseExpiresAt: 1_000 });
      equal(await store.latest(id), big);
      matches(await store.head(id), {
        runId: id,
        flow: 'f',
        step: 0,
        status: 'running',
        segment: 1,
        owner: 'w1',
        leaseExpiresAt: 1_000,
      });
    });

    it('step 0 of an existing run, a repeated step, a skipped step, a step of no run: CheckpointConflict', async () => {
      const store = await make();
      const id = uid();
      await store.save(cp(id, 0));
      await rejectsWith(store.save(cp(id, 0)), CheckpointConflict);
      await rejectsWith(store.save(cp(id, 2)), CheckpointConflict);
      await store.save(cp(id, 1));
      await rejectsWith(store.save(cp(id, 1)), CheckpointConflict);
      await rejectsWith(store.save(cp(uid(), 1)), CheckpointConflict);
      assert.strictEqual((await store.latest(id))?.step, 1);
      equal(
        (await store.history(id)).checkpoints.map((c) => c.step),
        [0, 1],
      );
    });

    it('concurrent savers of one step: exactly one wins', async () => {
      const store = await make();
      const id = uid();
      await store.save(cp(id, 0));
      const results = await Promise.allSettled(
        Array.from({ length: 12 }, (_, i) =>
          store.save(cp(id, 1, { segment: 2, sealed: `claim-${i}` })),
        ),
      );
      const won = results.filter((r) => r.status === 'fulfilled');
      assert.strictEqual(won.length, 1);
      for (const r of results)
        if (r.status === 'rejected') instanceOf(r.reason, CheckpointConflict);
      const latest = await store.latest(id);
      assert.strictEqual((await store.head(id))?.segment, latest?.segment);
    });

    it('concurrent creators of one run id: exactly one wins', async () => {
      const store = await make();
      const id = uid();
      const results = await Promise.allSettled(
        Array.from({ length: 8 }, () => store.save(cp(id, 0))),
      );
      assert.strictEqual(
        results.filter((r) => r.status === 'fulfilled').length,
        1,
      );
    });

    it('a checkpoint keeps the segment or claims the next one; a stale or foreign segment is refused', async () => {
      const store = await make();
      const id = uid();
      await store.save(cp(id, 0, { segment: 500 }));
      await store.save(cp(id, 1, { segment: 500 }));
      await rejectsWith(
        store.save(cp(id, 2, { segment: 1 })),
        CheckpointConflict,
      );
      await rejectsWith(
        store.save(cp(id, 2, { segment: 502 })),
        CheckpointConflict,
      );
      await store.save(cp(id, 2, { segment: 501 }));
      await rejectsWith(
        store.save(cp(id, 3, { segment: 500 })),
        CheckpointConflict,
      );
      assert.strictEqual((await store.head(id))?.segment, 501);
    });

    it('a run that ended takes no further checkpoint, and every store says it ended (a stale segment too)', async () => {
      const store = await make();
      const id = uid();
      await store.save(cp(id, 0));
      await store.save(cp(id, 1, { status: 'done' }));
      await rejectsWith(
        store.save(cp(id, 2)),
        CheckpointConflict,
        Messages.ended(id, 'done'),
      );
      // A worker of a segment cut off long ago learns the run's end, not only that it was fenced.
      await rejectsWith(
        store.save(cp(id, 2, { segment: 99 })),
        Error,
        containing(Messages.ended(id, 'done')),
      );
    });

    it('calls saved with a checkpoint are written atomically with it, and not at all when it conflicts', async () => {
      const store = await make();
      const id = uid();
      await store.save(cp(id, 0));
      await store.recordCall(id, 1, [call(id, 1)]);
      await store.save(cp(id, 1), { calls: [call(id, 2)] });
      await rejectsWith(
        store.save(cp(id, 1), { calls: [call(id, 3)] }),
        CheckpointConflict,
      );
      equal(
        (await store.calls(id, 0)).map((c) => c.seq),
        [1, 2],
      );
    });

    it('head.calls counts call records; a save expecting another count conflicts (a claim racing a live worker)', async () => {
      const store = await make();
      const id = uid();
      await store.save(cp(id, 0));
      assert.strictEqual((await store.head(id))?.calls, 0);
      await store.recordCall(id, 1, [call(id, 1), call(id, 2)]);
      await store.save(cp(id, 1), { calls: [call(id, 3)] });
      assert.strictEqual((await store.head(id))?.calls, 3);
      await store.recordCall(id, 1, [call(id, 1, { superstep: 1 })]);
      await rejectsWith(
        store.save(cp(id, 2, { segment: 2 }), { expectCalls: 3 }),
        CheckpointConflict,
      );
      await store.save(cp(id, 2, { segment: 2 }), { expectCalls: 4 });
      assert.strictEqual((await store.head(id))?.segment, 2);
    });
  });
}
