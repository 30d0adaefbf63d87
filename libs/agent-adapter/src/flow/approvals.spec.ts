/**
 * Approvals (spec: "Approvals"; DESIGN point 8), on the memory store: a tool that needs approval
 * pauses the run, resume stores the decision with the next checkpoint (one resume wins) and only
 * then spends it; a crash on either side of that save leaves the run resumable or recoverable,
 * and the approved call runs once.
 */
import {
  CheckpointConflict,
  type CheckpointStore,
  Executor,
  Flow,
  FlowRunner,
  MemoryCheckpointStore,
  ToolDenied,
  ToolRegistry,
  idempotencyKey,
} from 'agent-adapter';
import { CrashingStore, SimulatedCrash, settle } from 'agent-adapter/testing';
import { refundsRegistry } from 'agent-adapter/testing/fixtures';
import { openCheckpoint } from '../exec/durable/records';
import {
  bodyOf,
  decode,
  KEY,
  ring,
  runnerOn,
} from '../../../../test/utils/specs';

interface Refund {
  amount: number;
  note?: string;
  quote?: string;
}

function setup(ran: string[], options: { onRefund?: () => void } = {}) {
  const registry = refundsRegistry(ran, () => {
    options.onRefund?.();
    return `refund:${idempotencyKey().slice(0, 6)}`;
  });
  const flow = new Flow<Refund>('refunds')
    .node('decide', async (s, ctx) => ({
      quote: await ctx.call<string>('quote', { amount: s.amount }),
      note: await ctx
        .call<string>('refund', { amount: s.amount })
        .catch((e: unknown) => {
          if (e instanceof ToolDenied) return `not refunded (${e.message})`;
          throw e;
        }),
    }))
    .end('decide');
  return { registry, flow, executor: new Executor(registry) };
}

/**
 * The refunds flow over a memory store (a fresh one unless given). `newRunner` makes a runner
 * that seals with KEY into `checkpoints`: the store itself, or a crashing wrapper of it.
 */
function refunds(
  options: { store?: MemoryCheckpointStore; onRefund?: () => void } = {},
) {
  const ran: string[] = [];
  const store = options.store ?? new MemoryCheckpointStore();
  const { flow, executor } = setup(ran, options);
  const newRunner = (checkpoints: CheckpointStore = store) =>
    new FlowRunner(executor, { checkpoints, checkpointKey: KEY });
  return { ran, store, flow, executor, newRunner };
}

/** The refund runs recorded in `ran` (each one is a real run of the tool). */
function refundRuns(ran: string[]) {
  return ran.filter((x) => x.startsWith('refund'));
}

/**
 * Runs `runId` until it pauses for the refund's approval, then resumes it approved through
 * `dying`, which must crash.
 */
async function pauseThenCrashOnResume(
  t: ReturnType<typeof refunds>,
  dying: CheckpointStore,
  amount: number,
  runId: string,
) {
  await t.newRunner().run(t.flow, { amount }, { runId });
  await expect(
    t.newRunner(dying).resume(t.flow, runId, { approved: true }),
  ).rejects.toBeInstanceOf(SimulatedCrash);
}

describe('Approvals', () => {
  it('a tool that needs approval pauses the run: checkpoint paused, call logged pending, nothing ran', async () => {
    const { ran, store, flow, newRunner } = refunds();
    const r = await newRunner().run(flow, { amount: 30 }, { runId: 'p' });
    expect(r).toMatchObject({
      status: 'paused',
      step: 1,
      pending: {
        node: 'decide',
        index: 1,
        tool: 'refund',
        args: { amount: 30 },
      },
    });
    expect(ran).toEqual(['quote']);
    const { calls } = await store.history('p');
    expect(calls.map((c) => [decode(c).tool, decode(c).phase])).toEqual([
      ['quote', 'started'],
      ['quote', 'done'],
      ['refund', 'pending'],
    ]);
    expect(openCheckpoint(ring, (await store.latest('p'))!).status).toBe(
      'paused',
    );
  });

  it('"A run that was paused for an approval is not crashed: recover gives it back as a paused result"', async () => {
    const { store, flow, newRunner } = refunds();
    await newRunner().run(flow, { amount: 5 }, { runId: 'p' });
    const other = newRunner();
    await expect(other.recover(flow, 'p')).resolves.toMatchObject({
      status: 'paused',
      pending: { tool: 'refund' },
    });
    expect(
      (await other.recoverAll(flow, { force: true })).get('p'),
    ).toMatchObject({ status: 'paused' });
    expect((await store.head('p'))?.step).toBe(1); // nothing written
  });

  it('resume approves: the decision is sealed into the next checkpoint, the call runs once, finished calls replay', async () => {
    const { ran, store, flow, newRunner } = refunds();
    const runner = newRunner();
    await runner.run(flow, { amount: 30 }, { runId: 'a' });
    const r = await runner.resume(flow, 'a', { approved: true, by: 'alice' });
    expect(r).toMatchObject({
      status: 'done',
      state: { quote: 'quote 30', note: 'refunded 30' },
    });
    expect(refundRuns(ran)).toHaveLength(1);
    expect(ran.filter((x) => x === 'quote')).toHaveLength(1); // replayed, not rerun
    const resumed = (await store.history('a')).checkpoints.map((c) =>
      bodyOf(c.sealed),
    );
    expect(resumed[2]).toMatchObject({
      reason: 'resume',
      decisions: [{ tool: 'refund', approved: true, by: 'alice' }],
    });
    expect(resumed[3]?.decisions).toBeUndefined(); // spent
    await expect(
      runner.resume(flow, 'a', { approved: true }),
    ).rejects.toBeInstanceOf(CheckpointConflict);
  });

  it('resume denies: the node gets ToolDenied and can handle it; the tool does not run', async () => {
    const { ran, flow, newRunner } = refunds();
    const runner = newRunner();
    await runner.run(flow, { amount: 30 }, { runId: 'd' });
    const r = await runner.resume(flow, 'd', {
      approved: false,
      by: 'bob',
      reason: 'over limit',
    });
    expect(r.state.note).toBe(
      'not refunded ("refund" was denied by bob: over limit)',
    );
    expect(refundRuns(ran)).toEqual([]);
  });

  it('an unhandled denial fails the run with the reason', async () => {
    const registry = new ToolRegistry().register('wire', () => 'sent', {
      approval: true,
    });
    const flow = new Flow('wire')
      .node('w', async (_s, ctx) => ({
        r: await ctx.call('wire', { to: 'x' }),
      }))
      .end('w');
    const runner = new FlowRunner(new Executor(registry));
    await runner.run(flow, {}, { runId: 'u' });
    const r = await runner.resume(flow, 'u', {
      approved: false,
      reason: 'fraud',
    });
    expect(r).toMatchObject({
      status: 'failed',
      error: { name: 'ToolDenied', message: expect.stringContaining('fraud') },
    });
  });

  it('two resumes at once: exactly one wins, the other gets CheckpointConflict; the call runs once', async () => {
    const { ran, flow, newRunner } = refunds();
    await newRunner().run(flow, { amount: 1 }, { runId: 'two' });
    // two runners, as two processes would be
    const results = await Promise.allSettled([
      newRunner().resume(flow, 'two', { approved: true }),
      newRunner().resume(flow, 'two', { approved: false }),
    ]);
    expect(results.filter((x) => x.status === 'fulfilled')).toHaveLength(1);
    expect(
      (results.find((x) => x.status === 'rejected') as PromiseRejectedResult)
        .reason,
    ).toBeInstanceOf(CheckpointConflict);
    expect(refundRuns(ran).length).toBeLessThanOrEqual(1);
  });

  it('"A crash before that save leaves the run paused and resumable"', async () => {
    const t = refunds();
    const dying = new CrashingStore(
      t.store,
      (w, m) => w.kind === 'save' && m === 'before',
    );
    await pauseThenCrashOnResume(t, dying, 9, 'b');
    expect((await t.store.head('b'))?.status).toBe('paused');
    const r = await t.newRunner().resume(t.flow, 'b', { approved: true });
    expect(r.status).toBe('done');
    expect(refundRuns(t.ran)).toHaveLength(1);
  });

  it('"a crash after it is recovered by spending the stored decision then" (the approved call runs once)', async () => {
    const t = refunds();
    const dying = new CrashingStore(
      t.store,
      (w, m) =>
        w.kind === 'save' &&
        m === 'after' &&
        bodyOf(w.checkpoint.sealed).reason === 'resume',
    );
    await pauseThenCrashOnResume(t, dying, 7, 'c');
    await settle();
    expect(refundRuns(t.ran)).toEqual([]);
    const r = await t.newRunner().recover(t.flow, 'c');
    expect(r).toMatchObject({ status: 'done', state: { note: 'refunded 7' } });
    expect(refundRuns(t.ran)).toHaveLength(1);
  });

  it('a crash while the approved call runs leaves it in doubt (it needs a decision, like any call)', async () => {
    const store = new MemoryCheckpointStore();
    const dying = new CrashingStore(store);
    const t = refunds({ store, onRefund: () => dying.kill() });
    await pauseThenCrashOnResume(t, dying, 3, 'x');
    await settle();
    // a fresh registry, without the hook that kills the store
    const { registry } = setup(t.ran);
    const w = runnerOn(store, registry);
    await expect(w.recover(t.flow, 'x')).rejects.toThrow(/refund/);
    const r = await w.recover(t.flow, 'x', { rerunInDoubt: true });
    expect(r.state.note).toBe('refunded 3');
  });

  it('resume of a run that is not paused is refused, and a ctx for someone else is refused', async () => {
    const { flow, newRunner } = refunds();
    const runner = newRunner();
    await runner.run(flow, { amount: 2 }, { runId: 'id', ctx: { user: 'u1' } });
    await expect(
      runner.resume(
        flow,
        'id',
        { approved: true },
        { ctx: { user: 'mallory' } },
      ),
    ).rejects.toThrow(/access denied/);
    await runner.resume(flow, 'id', { approved: true });
    await expect(
      runner.resume(flow, 'id', { approved: true }),
    ).rejects.toBeInstanceOf(CheckpointConflict);
  });
});
