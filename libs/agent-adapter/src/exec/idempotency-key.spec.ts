/**
 * `idempotencyKey()` outside a run (issue 15, item 5): it throws `NotInRun`, a DurableError whose
 * message says what to do, and never makes a key up; `inRun()` and `currentCall()` let code that
 * may run outside a run (a `@Tool` method called directly) check first and use its caller's key.
 */
import {
  DurableError,
  Flow,
  FlowRunner,
  MemoryCheckpointStore,
  NotInRun,
  ToolRegistry,
  Executor,
  currentCall,
  idempotencyKey,
  inRun,
  type CurrentCall,
} from 'agent-adapter';
import { CrashingStore, SimulatedCrash, settle } from 'agent-adapter/testing';
import { thrownBy } from '../../../../test/utils/specs';

const KEY = 'use-a-secret-from-your-vault-32b';

interface Seen {
  worker: string;
  inRun: boolean;
  call: CurrentCall | undefined;
  key: string;
}

/** A node that calls `probe` twice; the probe records what it sees. */
function setup(
  worker: string,
  seen: Seen[],
  inNode: unknown[],
  die?: () => void,
) {
  const registry = new ToolRegistry().register(
    'probe',
    async (a: { n: number }) => {
      seen.push({
        worker,
        inRun: inRun(),
        call: currentCall(),
        key: idempotencyKey(),
      });
      if (a.n === 1) die?.();
      return a.n;
    },
    { idempotent: true },
  );
  const flow = new Flow<{ out: number[] }>('probes')
    .node('a', async (_s, ctx) => {
      // A node's own code is not a tool call.
      inNode.push(inRun(), currentCall());
      try {
        idempotencyKey();
      } catch (e) {
        inNode.push(e);
      }
      const first = await ctx.call<number>('probe', { n: 0 });
      const second = await ctx.call<number>('probe', { n: 1 });
      return { out: [first, second] };
    })
    .end('a');
  return { executor: new Executor(registry), flow };
}

describe('idempotencyKey() outside a run', () => {
  it('throws NotInRun (a DurableError) with a message that says to check inRun() and pass your own key', () => {
    const e = thrownBy(NotInRun, () => idempotencyKey());
    expect(e).toBeInstanceOf(DurableError);
    expect(e.name).toBe('NotInRun');
    expect(e.runId).toBeUndefined();
    expect(e.message).toMatch(
      /^idempotencyKey\(\) was called outside a durable run's tool call/,
    );
    expect(e.message).toMatch(/never a made-up one/);
    expect(e.message).toMatch(/check inRun\(\)/);
    expect(e.message).toMatch(/inRun\(\) \? idempotencyKey\(\) : key/);
  });

  it('inRun() is false and currentCall() undefined outside a run', () => {
    expect(inRun()).toBe(false);
    expect(currentCall()).toBeUndefined();
  });

  it('inside a tool call: inRun() is true, currentCall() names the call and is frozen; a node body is not a tool call', async () => {
    const seen: Seen[] = [];
    const inNode: unknown[] = [];
    const { executor, flow } = setup('w1', seen, inNode);
    const store = new MemoryCheckpointStore();
    const r = await new FlowRunner(executor, {
      checkpoints: store,
      checkpointKey: KEY,
    }).run(flow, { out: [] }, { runId: 'r-1' });
    expect(r.state.out).toEqual([0, 1]);

    expect(seen.map((s) => s.inRun)).toEqual([true, true]);
    expect(seen.map((s) => s.call)).toEqual([
      {
        runId: 'r-1',
        superstep: expect.any(Number),
        node: 'a',
        index: 0,
        tool: 'probe',
      },
      {
        runId: 'r-1',
        superstep: seen[0]!.call!.superstep,
        node: 'a',
        index: 1,
        tool: 'probe',
      },
    ]);
    expect(Object.isFrozen(seen[0]!.call)).toBe(true);
    expect(seen[0]!.key).not.toBe(seen[1]!.key);

    expect(inNode[0]).toBe(false);
    expect(inNode[1]).toBeUndefined();
    expect(inNode[2]).toBeInstanceOf(NotInRun);

    // And outside again once the run is over.
    expect(inRun()).toBe(false);
    expect(currentCall()).toBeUndefined();
  });

  it('a call rerun after a crash sees the same currentCall() and the same idempotencyKey()', async () => {
    const seen: Seen[] = [];
    const store = new MemoryCheckpointStore();
    const dying = new CrashingStore(store);
    const w1 = setup('w1', seen, [], () => dying.kill());
    await expect(
      new FlowRunner(w1.executor, {
        checkpoints: dying,
        checkpointKey: KEY,
      }).run(w1.flow, { out: [] }, { runId: 'r-2' }),
    ).rejects.toBeInstanceOf(SimulatedCrash);
    await settle();

    const w2 = setup('w2', seen, []);
    const r = await new FlowRunner(w2.executor, {
      checkpoints: store,
      checkpointKey: KEY,
    }).recover(w2.flow, 'r-2');
    expect(r.status).toBe('done');
    expect(r.state.out).toEqual([0, 1]);

    // w1 ran both calls (dying in the second); w2 replayed the first and reran the second.
    expect(seen.map((s) => [s.worker, s.call?.index])).toEqual([
      ['w1', 0],
      ['w1', 1],
      ['w2', 1],
    ]);
    expect(seen[2]!.call).toEqual(seen[1]!.call);
    expect(seen[2]!.key).toBe(seen[1]!.key);
  });
});
