/**
 * Start semantics that suit HTTP (issue 15 item 4): starting a run id that exists with the same
 * input gives that run's current result (a client retrying after a dropped connection finds its
 * run, and nothing runs twice); another input is a conflict that says so; `wait: false` resolves
 * once step 0 is stored.
 */
import {
  CheckpointConflict,
  Flow,
  MemoryCheckpointStore,
  RunAccessDenied,
  ToolRegistry,
  type DurableLogger,
} from 'agent-adapter';
import { runnerOn, sleep } from '../../../../../test/utils/specs';

interface Charge {
  amount: number;
  receipt: string;
}

function setup() {
  const charged: number[] = [];
  let release: () => void = () => undefined;
  let gate: Promise<void> = Promise.resolve();
  const registry = new ToolRegistry().register(
    'charge',
    async (a: { amount: number }) => {
      charged.push(a.amount);
      await gate;
      return `r-${a.amount}`;
    },
  );
  const flow = new Flow<Charge>('charges')
    .node('pay', async (s, ctx) => ({
      receipt: await ctx.call<string>('charge', { amount: s.amount }),
    }))
    .end('pay');
  const hold = () => {
    gate = new Promise<void>((resolve) => (release = resolve));
  };
  return { charged, registry, flow, hold, release: () => release() };
}

describe('FlowRunner.run on a run id that exists', () => {
  it('with the same input gives the run as it is now, and runs nothing again', async () => {
    const store = new MemoryCheckpointStore();
    const { charged, registry, flow } = setup();
    const runner = runnerOn(store, registry);
    const first = await runner.run(
      flow,
      { amount: 5 },
      { runId: 'order-1', ctx: { user: 'u1' } },
    );
    expect(first.status).toBe('done');
    const again = await runner.run(
      flow,
      { amount: 5 },
      { runId: 'order-1', ctx: { user: 'u1' } },
    );
    expect(again).toEqual(first);
    expect(charged).toEqual([5]);
  });

  it('while another worker still drives it: its running state, and the call runs once', async () => {
    const store = new MemoryCheckpointStore();
    const { charged, registry, flow, hold, release } = setup();
    hold();
    const a = runnerOn(store, registry, { workerId: 'a' });
    const b = runnerOn(store, registry, { workerId: 'b' });
    const driving = a.run(flow, { amount: 7 }, { runId: 'order-2' });
    while (charged.length === 0) await sleep(1);
    const retry = await b.run(flow, { amount: 7 }, { runId: 'order-2' });
    expect(retry).toMatchObject({ runId: 'order-2', status: 'running' });
    release();
    expect((await driving).state).toEqual({ amount: 7, receipt: 'r-7' });
    expect(charged).toEqual([7]);
    a.close();
    b.close();
  });

  it('with another input is a conflict that says so, and stores nothing', async () => {
    const store = new MemoryCheckpointStore();
    const { charged, registry, flow } = setup();
    const runner = runnerOn(store, registry);
    await runner.run(flow, { amount: 5 }, { runId: 'order-3' });
    const error = await runner
      .run(flow, { amount: 6 }, { runId: 'order-3' })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(CheckpointConflict);
    expect((error as Error).message).toMatch(
      /^Run "order-3" already exists and started from another input/,
    );
    expect(charged).toEqual([5]);
    expect((await store.history('order-3')).checkpoints).toHaveLength(2);
  });

  it("for someone else's ctx, or without the ctx it started with, is RunAccessDenied", async () => {
    const store = new MemoryCheckpointStore();
    const { registry, flow } = setup();
    const runner = runnerOn(store, registry);
    await runner.run(
      flow,
      { amount: 5 },
      { runId: 'order-4', ctx: { user: 'u1' } },
    );
    await expect(
      runner.run(
        flow,
        { amount: 5 },
        { runId: 'order-4', ctx: { user: 'u2' } },
      ),
    ).rejects.toBeInstanceOf(RunAccessDenied);
    await expect(
      runner.run(flow, { amount: 5 }, { runId: 'order-4' }),
    ).rejects.toBeInstanceOf(RunAccessDenied);
  });

  it('of another flow is a conflict naming both flows', async () => {
    const store = new MemoryCheckpointStore();
    const { registry, flow } = setup();
    const runner = runnerOn(store, registry);
    await runner.run(flow, { amount: 5 }, { runId: 'order-5' });
    const other = new Flow<Charge>('refunds')
      .node('pay', () => ({}))
      .end('pay');
    await expect(
      runner.run(other, { amount: 5 }, { runId: 'order-5' }),
    ).rejects.toThrow(/charges/);
  });
});

describe('FlowRunner.run with { wait: false }', () => {
  it('resolves once step 0 is stored; the run goes on in the background', async () => {
    const store = new MemoryCheckpointStore();
    const { charged, registry, flow, hold, release } = setup();
    hold();
    const runner = runnerOn(store, registry);
    const started = await runner.run(
      flow,
      { amount: 9 },
      { runId: 'bg-1', wait: false },
    );
    expect(started).toEqual({
      runId: 'bg-1',
      status: 'running',
      step: 0,
      state: { amount: 9 },
    });
    expect((await store.head('bg-1'))?.step).toBe(0);
    release();
    while ((await store.head('bg-1'))?.status !== 'done') await sleep(2);
    expect((await runner.get(flow, 'bg-1')).state.receipt).toBe('r-9');
    expect(charged).toEqual([9]);
  });

  it('logs a background run that stops with an error (no unhandled rejection)', async () => {
    const store = new MemoryCheckpointStore();
    const { registry, flow, hold, release } = setup();
    hold();
    const errors: unknown[][] = [];
    const logger: DurableLogger = {
      warn: () => undefined,
      error: (...args: unknown[]) => void errors.push(args),
    };
    const runner = runnerOn(store, registry, { logger });
    await runner.run(flow, { amount: 1 }, { runId: 'bg-2', wait: false });
    // The run is deleted under it (an operator's prune): its next write is refused.
    await store.delete('bg-2');
    release();
    while (errors.length === 0) await sleep(2);
    expect(String(errors[0]![0])).toMatch(
      /run "bg-2", started with \{ wait: false \}, stopped on this worker/,
    );
  });
});
