import {
  Executor,
  Flow,
  FlowRunner,
  RunLeaseHeld,
  ToolRegistry,
  type RunStatus,
} from '../../index';
import { KEY } from '../fixtures/tickets';
import { assert, equal, instanceOf, matches } from './check';
import { call, cp, uid, type SuiteContext } from './context';

/** Listing for recovery and for operators, lease keeping, deletion, namespaces. */
export function describeListingLeasesDelete({
  describe,
  it,
  make,
}: SuiteContext): void {
  describe('listing, leases, delete', () => {
    it("listUnfinished: the flow's running, paused and sleeping runs, by run id, paged", async () => {
      const store = await make();
      const flow = uid('flow');
      const ids = ['a', 'b', 'c', 'd', 'e', 'f'].map((x) => `${x}-${uid()}`);
      for (const [i, id] of ids.entries()) {
        await store.save(cp(id, 0, { flow }));
        if (i === 1) await store.save(cp(id, 1, { flow, status: 'paused' }));
        if (i === 2) await store.save(cp(id, 1, { flow, status: 'done' }));
        if (i === 3) await store.save(cp(id, 1, { flow, status: 'failed' }));
        if (i === 5) await store.save(cp(id, 1, { flow, status: 'sleeping' }));
      }
      await store.save(cp(uid(), 0, { flow: `${flow}-other` }));
      const all = await store.listUnfinished(flow);
      equal(
        all.map((h) => h.runId),
        [ids[0], ids[1], ids[4], ids[5]],
      );
      equal(
        all.map((h) => h.status),
        ['running', 'paused', 'running', 'sleeping'],
      );
      const page1 = await store.listUnfinished(flow, { limit: 2 });
      const page2 = await store.listUnfinished(flow, {
        limit: 2,
        after: page1[1]!.runId,
      });
      const page3 = await store.listUnfinished(flow, {
        limit: 2,
        after: page2[1]!.runId,
      });
      equal(page3, []);
      equal(
        [...page1, ...page2].map((h) => h.runId),
        all.map((h) => h.runId),
      );
    });

    it('leases: listUnfinished can skip live leases; renewLeases renews the listed runs an owner still holds, at once', async () => {
      const store = await make();
      const flow = uid('flow');
      const [a, b, c, d, e] = [
        uid('a'),
        uid('b'),
        uid('c'),
        uid('d'),
        uid('e'),
      ];
      /** Saves `id` of the flow at `step`, its lease held by `owner` until `until`. */
      const held = (
        id: string,
        step: number,
        owner: string,
        until: number,
        status: RunStatus = 'running',
      ) =>
        store.save(cp(id, step, { flow, status }), {
          owner,
          leaseExpiresAt: until,
        });
      await held(a, 0, 'w1', 1_000);
      await held(b, 0, 'w1', 5_000);
      await held(c, 0, 'w2', 9_000);
      await held(d, 0, 'w1', 1_000);
      await held(d, 1, 'w1', 1_000, 'done');
      // e: w1 holds it but is no longer driving it (not in the list): its lease must run out.
      await held(e, 0, 'w1', 1_000);
      const expired = async (before: number) =>
        (await store.listUnfinished(flow, { leaseExpiredBefore: before }))
          .map((h) => h.runId)
          .sort();
      equal(await expired(2_000), [a, e].sort());
      equal(await expired(10_000), [a, b, c, e].sort());
      assert.strictEqual(
        await store.renewLeases('w1', 20_000, [a, b, c, d]),
        2,
      );
      equal(await expired(10_000), [c, e].sort());
      assert.strictEqual(await store.renewLeases('w1', 30_000, []), 0);
      assert.strictEqual((await store.head(d))?.leaseExpiresAt, 1_000);
      assert.strictEqual((await store.head(c))?.owner, 'w2');
    });

    it("renewLeases to 0 releases the owner's runs at once (and only its own)", async () => {
      const store = await make();
      const flow = uid('flow');
      const [mine, theirs] = [uid(), uid()];
      const far = Date.now() + 3_600_000;
      await store.save(cp(mine, 0, { flow }), {
        owner: 'w1',
        leaseExpiresAt: far,
      });
      await store.save(cp(theirs, 0, { flow }), {
        owner: 'w2',
        leaseExpiresAt: far,
      });
      await store.renewLeases('w1', far + 1, [mine]);
      await store.renewLeases('w1', 0, [mine, theirs]);
      assert.strictEqual((await store.head(mine))?.leaseExpiresAt, 0);
      assert.strictEqual((await store.head(theirs))?.leaseExpiresAt, far);
      const free = await store.listUnfinished(flow, {
        leaseExpiredBefore: Date.now(),
      });
      equal(
        free.map((h) => h.runId),
        [mine],
      );
    });

    it('delete removes a run with its checkpoints and calls; the id can start again', async () => {
      const store = await make();
      const id = uid();
      await store.save(cp(id, 0));
      await store.recordCall(id, 1, [call(id, 1)]);
      assert.strictEqual(await store.delete(id), true);
      assert.strictEqual(await store.delete(id), false);
      assert.strictEqual(await store.latest(id), undefined);
      equal(await store.calls(id, 0), []);
      equal(await store.history(id), { checkpoints: [], calls: [] });
      await store.save(cp(id, 0));
      assert.strictEqual((await store.latest(id))?.step, 0);
    });

    it('list: newest first, filtered by flow and status, paged without gaps or repeats', async () => {
      const store = await make();
      const flow = uid('flow');
      const ids: string[] = [];
      for (let i = 0; i < 7; i++) {
        const id = uid(`l${i}`);
        ids.push(id);
        await store.save(cp(id, 0, { flow }));
        if (i % 3 === 0) await store.save(cp(id, 1, { flow, status: 'done' }));
      }
      await store.save(cp(uid(), 0, { flow: `${flow}-x` }));
      const seen: string[] = [];
      let before: string | undefined;
      do {
        const page = await store.list({
          flow,
          limit: 3,
          ...(before !== undefined && { before }),
        });
        assert.ok(page.runs.length <= 3);
        seen.push(...page.runs.map((r) => r.runId));
        before = page.next;
      } while (before !== undefined);
      equal(seen, [...ids].reverse());
      const done = await store.list({ flow, status: 'done' });
      equal(
        done.runs.map((r) => r.runId),
        [ids[6], ids[3], ids[0]],
      );
      assert.strictEqual(done.next, undefined);
    });

    it('history: every checkpoint by step and every call by (segment, superstep, seq)', async () => {
      const store = await make();
      const id = uid();
      await store.save(cp(id, 0));
      await store.recordCall(id, 1, [call(id, 1), call(id, 2)]);
      await store.save(cp(id, 1), { calls: [call(id, 3)] });
      await store.recordCall(id, 1, [call(id, 1, { superstep: 1 })]);
      const h = await store.history(id);
      equal(
        h.checkpoints.map((c) => c.step),
        [0, 1],
      );
      equal(
        h.calls.map((c) => [c.segment, c.superstep, c.seq]),
        [
          [1, 0, 1],
          [1, 0, 2],
          [1, 0, 3],
          [1, 1, 1],
        ],
      );
    });

    it('two runners of one worker id (a flow runner and tool loops in one process) each keep their own runs leased', async () => {
      const store = await make();
      let release!: () => void;
      const gate = new Promise<void>((resolve) => (release = resolve));
      // A superstep far longer than the lease: only renewal keeps the run owned.
      const flow = new Flow<{ n: number }>(uid('slow'))
        .node('wait', async () => {
          await gate;
          return { n: 1 };
        })
        .end('wait');
      const options = {
        checkpoints: store,
        checkpointKey: KEY,
        workerId: 'w1',
        leaseMs: 600,
      };
      const a = new FlowRunner(new Executor(new ToolRegistry()), options);
      const b = new FlowRunner(new Executor(new ToolRegistry()), options);
      const ids = [uid('a'), uid('b')] as const;
      const runs = [
        a.run(flow, { n: 0 }, { runId: ids[0] }),
        b.run(flow, { n: 0 }, { runId: ids[1] }),
      ];
      const other = new FlowRunner(new Executor(new ToolRegistry()), {
        ...options,
        workerId: 'w2',
      });
      try {
        // Both runs stored first (a loaded machine may take a while to start them), then looked at
        // for three leases' time: only renewal keeps them owned.
        while (!(await store.head(ids[0])) || !(await store.head(ids[1])))
          await new Promise((r) => setTimeout(r, 20));
        for (let look = 0; look < 6; look++) {
          await new Promise((r) => setTimeout(r, 300));
          const seen = await other.recoverAll(flow);
          assert.strictEqual(seen.size, 2);
          for (const outcome of seen.values())
            instanceOf(outcome, RunLeaseHeld);
        }
      } finally {
        release();
      }
      for (const r of await Promise.all(runs))
        matches(r, { status: 'done', state: { n: 1 } });
      a.close();
      b.close();
      other.close();
    });

    it("tenants: two stores in their own namespaces never see each other's runs", async () => {
      const one = await make();
      const two = await make();
      const id = uid();
      await one.save(cp(id, 0, { flow: 'shared-flow' }));
      assert.strictEqual(await two.latest(id), undefined);
      equal(await two.listUnfinished('shared-flow'), []);
      assert.strictEqual(
        (await two.list()).runs.find((r) => r.runId === id),
        undefined,
      );
      await two.save(cp(id, 0, { flow: 'shared-flow', sealed: 'theirs' }));
      assert.strictEqual((await one.latest(id))?.sealed, cp(id, 0).sealed);
    });
  });
}
