/**
 * Who may resume a paused run (issue 5, part 4): the run's own identity, or a requester that the
 * runner's `canResume` policy allows (an approver, an operator). The run keeps its own identity,
 * and nothing is written when resume is refused.
 */
import {
  Executor,
  Flow,
  FlowRunner,
  MemoryCheckpointStore,
  RunAccessDenied,
  CheckpointConflict,
  ToolRegistry,
  type CheckpointStore,
  type ResumePolicy,
  type ResumeRequest,
  type RunIdentity,
} from 'agent-adapter';
import { CrashingStore, SimulatedCrash, settle } from 'agent-adapter/testing';
import { openCheckpoint } from '../../exec/durable/records';
import {
  bodyOf,
  ring,
  runnerOn as keyedRunner,
} from '../../../../../test/utils/specs';

interface S {
  amount: number;
  r?: string;
  who?: RunIdentity;
}

/**
 * A refund flow that pauses for approval and records the identity its node ran with in `ran`,
 * on a fresh memory store; `paused` starts a run of it as `ctx` and checks that it paused.
 */
function setup() {
  const ran: RunIdentity[] = [];
  const registry = new ToolRegistry().register(
    'refund',
    (a: { amount: number }) => `refunded ${a.amount}`,
    { approval: true },
  );
  const flow = new Flow<S>('refunds')
    .node('n', async (s, ctx) => {
      const r = await ctx.call<string>('refund', { amount: s.amount });
      ran.push({ ...ctx.identity });
      return { r, who: { ...ctx.identity } };
    })
    .end('n');
  const store = new MemoryCheckpointStore();
  const paused = async (runId: string, ctx: RunIdentity) => {
    const r = await runnerOn(store, registry).run(
      flow,
      { amount: 40 },
      { runId, ctx },
    );
    expect(r.status).toBe('paused');
  };
  return { ran, registry, flow, store, paused };
}

function runnerOn(
  store: CheckpointStore,
  registry: ToolRegistry,
  canResume?: ResumePolicy,
) {
  return keyedRunner(store, registry, {
    ...(canResume && { canResume }),
  });
}

/** Allows principal "ops" and remembers what it was asked. */
function opsOnly() {
  const asked: ResumeRequest[] = [];
  const policy: ResumePolicy = (request) => {
    asked.push(request);
    return request.requester.principal === 'ops';
  };
  return { asked, policy };
}

describe('resume: who may resume a run', () => {
  it('without a policy, only the run`s own identity: a ctx for anyone else is RunAccessDenied and nothing is written', async () => {
    const { registry, flow, store, paused } = setup();
    await paused('a', { user: 'u1' });
    const before = await store.history('a');
    await expect(
      runnerOn(store, registry).resume(
        flow,
        'a',
        { approved: true },
        { ctx: { principal: 'ops' } },
      ),
    ).rejects.toBeInstanceOf(RunAccessDenied);
    expect(await store.history('a')).toEqual(before);
    const r = await runnerOn(store, registry).resume(
      flow,
      'a',
      { approved: true },
      { ctx: { user: 'u1' } },
    );
    expect(r.state).toMatchObject({ r: 'refunded 40', who: { user: 'u1' } });
  });

  it('a requester the policy allows resumes the run, which keeps its own identity; the policy is asked with the run, the requester, the pending call and the decision', async () => {
    const { registry, flow, store, paused } = setup();
    await paused('b', { user: 'u1', thread: 't1' });
    const { asked, policy } = opsOnly();
    const r = await runnerOn(store, registry, policy).resume(
      flow,
      'b',
      { approved: true, by: 'ops-desk' },
      { ctx: { principal: 'ops' } },
    );
    expect(r).toMatchObject({
      status: 'done',
      state: { r: 'refunded 40', who: { user: 'u1', thread: 't1' } },
    });
    expect(asked).toEqual([
      {
        runId: 'b',
        flow: 'refunds',
        run: { user: 'u1', thread: 't1' },
        requester: { principal: 'ops' },
        pending: {
          node: 'n',
          index: 0,
          tool: 'refund',
          args: { amount: 40 },
          argsHash: expect.any(String) as unknown,
        },
        decision: { approved: true, by: 'ops-desk' },
      },
    ]);
    for (const record of (await store.history('b')).checkpoints) {
      expect(openCheckpoint(ring, record).identity).toEqual({
        user: 'u1',
        thread: 't1',
      });
    }
  });

  it.each<[string, ResumePolicy]>([
    ['false', () => false],
    ['a truthy non-boolean', () => 'yes' as unknown as boolean],
    ['a promise of false', () => Promise.resolve(false)],
  ])(
    'a policy answering %s refuses: RunAccessDenied, nothing written, the tool does not run',
    async (_what, policy) => {
      const { ran, registry, flow, store, paused } = setup();
      await paused('c', { user: 'u1' });
      const before = await store.history('c');
      await expect(
        runnerOn(store, registry, policy).resume(
          flow,
          'c',
          { approved: true },
          { ctx: { user: 'mallory' } },
        ),
      ).rejects.toThrow(/access denied, the ctx's user is not the run's/);
      expect(await store.history('c')).toEqual(before);
      expect(ran).toEqual([]);
    },
  );

  it('an async policy may allow; a policy that throws refuses with its error, nothing written', async () => {
    const { registry, flow, store, paused } = setup();
    await paused('d', { user: 'u1' });
    const before = await store.history('d');
    await expect(
      runnerOn(store, registry, () => {
        throw new Error('directory down');
      }).resume(flow, 'd', { approved: true }, { ctx: { user: 'boss' } }),
    ).rejects.toThrow('directory down');
    expect(await store.history('d')).toEqual(before);
    const r = await runnerOn(store, registry, async () => {
      await settle();
      return true;
    }).resume(flow, 'd', { approved: true }, { ctx: { user: 'boss' } });
    expect(r.status).toBe('done');
  });

  it('the policy is not asked for the run`s own identity, nor without a ctx; a run with a principal still needs a ctx', async () => {
    const { registry, flow, store, paused } = setup();
    const { asked, policy } = opsOnly();
    await paused('own', { user: 'u1' });
    await runnerOn(store, registry, policy).resume(
      flow,
      'own',
      { approved: true },
      { ctx: { user: 'u1' } },
    );
    await paused('none', { user: 'u1' });
    await runnerOn(store, registry, policy).resume(flow, 'none', {
      approved: true,
    });
    await paused('p', { principal: 'svc' });
    await expect(
      runnerOn(store, registry, policy).resume(flow, 'p', { approved: true }),
    ).rejects.toThrow(/needs its ctx/);
    expect(asked).toEqual([]);
  });

  it('a run that is not paused: the policy is not asked and a stranger learns nothing (RunAccessDenied); its own identity gets CheckpointConflict', async () => {
    const { registry, flow, store, paused } = setup();
    await paused('e', { user: 'u1' });
    const { asked, policy } = opsOnly();
    const runner = runnerOn(store, registry, policy);
    await runner.resume(
      flow,
      'e',
      { approved: true, reason: 'first' },
      {
        ctx: { principal: 'ops' },
      },
    );
    expect(asked).toHaveLength(1);
    // The run ended: nothing left to decide.
    await expect(
      runner.resume(
        flow,
        'e',
        { approved: true },
        { ctx: { principal: 'ops' } },
      ),
    ).rejects.toBeInstanceOf(RunAccessDenied);
    await expect(
      runner.resume(flow, 'e', { approved: true }, { ctx: { user: 'u1' } }),
    ).rejects.toBeInstanceOf(CheckpointConflict);
    expect(asked).toHaveLength(1);
  });

  it('the policy only covers resume: recover with the approver`s ctx is still refused', async () => {
    const { registry, flow, store, paused } = setup();
    await paused('f', { user: 'u1' });
    await expect(
      runnerOn(store, registry, () => true).recover(flow, 'f', {
        ctx: { principal: 'ops' },
      }),
    ).rejects.toBeInstanceOf(RunAccessDenied);
  });

  it('replay after recovery: a crash after an allowed approver`s resume is saved; recovery (with the run`s own ctx) spends the stored decision once, as the run`s identity', async () => {
    const { ran, registry, flow, store, paused } = setup();
    await paused('g', { principal: 'svc' });
    const dying = new CrashingStore(
      store,
      (w, m) =>
        w.kind === 'save' &&
        m === 'after' &&
        bodyOf(w.checkpoint.sealed).reason === 'resume',
    );
    const { policy } = opsOnly();
    await expect(
      runnerOn(dying, registry, policy).resume(
        flow,
        'g',
        { approved: true, by: 'ops' },
        { ctx: { principal: 'ops' } },
      ),
    ).rejects.toBeInstanceOf(SimulatedCrash);
    await settle();
    expect(ran).toEqual([]);
    const w2 = runnerOn(store, registry, policy);
    // The run still acts with its own principal: the approver cannot recover it.
    await expect(
      w2.recover(flow, 'g', { ctx: { principal: 'ops' } }),
    ).rejects.toBeInstanceOf(RunAccessDenied);
    const r = await w2.recover(flow, 'g', { ctx: { principal: 'svc' } });
    expect(r).toMatchObject({
      status: 'done',
      state: { r: 'refunded 40', who: { principal: 'svc' } },
    });
    expect(ran).toEqual([{ principal: 'svc' }]);
  });

  it('refuses a canResume option that is not a function', () => {
    expect(
      () =>
        new FlowRunner(new Executor(new ToolRegistry()), {
          canResume: true as unknown as ResumePolicy,
        }),
    ).toThrow(/canResume must be a function/);
  });

  it('a requester the policy allows may not rerun calls in doubt: RunAccessDenied, nothing written, the policy not asked', async () => {
    const { registry, flow, store, paused } = setup();
    await paused('rr', { user: 'u1' });
    const before = await store.history('rr');
    const { asked, policy } = opsOnly();
    const refused = await runnerOn(store, registry, policy)
      .resume(
        flow,
        'rr',
        { approved: true },
        { ctx: { principal: 'ops' }, rerunInDoubt: true },
      )
      .catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(RunAccessDenied);
    expect((refused as Error).message).toMatch(
      /rerunInDoubt is the run's own decision/,
    );
    expect(asked).toEqual([]);
    expect(await store.history('rr')).toEqual(before);
    // The run's own identity may.
    const r = await runnerOn(store, registry, policy).resume(
      flow,
      'rr',
      { approved: true },
      { ctx: { user: 'u1' }, rerunInDoubt: true },
    );
    expect(r.status).toBe('done');
  });

  it('a stranger learns nothing of a run, not even its flow: RunAccessDenied before the flow is compared', async () => {
    const { registry, store, paused } = setup();
    await paused('secret', { user: 'u1' });
    const probe = new Flow<S>('probe').node('n', () => undefined).end('n');
    const runner = runnerOn(store, registry);
    for (const attempt of [
      () =>
        runner.resume(
          probe,
          'secret',
          { approved: true },
          { ctx: { user: 'mallory' } },
        ),
      () => runner.get(probe, 'secret', { ctx: { user: 'mallory' } }),
      () => runner.recover(probe, 'secret', { ctx: { user: 'mallory' } }),
    ]) {
      const error = await attempt().then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(RunAccessDenied);
      expect((error as Error).message).not.toMatch(/refunds/);
    }
  });
});
