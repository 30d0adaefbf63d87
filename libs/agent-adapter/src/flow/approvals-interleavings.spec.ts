/**
 * Approvals under interleavings a review found: two nodes waiting for approval in one superstep,
 * decisions bound to arguments, calls in doubt inside a paused superstep, crashes around resume.
 */
import { CrashingStore, SimulatedCrash } from 'agent-adapter/testing';
import {
  Executor,
  Flow,
  FlowRunner,
  type NodeContext,
  MemoryCheckpointStore,
  ToolDenied,
  ToolRegistry,
} from 'agent-adapter';
import { sleep } from '../../../../test/utils/specs';
import { KEY, runnerOn } from '../../../../test/utils/specs';

interface S {
  a?: string;
  b?: string;
}

/** A `refund` tool body (it needs an approval) that appends 'refund' to `ran`. */
const refund = (ran: string[]) => () => {
  ran.push('refund');
  return 'refunded';
};

describe('Approvals: interleavings', () => {
  it('two nodes needing approval in one superstep: each decision is kept until spent, none is asked twice', async () => {
    const ran: string[] = [];
    const registry = new ToolRegistry()
      .register('slow', async () => {
        await sleep(30);
        return 'slow';
      })
      .register('fast', () => 'fast')
      .register(
        'refund',
        (x: { who: string }) => {
          ran.push(x.who);
          return `refunded ${x.who}`;
        },
        { approval: true },
      );
    // The refund of `who`, or 'denied <who>' when the operator denies it.
    const refundOrDenied = (ctx: NodeContext, who: string) =>
      ctx.call<string>('refund', { who }).catch((e: unknown) => {
        if (e instanceof ToolDenied) return `denied ${who}`;
        throw e;
      });
    const flow = new Flow<S>('two-approvals')
      // "a" reaches its approval call late on the first run (slow tool), first on the rerun
      // (its slow tool replays, and it is first in the frontier).
      .node('a', async (_s, ctx) => {
        await ctx.call('slow');
        return { a: await refundOrDenied(ctx, 'A') };
      })
      .node('b', async (_s, ctx) => {
        await ctx.call('fast');
        return { b: await refundOrDenied(ctx, 'B') };
      })
      .start('a', 'b')
      .end('a', 'b');
    const store = new MemoryCheckpointStore();
    const runner = runnerOn(store, registry);
    const first = await runner.run(flow, {}, { runId: 'lost' });
    expect(first).toMatchObject({
      status: 'paused',
      pending: { node: 'b', args: { who: 'B' } },
    });
    // The operator denies B.
    const second = await runner.resume(flow, 'lost', {
      approved: false,
      by: 'alice',
    });
    expect(second).toMatchObject({ status: 'paused', pending: { node: 'a' } });
    // The operator approves A. B was denied already: the run must finish, B never asked again.
    const third = await runner.resume(flow, 'lost', { approved: true });
    expect(third.pending).toBeUndefined();
    expect(third).toMatchObject({
      status: 'done',
      state: { a: 'refunded A', b: 'denied B' },
    });
    expect(ran).toEqual(['A']);
  });

  it('a call whose result was unrecordable in the paused superstep: resume fails closed, then reruns it when told', async () => {
    const ran: string[] = [];
    const registry = new ToolRegistry()
      .register('charge', async () => {
        await sleep(5);
        ran.push('charge');
        return { at: new Date() }; // not JSON-representable: recorded `unrecordable`
      })
      .register('refund', refund(ran), { approval: true });
    const flow = new Flow<S>('unrecordable')
      .node('a', async (_s, ctx) => {
        await ctx.call('charge');
        return { a: 'charged' };
      })
      .node('b', async (_s, ctx) => ({
        b: await ctx.call<string>('refund', {}),
      }))
      .start('a', 'b')
      .end('a', 'b');
    const store = new MemoryCheckpointStore();
    const runner = runnerOn(store, registry);
    const first = await runner.run(flow, {}, { runId: 'unrec' });
    expect(first.status).toBe('paused');
    expect(ran).toEqual(['charge']);
    // charge ran but its result could not be stored: resume fails closed like recover, naming it...
    await expect(
      runner.resume(flow, 'unrec', { approved: true }),
    ).rejects.toThrow(/charge/);
    expect((await store.head('unrec'))?.status).toBe('paused');
    // ...and the operator, having checked it, resumes with rerunInDoubt.
    const r = await runner.resume(
      flow,
      'unrec',
      { approved: true },
      { rerunInDoubt: true },
    );
    expect(r.status).toBe('done');
    // charge (slow) ran again as decided; refund ran once, approved.
    expect([...ran].sort()).toEqual(['charge', 'charge', 'refund']);
  });

  it('a decision covers the arguments the operator saw: a rerun with other arguments asks again', async () => {
    const ran: number[] = [];
    const registry = new ToolRegistry().register(
      'refund',
      (x: { amount: number }) => {
        ran.push(x.amount);
        return 'ok';
      },
      { approval: true },
    );
    let attempt = 0;
    const flow = new Flow<S>('args')
      .node('a', async (_s, ctx) => ({
        // e.g. an amount computed from the clock, a model reply or anything not replayed
        a: await ctx.call<string>('refund', {
          amount: attempt++ === 0 ? 30 : 3000,
        }),
      }))
      .end('a');
    const runner = runnerOn(new MemoryCheckpointStore(), registry);
    const first = await runner.run(flow, {}, { runId: 'args' });
    expect(first.pending?.args).toEqual({ amount: 30 });
    const r = await runner
      .resume(flow, 'args', { approved: true })
      .catch((e: unknown) => e);
    // Expected: the 3000 call is not covered by the approval of 30 (it pauses again or fails).
    expect(ran).not.toContain(3000);
    expect(r).not.toMatchObject({ status: 'done' });
  });

  it('recover(rerunInDoubt) whose rerun pauses before the in-doubt call: resume takes rerunInDoubt too', async () => {
    const ran: string[] = [];
    const shared = new MemoryCheckpointStore();
    const registry = new ToolRegistry()
      .register('quote', async () => {
        await sleep(5);
        return 'q';
      })
      .register('lookup', () => 'l')
      .register('email', async () => {
        ran.push('email');
        await sleep(20);
        if (!store1.dead) store1.kill('inside email');
        return 'sent';
      })
      .register('refund', refund(ran), { approval: true });
    const flow = new Flow<S>('in-doubt')
      .node('a', async (_s, ctx) => {
        await ctx.call('quote');
        return { a: await ctx.call<string>('refund', {}) };
      })
      .node('b', async (_s, ctx) => {
        await ctx.call('lookup');
        return { b: await ctx.call<string>('email', {}) };
      })
      .start('a', 'b')
      .end('a', 'b');
    const store1 = new CrashingStore(shared);
    const w1 = runnerOn(store1, registry);
    await expect(w1.run(flow, {}, { runId: 'doubt' })).rejects.toBeInstanceOf(
      SimulatedCrash,
    );
    w1.close();
    const w2 = runnerOn(shared, registry);
    // The operator checked: the mail was not sent, it may run again.
    const rec = await w2.recover(flow, 'doubt', { rerunInDoubt: true });
    expect(rec.status).toBe('paused');
    // The approval is given with the same permission for the call still in doubt.
    await expect(w2.resume(flow, 'doubt', { approved: true })).rejects.toThrow(
      /email/,
    );
    const r = await w2.resume(
      flow,
      'doubt',
      { approved: true },
      { rerunInDoubt: true },
    );
    expect(r.status).toBe('done');
  });

  it('pause -> resume (crash after the resume save) -> recover -> pause again on a 2nd call of the same node -> resume: counts hold, each call runs once', async () => {
    const ran: string[] = [];
    const registry = new ToolRegistry().register(
      'refund',
      (x: { who: string }) => {
        ran.push(x.who);
        return x.who;
      },
      { approval: true },
    );
    const flow = new Flow<S>('seq')
      .node('a', async (_s, ctx) => ({
        a:
          (await ctx.call<string>('refund', { who: 'A' })) +
          (await ctx.call<string>('refund', { who: 'B' })),
      }))
      .end('a');
    const shared = new MemoryCheckpointStore();
    const w1 = new FlowRunner(new Executor(registry), {
      checkpoints: new CrashingStore(
        shared,
        (w, m) =>
          w.kind === 'save' &&
          m === 'after' &&
          String(
            (
              JSON.parse(w.checkpoint.sealed.split('.').slice(3).join('.')) as {
                reason: string;
              }
            ).reason,
          ) === 'resume',
      ),
      checkpointKey: KEY,
    });
    await w1.run(flow, {}, { runId: 'seq' });
    await expect(
      w1.resume(flow, 'seq', { approved: true }),
    ).rejects.toBeInstanceOf(SimulatedCrash);
    w1.close();
    const w2 = runnerOn(shared, registry);
    expect(await w2.recover(flow, 'seq')).toMatchObject({
      status: 'paused',
      pending: { args: { who: 'B' } },
    });
    expect(await w2.recover(flow, 'seq')).toMatchObject({ status: 'paused' });
    expect(await w2.resume(flow, 'seq', { approved: true })).toMatchObject({
      status: 'done',
      state: { a: 'AB' },
    });
    expect(ran).toEqual(['A', 'B']);
  });
});
