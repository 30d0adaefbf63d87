/**
 * Dead letters: a run that kills its worker at the same point every time is recovered at most
 * `maxRecoveryAttempts` times, then parked as failed with the reason (a sealed checkpoint written
 * with a compare-and-set) instead of being recovered forever. On the memory store and on SQLite.
 */
import {
  CheckpointConflict,
  Flow,
  RecoveryAttemptsExceeded,
  ToolRegistry,
  type CheckpointStore,
  type RunResult,
} from 'agent-adapter';
import { CrashingStore, SimulatedCrash } from 'agent-adapter/testing';
import { openCheckpoint } from '../../exec/durable/records';
import { verifyRun } from '../../cli/verify';
import {
  attempt,
  memoryAndSqlite,
  ring,
  runnerOn,
} from '../../../../../test/utils/specs';

interface State {
  n: number;
}

/**
 * Two supersteps: `a` then `b`, each calling its tool. `crashes` says, per tool, how many of its
 * next calls kill the worker inside the tool.
 */
function setup(inner: CheckpointStore, max?: number) {
  const ran: string[] = [];
  const crashes: Record<string, number> = { step_a: 0, step_b: 0 };
  const flow = new Flow<State>('poison')
    .node('a', async (s, ctx) => ({ n: await ctx.call<number>('step_a', {}) }))
    .node('b', async (s, ctx) => ({ n: await ctx.call<number>('step_b', {}) }))
    .edge('a', 'b')
    .end('b');
  const worker = () => {
    const store = new CrashingStore(inner);
    const registry = new ToolRegistry();
    for (const tool of ['step_a', 'step_b']) {
      registry.register(
        tool,
        async () => {
          ran.push(tool);
          if ((crashes[tool] ?? 0) > 0) {
            crashes[tool]!--;
            store.kill(`inside ${tool}`);
          }
          return ran.length;
        },
        { idempotent: true },
      );
    }
    const runner = runnerOn(store, registry, {
      ...(max !== undefined && { maxRecoveryAttempts: max }),
    });
    return runner;
  };
  return { flow, worker, ran, crashes };
}

const stores = memoryAndSqlite('dead-letters');

describe.each(stores)('dead letters on the %s store', (_, freshEach) => {
  let store: CheckpointStore;
  freshEach((made) => (store = made));

  it('parks a run after maxRecoveryAttempts recoveries that die in the same superstep', async () => {
    const { flow, worker, ran, crashes } = setup(store, 2);
    crashes.step_a = 100; // every worker dies inside step_a
    expect(
      await attempt((r) => r.run(flow, { n: 0 }, { runId: 'p1' }), worker()),
    ).toBeInstanceOf(SimulatedCrash);
    for (let i = 0; i < 2; i++) {
      expect(
        await attempt((r) => r.recover(flow, 'p1'), worker()),
      ).toBeInstanceOf(SimulatedCrash);
    }
    expect(ran).toEqual(['step_a', 'step_a', 'step_a']);

    const parked = await attempt((r) => r.recover(flow, 'p1'), worker());
    expect(parked).toMatchObject({
      runId: 'p1',
      status: 'failed',
      error: {
        name: 'RecoveryAttemptsExceeded',
        message: expect.stringContaining(
          'recovered 2 time(s) without completing superstep 0',
        ),
      },
    });
    expect(ran).toHaveLength(3); // the parking recover ran nothing
    // The sealed error is the exported class's, message and all.
    expect((parked as RunResult<unknown>).error).toEqual({
      name: RecoveryAttemptsExceeded.name,
      message: new RecoveryAttemptsExceeded('p1', 2, 0).message,
    });

    // Stored as a sealed, final checkpoint in a new segment; the whole run still verifies.
    const cp = openCheckpoint(ring, (await store.latest('p1'))!);
    expect(cp).toMatchObject({
      status: 'failed',
      reason: 'parked',
      recoveries: 2,
      error: { name: 'RecoveryAttemptsExceeded' },
    });
    expect((await verifyRun(store, ring, 'p1'))?.problems).toEqual([]);

    // Ended: nobody recovers it any more, and recoverAll no longer lists it.
    await expect(worker().recover(flow, 'p1')).rejects.toThrow(
      CheckpointConflict,
    );
    const all = await worker().recoverAll(flow, { force: true });
    expect(all.has('p1')).toBe(false);
  });

  it('recoverAll reports the parked run as a failed result', async () => {
    const { flow, worker, crashes } = setup(store, 1);
    crashes.step_b = 100;
    await attempt((r) => r.run(flow, { n: 0 }, { runId: 'p2' }), worker());
    await attempt((r) => r.recoverAll(flow, { force: true }), worker());
    const all = await worker().recoverAll(flow, { force: true });
    expect(all.get('p2')).toMatchObject({
      status: 'failed',
      error: { name: 'RecoveryAttemptsExceeded' },
    });
  });

  it('counts only recoveries without progress: completing a superstep resets the count', async () => {
    const { flow, worker, ran, crashes } = setup(store, 1);
    crashes.step_a = 1;
    crashes.step_b = 1;
    await attempt((r) => r.run(flow, { n: 0 }, { runId: 'p3' }), worker());
    // Recovery 1 finishes superstep 0 (a), then dies in superstep 1 (b): progress, count reset.
    expect(
      await attempt((r) => r.recover(flow, 'p3'), worker()),
    ).toBeInstanceOf(SimulatedCrash);
    const result = await attempt((r) => r.recover(flow, 'p3'), worker());
    expect(result).toMatchObject({ status: 'done' });
    expect(ran).toEqual(['step_a', 'step_a', 'step_b', 'step_b']);
  });

  it('without maxRecoveryAttempts a run is recovered every time', async () => {
    const { flow, worker, crashes } = setup(store);
    crashes.step_a = 5;
    await attempt((r) => r.run(flow, { n: 0 }, { runId: 'p4' }), worker());
    for (let i = 0; i < 4; i++)
      await attempt((r) => r.recover(flow, 'p4'), worker());
    const result = await attempt((r) => r.recover(flow, 'p4'), worker());
    expect(result).toMatchObject({ status: 'done' });
  });

  it('refuses a maxRecoveryAttempts that is not a positive integer', () => {
    for (const bad of [0, -1, 1.5, Number.NaN]) {
      expect(() =>
        runnerOn(store, new ToolRegistry(), {
          maxRecoveryAttempts: bad,
        }),
      ).toThrow(
        /^FlowRunner: "maxRecoveryAttempts" must be a positive integer/,
      );
    }
  });
});
