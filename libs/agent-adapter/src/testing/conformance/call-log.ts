import { CheckpointConflict } from '../../index';
import type { RunStatus } from '../../index';
import { assert, equal, rejectsWith } from './check';
import { call, cp, uid, type SuiteContext } from './context';

/** `recordCall` appends in order, only for the current segment of a running run, all or nothing. */
export function describeFencedCallLog({
  describe,
  it,
  make,
}: SuiteContext): void {
  describe('fenced call log', () => {
    it('appends in order and reads one superstep, every segment, by (segment, seq)', async () => {
      const store = await make();
      const id = uid();
      await store.save(cp(id, 0));
      await store.recordCall(id, 1, [call(id, 1), call(id, 2)]);
      await store.recordCall(id, 1, [call(id, 3)]);
      await store.save(cp(id, 1), { calls: [call(id, 1, { superstep: 1 })] });
      await store.save(cp(id, 2, { segment: 2 }));
      await store.recordCall(id, 2, [call(id, 1, { segment: 2 })]);
      equal(
        (await store.calls(id, 0)).map((c) => [c.segment, c.seq, c.sealed]),
        [
          [1, 1, `call-${id}-1`],
          [1, 2, `call-${id}-2`],
          [1, 3, `call-${id}-3`],
          [2, 1, `call-${id}-1`],
        ],
      );
      equal(await store.calls(id, 1), [call(id, 1, { superstep: 1 })]);
      equal(await store.calls(id, 5), []);
      equal(await store.calls(uid(), 0), []);
    });

    it("the head reports its last record's key (what appends are checked against), none before the first", async () => {
      const store = await make();
      const id = uid();
      const lastOf = async () => (await store.head(id))?.lastCall;
      await store.save(cp(id, 0));
      equal(await lastOf(), undefined);
      await store.recordCall(id, 1, [call(id, 1), call(id, 2)]);
      equal(await lastOf(), { segment: 1, superstep: 0, seq: 2 });
      await store.recordCall(id, 1, []);
      equal(await lastOf(), { segment: 1, superstep: 0, seq: 2 });
      await store.save(cp(id, 1), { calls: [call(id, 1, { superstep: 1 })] });
      equal(await lastOf(), { segment: 1, superstep: 1, seq: 1 });
      await store.save(cp(id, 2, { segment: 2 })); // a claim: no records, the key stays
      equal(await lastOf(), { segment: 1, superstep: 1, seq: 1 });
      await store.recordCall(id, 2, [
        call(id, 1, { segment: 2, superstep: 1 }),
      ]);
      equal(await lastOf(), { segment: 2, superstep: 1, seq: 1 });
      const listed = (await store.list({ limit: 1000 })).runs.find(
        (h) => h.runId === id,
      );
      equal(listed?.lastCall, { segment: 2, superstep: 1, seq: 1 });
    });

    it('a cut-off segment is refused, and nothing of its batch is written', async () => {
      const store = await make();
      const id = uid();
      await store.save(cp(id, 0));
      await store.save(cp(id, 1, { segment: 2 })); // a recoverer claimed
      await rejectsWith(
        store.recordCall(id, 1, [call(id, 1)]),
        CheckpointConflict,
      );
      equal(await store.calls(id, 0), []);
    });

    it('a save carrying calls of a cut-off segment is refused whole', async () => {
      const store = await make();
      const id = uid();
      await store.save(cp(id, 0));
      await store.save(cp(id, 1, { segment: 2 }));
      await rejectsWith(
        store.save(cp(id, 2, { segment: 2 }), {
          calls: [call(id, 1, { segment: 1 })],
        }),
        CheckpointConflict,
      );
      assert.strictEqual((await store.latest(id))?.step, 1);
      equal(await store.calls(id, 0), []);
    });

    it('a duplicate (segment, superstep, seq) is refused and the whole batch is not written', async () => {
      const store = await make();
      const id = uid();
      await store.save(cp(id, 0));
      await store.recordCall(id, 1, [call(id, 1)]);
      await rejectsWith(
        store.recordCall(id, 1, [
          call(id, 2),
          call(id, 1, { sealed: 'again' }),
        ]),
        CheckpointConflict,
      );
      equal(
        (await store.calls(id, 0)).map((c) => c.sealed),
        [`call-${id}-1`],
      );
    });

    it('records out of order are refused whole: in a batch, or not after the last one stored (a save too)', async () => {
      const store = await make();
      const id = uid();
      await store.save(cp(id, 0));
      await store.recordCall(id, 1, [call(id, 1), call(id, 2)]);
      const refused = [
        // Out of order inside the batch, each record new.
        () => store.recordCall(id, 1, [call(id, 4), call(id, 3)]),
        // New, but before the last record stored.
        () =>
          store.recordCall(id, 1, [call(id, 5, { superstep: 1 }), call(id, 3)]),
        () =>
          store.save(cp(id, 1), {
            calls: [
              call(id, 3),
              call(id, 1, { superstep: 2 }),
              call(id, 9, { superstep: 1 }),
            ],
          }),
      ];
      for (const write of refused)
        await rejectsWith(write(), CheckpointConflict);
      await store.recordCall(id, 1, [call(id, 3, { superstep: 1 })]);
      // Superstep 0 comes before superstep 1's last record, though its seq is new there.
      await rejectsWith(
        store.save(cp(id, 1), { calls: [call(id, 4)] }),
        CheckpointConflict,
      );
      equal(
        (await store.calls(id, 0)).map((c) => c.seq),
        [1, 2],
      );
      equal(
        (await store.calls(id, 1)).map((c) => c.seq),
        [3],
      );
      assert.strictEqual((await store.latest(id))?.step, 0);
      assert.strictEqual((await store.head(id))?.calls, 3);
      // A claim opens a segment: its records start again at any superstep.
      await store.save(cp(id, 1, { segment: 2 }));
      await store.recordCall(id, 2, [call(id, 1, { segment: 2 })]);
      equal(
        (await store.calls(id, 0)).map((c) => [c.segment, c.seq]),
        [
          [1, 1],
          [1, 2],
          [2, 1],
        ],
      );
    });

    it("a save carries records of its superstep and the next (a callsFirst node's started record)", async () => {
      const store = await make();
      const id = uid();
      await store.save(cp(id, 0));
      await store.recordCall(id, 1, [call(id, 1)]);
      await store.save(cp(id, 1), {
        calls: [call(id, 2), call(id, 1, { superstep: 1 })],
      });
      equal(
        (await store.calls(id, 0)).map((c) => c.seq),
        [1, 2],
      );
      equal(
        (await store.calls(id, 1)).map((c) => c.seq),
        [1],
      );
      assert.strictEqual((await store.head(id))?.calls, 3);
    });

    it("a save's records of any superstep are read back by superstep, after claims and before its own step alike", async () => {
      const store = await make();
      const id = uid();
      await store.save(cp(id, 0));
      // Two claims: the run's steps run ahead of its supersteps.
      await store.save(cp(id, 1, { segment: 2 }));
      await store.save(cp(id, 2, { segment: 3 }));
      const seg = { segment: 3 };
      await store.save(cp(id, 3, seg), {
        calls: [
          call(id, 1, { ...seg, superstep: 0 }),
          call(id, 1, { ...seg, superstep: 1 }),
          // A superstep after the save's own step.
          call(id, 1, { ...seg, superstep: 5 }),
        ],
      });
      await store.recordCall(id, 3, [call(id, 2, { ...seg, superstep: 5 })]);
      await store.save(cp(id, 4, seg), {
        calls: [call(id, 3, { ...seg, superstep: 5 })],
      });
      for (const [superstep, seqs] of [
        [0, [1]],
        [1, [1]],
        [2, []],
        [5, [1, 2, 3]],
      ] as const)
        equal(
          (await store.calls(id, superstep)).map((c) => [c.segment, c.seq]),
          seqs.map((q) => [3, q]),
        );
      equal(
        (await store.history(id)).calls.map((c) => [c.superstep, c.seq]),
        [
          [0, 1],
          [1, 1],
          [5, 1],
          [5, 2],
          [5, 3],
        ],
      );
    });

    it('batches of thousands of records: written whole, or refused whole for a duplicate at the end', async () => {
      const store = await make();
      const id = uid();
      await store.save(cp(id, 0));
      const batch = (from: number, count: number, superstep = 0) =>
        Array.from({ length: count }, (_, i) =>
          call(id, from + i, { superstep }),
        );
      await store.recordCall(id, 1, batch(1, 2500));
      await store.save(cp(id, 1), { calls: batch(1, 1200, 1) });
      assert.strictEqual((await store.calls(id, 0)).length, 2500);
      equal(
        (await store.calls(id, 1)).map((c) => c.seq),
        batch(1, 1200).map((c) => c.seq),
      );
      // Its last record is already stored: nothing of the batch is written.
      await rejectsWith(
        store.recordCall(id, 1, [
          ...batch(1201, 1500, 1),
          call(id, 1200, { superstep: 1 }),
        ]),
        CheckpointConflict,
      );
      assert.strictEqual((await store.calls(id, 1)).length, 1200);
      assert.strictEqual((await store.head(id))?.calls, 3700);
    });

    it('batches of every small size are written whole and in order (engines bind small and large ones apart)', async () => {
      const store = await make();
      const id = uid();
      await store.save(cp(id, 0));
      let seq = 0;
      let step = 0;
      const batch = (size: number) =>
        Array.from({ length: size }, () => {
          seq += 1;
          return call(id, seq, { sealed: `s${seq}` });
        });
      // Each size through both write paths: an append, then a save.
      for (const size of [1, 2, 7, 8, 9, 10, 17]) {
        await store.recordCall(id, 1, batch(size));
        await store.save(cp(id, ++step), { calls: batch(size) });
      }
      equal(
        (await store.calls(id, 0)).map((c) => [c.seq, c.sealed]),
        Array.from({ length: seq }, (_, i) => [i + 1, `s${i + 1}`]),
      );
      assert.strictEqual((await store.head(id))?.calls, seq);
    });

    it('no call is recorded for an unknown, paused, sleeping or ended run', async () => {
      const store = await make();
      await rejectsWith(
        store.recordCall(uid(), 1, [call('x', 1)]),
        CheckpointConflict,
      );
      for (const status of [
        'paused',
        'sleeping',
        'done',
        'failed',
      ] as RunStatus[]) {
        const id = uid();
        await store.save(cp(id, 0));
        await store.save(cp(id, 1, { status }));
        await rejectsWith(
          store.recordCall(id, 1, [call(id, 1)]),
          CheckpointConflict,
        );
      }
    });
  });
}
