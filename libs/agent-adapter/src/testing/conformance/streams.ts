import { CheckpointConflict } from '../../index';
import type { StreamRecord } from '../../index';
import { assert, equal, rejectsWith } from './check';
import { cp, uid, type SuiteContext } from './context';

/** An entry to append (placeholder sealed text: stores never open it). */
function entry(
  runId: string,
  superstep: number,
  place: string,
): Omit<StreamRecord, 'offset'> {
  return { runId, superstep, place, sealed: `entry-${place}-ünï©ødé` };
}

const offsets = (records: StreamRecord[]) => records.map((r) => r.offset);

/**
 * `appendStream` numbers entries on from the stream's length, fenced like the call log, and drops
 * the oldest of earlier supersteps beyond what it keeps; `readStream` reads them in order.
 */
export function describeRunStreams({ describe, it, make }: SuiteContext): void {
  describe('run streams', () => {
    it('numbers entries from 0 in the order appended, and reads them from an offset or by superstep', async () => {
      const store = await make();
      const id = uid();
      await store.save(cp(id, 0));
      equal(
        await store.appendStream(
          id,
          1,
          [entry(id, 0, 'a/0'), entry(id, 0, 'a/1')],
          100,
        ),
        0,
      );
      equal(await store.appendStream(id, 1, [entry(id, 0, 'b/0')], 100), 2);
      await store.save(cp(id, 1));
      equal(
        await store.appendStream(
          id,
          1,
          [entry(id, 1, 'a/0'), entry(id, 1, 'a/1/0.0')],
          100,
        ),
        3,
      );
      const all = await store.readStream(id);
      equal(all, [
        { ...entry(id, 0, 'a/0'), offset: 0 },
        { ...entry(id, 0, 'a/1'), offset: 1 },
        { ...entry(id, 0, 'b/0'), offset: 2 },
        { ...entry(id, 1, 'a/0'), offset: 3 },
        { ...entry(id, 1, 'a/1/0.0'), offset: 4 },
      ]);
      equal(offsets(await store.readStream(id, { from: 2 })), [2, 3, 4]);
      equal(offsets(await store.readStream(id, { from: 1, limit: 2 })), [1, 2]);
      equal(offsets(await store.readStream(id, { superstep: 0 })), [0, 1, 2]);
      equal(
        offsets(await store.readStream(id, { superstep: 0, from: 1 })),
        [1, 2],
      );
      equal(offsets(await store.readStream(id, { superstep: 1 })), [3, 4]);
      equal(await store.readStream(id, { superstep: 7 }), []);
      equal(await store.readStream(id, { from: 5 }), []);
      equal(await store.readStream(uid()), []);
    });

    it('is fenced: another segment, a run that is not running, or no run is refused, and nothing is written', async () => {
      const store = await make();
      const id = uid();
      await store.save(cp(id, 0));
      await store.save(cp(id, 1, { segment: 2 })); // a recoverer claimed
      await rejectsWith(
        store.appendStream(id, 1, [entry(id, 1, 'a/0')], 100),
        CheckpointConflict,
      );
      await store.save(cp(id, 2, { segment: 2, status: 'paused' }));
      await rejectsWith(
        store.appendStream(id, 2, [entry(id, 2, 'a/0')], 100),
        CheckpointConflict,
      );
      await rejectsWith(
        store.appendStream(uid(), 1, [entry(id, 0, 'a/0')], 100),
        CheckpointConflict,
      );
      equal(await store.readStream(id), []);
      // The run's own segment, running again: its first entry is offset 0.
      await store.save(cp(id, 3, { segment: 3 }));
      equal(await store.appendStream(id, 3, [entry(id, 3, 'a/0')], 100), 0);
    });

    it('keeps the newest entries, never dropping the running superstep', async () => {
      const store = await make();
      const id = uid();
      await store.save(cp(id, 0));
      const places = (s: number, n: number) =>
        Array.from({ length: n }, (_, i) => entry(id, s, `n/${i}`));
      await store.appendStream(id, 1, places(0, 4), 3);
      // The superstep running is kept whole, beyond the limit.
      equal(offsets(await store.readStream(id)), [0, 1, 2, 3]);
      await store.save(cp(id, 1));
      await store.appendStream(id, 1, places(1, 2), 3);
      equal(offsets(await store.readStream(id)), [3, 4, 5]);
      // A reader asking for a dropped offset gets what is kept from there on.
      equal(offsets(await store.readStream(id, { from: 1 })), [3, 4, 5]);
      equal(offsets(await store.readStream(id, { superstep: 0 })), [3]);
      await store.appendStream(id, 1, places(1, 4).slice(2), 3);
      // Only superstep 1 is left: all of it, since it is still running.
      equal(offsets(await store.readStream(id)), [4, 5, 6, 7]);
    });

    it('is deleted with its run', async () => {
      const store = await make();
      const id = uid();
      await store.save(cp(id, 0));
      await store.appendStream(id, 1, [entry(id, 0, 'a/0')], 100);
      assert.strictEqual(await store.delete(id), true);
      equal(await store.readStream(id), []);
      await store.save(cp(id, 0));
      equal(await store.appendStream(id, 1, [entry(id, 0, 'a/0')], 100), 0);
    });
  });
}
