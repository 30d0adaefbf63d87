/**
 * Approvals beyond the pause (issue 5, parts 1 and 3): an approval policy on the registry deciding
 * per call, and the synchronous `ApprovalPort` awaited inside the call. The port's wait is logged
 * (`approving`) before it is asked and its decision before the tool runs, so a crash while it
 * waits leaves the call in doubt (spec: "A crash while a call waits on a synchronous approval
 * port also leaves it in doubt"), and a decided call replays after recovery.
 */
import {
  CheckpointConflict,
  Flow,
  MemoryCheckpointStore,
  ToolDenied,
  ToolRegistry,
  type ToolFailed,
  idempotencyKey,
  type ApprovalPolicy,
  type ApprovalPolicyContext,
  type ApprovalPort,
  type ApprovalRequest,
  type ApprovalVerdict,
  type CheckpointStore,
} from 'agent-adapter';
import { CrashingStore, settle } from 'agent-adapter/testing';
import {
  bodyOf,
  callsInDoubt,
  diesOn,
  runnerOn as keyedRunner,
} from '../../../../test/utils/specs';

interface S {
  amount: number;
  r?: unknown;
  after?: unknown;
}

/** What a node saw of a failed call, as plain data. */
function seen(e: unknown) {
  const f = e as ToolFailed;
  return {
    class: f.constructor.name,
    denied: e instanceof ToolDenied,
    errorName: f.errorName,
    message: f.message,
    replayed: f.replayed,
  };
}

/** One node: refund (its failure caught into `r`), then `after`, which can kill the worker. */
const flow = new Flow<S>('refunds')
  .node('n', async (s, ctx) => {
    const r = await ctx
      .call('refund', { amount: s.amount })
      .catch((e: unknown) => ({ error: seen(e) }));
    return { r, after: await ctx.call('after') };
  })
  .end('n');

interface Setup {
  ran: Array<{ amount: number; key: string }>;
  approval?: boolean | ApprovalPolicy<{ amount: number }>;
  idempotent?: boolean;
  after?: () => unknown;
  inside?: () => void;
}

function registry(o: Setup): ToolRegistry {
  return new ToolRegistry()
    .register(
      'refund',
      (a: { amount: number }) => {
        o.inside?.();
        o.ran.push({ amount: a.amount, key: idempotencyKey() });
        return `refunded ${a.amount}`;
      },
      {
        approval: o.approval ?? true,
        ...(o.idempotent !== undefined && { idempotent: o.idempotent }),
      },
    )
    .register('after', o.after ?? (() => 'after'), { idempotent: true });
}

function runnerOn(
  store: CheckpointStore,
  reg: ToolRegistry,
  approvals?: ApprovalPort,
) {
  return keyedRunner(store, reg, {
    ...(approvals && { approvals }),
  });
}

/** A port answering with `answer`, remembering what it was asked. */
function port(
  answer: (r: ApprovalRequest) => ApprovalVerdict | Promise<ApprovalVerdict>,
) {
  const asked: ApprovalRequest[] = [];
  return {
    asked,
    decide(request: ApprovalRequest) {
      asked.push(request);
      return answer(request);
    },
  };
}

async function logOf(store: MemoryCheckpointStore, runId: string) {
  return (await store.history(runId)).calls
    .map((c) => bodyOf(c.sealed))
    .filter((b) => b.tool === 'refund');
}

/** The phases the `refund` records of `runId` went through, in order. */
async function phasesOf(store: MemoryCheckpointStore, runId: string) {
  return (await logOf(store, runId)).map((b) => b.phase);
}

/**
 * Runs `runId` (refunding `amount`) with the registry and port `arrange` builds around the dying
 * store, which they kill; the run must die of it. Gives the store it left, and what was built.
 */
async function crashed<
  A extends { registry: ToolRegistry; approvals: ApprovalPort },
>(
  runId: string,
  amount: number,
  arrange: (dying: CrashingStore) => A,
): Promise<A & { store: MemoryCheckpointStore }> {
  const store = new MemoryCheckpointStore();
  const dying = new CrashingStore(store);
  const built = arrange(dying);
  await diesOn(
    runnerOn(dying, built.registry, built.approvals).run(
      flow,
      { amount },
      { runId },
    ),
  );
  return { ...built, store };
}

describe('Synchronous approval port', () => {
  it('approves inside the call: `approving` stored before the port is asked, the decision logged with `started`, the run never pauses', async () => {
    const ran: Setup['ran'] = [];
    const store = new MemoryCheckpointStore();
    let storedWhenAsked: unknown[] = [];
    const approver = port(async () => {
      storedWhenAsked = await phasesOf(store, 'a');
      return { approved: true, by: 'alice', reason: 'fine' };
    });
    const r = await runnerOn(store, registry({ ran }), approver).run(
      flow,
      { amount: 30 },
      { runId: 'a', ctx: { user: 'u1', thread: 't1' } },
    );
    expect(r).toMatchObject({ status: 'done', state: { r: 'refunded 30' } });
    expect(ran.map((x) => x.amount)).toEqual([30]);
    expect(storedWhenAsked).toEqual(['approving']);
    expect(approver.asked).toEqual([
      {
        runId: 'a',
        flow: 'refunds',
        node: 'n',
        index: 0,
        tool: 'refund',
        args: { amount: 30 },
        identity: { user: 'u1', thread: 't1' },
        requestId: expect.any(String) as unknown,
      },
    ]);
    // The request id is stable per call but is not the tool's idempotency key.
    expect(approver.asked[0]?.requestId).not.toBe(ran[0]?.key);
    const log = await logOf(store, 'a');
    expect(log.map((b) => b.phase)).toEqual(['approving', 'started', 'done']);
    expect(log[0]).toMatchObject({ args: { amount: 30 } });
    expect(log[1]).toMatchObject({
      decision: { approved: true, by: 'alice', reason: 'fine' },
    });
    const statuses = (await store.history('a')).checkpoints.map(
      (c) => c.status,
    );
    expect(statuses).not.toContain('paused');
  });

  it('denies: the node gets ToolDenied (by, reason), the tool does not run, the decision is sealed in `done`', async () => {
    const ran: Setup['ran'] = [];
    const store = new MemoryCheckpointStore();
    const approver = port(() => ({
      approved: false,
      by: 'bob',
      reason: 'over limit',
    }));
    const r = await runnerOn(store, registry({ ran }), approver).run(
      flow,
      { amount: 900 },
      { runId: 'd' },
    );
    expect(ran).toEqual([]);
    expect(r.state.r).toEqual({
      error: {
        class: 'ToolDenied',
        denied: true,
        errorName: 'ToolDenied',
        message: '"refund" was denied by bob: over limit',
        replayed: false,
      },
    });
    const log = await logOf(store, 'd');
    expect(log.map((b) => b.phase)).toEqual(['approving', 'done']);
    expect(log[1]).toMatchObject({
      decision: { approved: false, by: 'bob', reason: 'over limit' },
      outcome: { ok: false, error: { name: 'ToolDenied' } },
    });
  });

  it('approved with edited arguments: the tool gets them and they are logged; the call keeps its identity (args hash)', async () => {
    const ran: Setup['ran'] = [];
    const store = new MemoryCheckpointStore();
    const approver = port((req) => ({
      approved: true,
      args: { amount: (req.args as { amount: number }).amount / 2 },
    }));
    const r = await runnerOn(store, registry({ ran }), approver).run(
      flow,
      { amount: 80 },
      { runId: 'e' },
    );
    expect(r.state.r).toBe('refunded 40');
    const log = await logOf(store, 'e');
    expect(log[1]).toMatchObject({
      phase: 'started',
      args: { amount: 40 },
      decision: { approved: true, edited: true },
    });
    expect(log[1]?.argsHash).toBe(log[0]?.argsHash);
    // Unchanged arguments are not an edit.
    const same = port((req) => ({ approved: true, args: req.args }));
    await runnerOn(store, registry({ ran }), same).run(
      flow,
      { amount: 5 },
      { runId: 'e2' },
    );
    expect((await logOf(store, 'e2'))[1]?.decision).toEqual({
      approved: true,
    });
  });

  it('a crash while the port waits leaves the call in doubt: recovery needs a decision and writes nothing; rerunInDoubt asks again (same request id)', async () => {
    const ran: Setup['ran'] = [];
    const { store, approvals: first } = await crashed('w', 12, (dying) => ({
      registry: registry({ ran }),
      approvals: port(() => dying.kill('while the approval port waits')),
    }));
    expect(await phasesOf(store, 'w')).toEqual(['approving']);
    const before = await store.history('w');
    const second = port(() => ({ approved: true }));
    const w2 = runnerOn(store, registry({ ran }), second);
    expect(await callsInDoubt(w2.recover(flow, 'w'))).toEqual([
      [
        'refund',
        'was waiting for a synchronous approval, no decision recorded',
      ],
    ]);
    expect(await store.history('w')).toEqual(before);
    expect(second.asked).toHaveLength(0);
    const r = await w2.recover(flow, 'w', { rerunInDoubt: true });
    expect(r).toMatchObject({ status: 'done', state: { r: 'refunded 12' } });
    expect(second.asked).toHaveLength(1);
    expect(second.asked[0]?.requestId).toBe(first.asked[0]?.requestId);
    expect(ran).toHaveLength(1);
  });

  it('a crash while the port waits, idempotent tool: recovery asks the port again without a decision', async () => {
    const ran: Setup['ran'] = [];
    const { store } = await crashed('wi', 3, (dying) => ({
      registry: registry({ ran, idempotent: true }),
      approvals: port(() => dying.kill()),
    }));
    const again = port(() => ({ approved: true }));
    const r = await runnerOn(
      store,
      registry({ ran, idempotent: true }),
      again,
    ).recover(flow, 'wi');
    expect(r.state.r).toBe('refunded 3');
    expect(again.asked).toHaveLength(1);
  });

  it('a crash while the approved tool runs: in doubt like any started call (the decision had been logged)', async () => {
    const ran: Setup['ran'] = [];
    const { store } = await crashed('in', 4, (dying) => ({
      registry: registry({ ran, inside: () => dying.kill() }),
      approvals: port(() => ({ approved: true })),
    }));
    const w2 = runnerOn(
      store,
      registry({ ran }),
      port(() => ({ approved: true })),
    );
    expect(await callsInDoubt(w2.recover(flow, 'in'))).toEqual([
      ['refund', 'started, no result recorded'],
    ]);
  });

  it.each([
    ['approved', true, 'refunded 21'],
    ['denied', false, undefined],
  ])(
    'replay after recovery: a call the port %s replays, the port is not asked again and the tool does not rerun',
    async (_what, approved, value) => {
      const ran: Setup['ran'] = [];
      const { store, approvals: first } = await crashed('rp', 21, (dying) => ({
        registry: registry({ ran, after: () => dying.kill() }),
        approvals: port(() => ({ approved, by: 'carol' })),
      }));
      const second = port(() => ({ approved: !approved }));
      const r = await runnerOn(store, registry({ ran }), second).recover(
        flow,
        'rp',
      );
      expect(first.asked).toHaveLength(1);
      expect(second.asked).toHaveLength(0);
      expect(ran).toHaveLength(approved ? 1 : 0);
      expect(r.status).toBe('done');
      if (value !== undefined) expect(r.state.r).toBe(value);
      else
        expect(r.state.r).toMatchObject({
          error: { denied: true, replayed: true, message: /by carol/ },
        });
    },
  );

  it('a port that throws fails the call with its error, sealed (the tool did not run); it replays after recovery', async () => {
    const ran: Setup['ran'] = [];
    const { store } = await crashed('pt', 8, (dying) => ({
      registry: registry({ ran, after: () => dying.kill() }),
      approvals: port(() => {
        throw new RangeError('approver offline');
      }),
    }));
    expect(await phasesOf(store, 'pt')).toEqual(['approving', 'done']);
    const fine = port(() => ({ approved: true }));
    const r = await runnerOn(store, registry({ ran }), fine).recover(
      flow,
      'pt',
    );
    expect(fine.asked).toHaveLength(0);
    expect(ran).toEqual([]);
    expect(r.state.r).toEqual({
      error: {
        class: 'ToolFailed',
        denied: false,
        errorName: 'RangeError',
        message: 'the approval port failed for "refund": approver offline',
        replayed: true,
      },
    });
  });

  it.each<[string, unknown, RegExp]>([
    ['undefined', undefined, /not an object/],
    ['a boolean', true, /not an object/],
    ['no approved flag', { approve: true }, /approved is not true or false/],
    ['a numeric by', { approved: true, by: 7 }, /by is not a string/],
    [
      'unsealable edited args',
      { approved: true, args: { at: new Date(0) } },
      /refund\(approved args\)/,
    ],
  ])(
    'a port answering %s fails the call with a clear error; the tool does not run',
    async (_what, answer, why) => {
      const ran: Setup['ran'] = [];
      const r = await runnerOn(
        new MemoryCheckpointStore(),
        registry({ ran }),
        port(() => answer as ApprovalVerdict),
      ).run(flow, { amount: 1 });
      expect(ran).toEqual([]);
      expect(r.state.r).toMatchObject({
        error: { class: 'ToolFailed', message: why },
      });
    },
  );

  it('a worker cut off while its port waits does not run the tool: the approved call runs once, on the worker that took over', async () => {
    const ran: Setup['ran'] = [];
    const store = new MemoryCheckpointStore();
    let release!: (v: ApprovalVerdict) => void;
    const slow = port(
      () => new Promise<ApprovalVerdict>((resolve) => (release = resolve)),
    );
    const w1 = runnerOn(store, registry({ ran }), slow)
      .run(flow, { amount: 50 }, { runId: 'f' })
      .catch((e: unknown) => e);
    while (slow.asked.length === 0) await settle();
    const r = await runnerOn(
      store,
      registry({ ran }),
      port(() => ({ approved: true, by: 'w2' })),
    ).recover(flow, 'f', { rerunInDoubt: true });
    expect(r.state.r).toBe('refunded 50');
    release({ approved: true, by: 'w1' });
    expect(await w1).toBeInstanceOf(CheckpointConflict);
    expect(ran).toHaveLength(1);
  });

  it('without a port a call that needs approval still pauses the run (the default)', async () => {
    const ran: Setup['ran'] = [];
    const r = await runnerOn(
      new MemoryCheckpointStore(),
      registry({ ran }),
    ).run(flow, { amount: 2 });
    expect(r).toMatchObject({ status: 'paused', pending: { tool: 'refund' } });
    expect(ran).toEqual([]);
  });

  it('refuses an `approvals` option that is not a port', () => {
    expect(() =>
      keyedRunner(new MemoryCheckpointStore(), new ToolRegistry(), {
        approvals: {} as ApprovalPort,
      }),
    ).toThrow(/approvals must be an ApprovalPort/);
  });
});

describe('Approval policy on the registry', () => {
  const bigOnly: ApprovalPolicy<{ amount: number }> = (a) => a.amount > 100;

  it('decides per call: a small refund runs at once, a large one pauses the run', async () => {
    const ran: Setup['ran'] = [];
    const store = new MemoryCheckpointStore();
    const runner = runnerOn(store, registry({ ran, approval: bigOnly }));
    const small = await runner.run(flow, { amount: 20 }, { runId: 's' });
    expect(small).toMatchObject({
      status: 'done',
      state: { r: 'refunded 20' },
    });
    const big = await runner.run(flow, { amount: 500 }, { runId: 'b' });
    expect(big).toMatchObject({
      status: 'paused',
      pending: { tool: 'refund', args: { amount: 500 } },
    });
    expect(ran.map((x) => x.amount)).toEqual([20]);
  });

  it('gets a copy of the logged arguments and the call`s context', async () => {
    const ran: Setup['ran'] = [];
    const calls: Array<[unknown, ApprovalPolicyContext]> = [];
    const policy: ApprovalPolicy<{ amount: number }> = (a, ctx) => {
      calls.push([{ ...a }, ctx]);
      a.amount = 0; // a policy cannot change what runs
      return false;
    };
    const r = await runnerOn(
      new MemoryCheckpointStore(),
      registry({ ran, approval: policy }),
    ).run(flow, { amount: 7 }, { runId: 'c', ctx: { user: 'u9' } });
    expect(r.state.r).toBe('refunded 7');
    expect(calls).toEqual([
      [
        { amount: 7 },
        {
          runId: 'c',
          flow: 'refunds',
          node: 'n',
          index: 0,
          tool: 'refund',
          identity: { user: 'u9' },
        },
      ],
    ]);
  });

  it('replay after recovery: an approved call replays without a new pause; the policy answers the same for the same args', async () => {
    const ran: Setup['ran'] = [];
    const store = new MemoryCheckpointStore();
    await runnerOn(store, registry({ ran, approval: bigOnly })).run(
      flow,
      { amount: 300 },
      { runId: 'rp' },
    );
    const dying = new CrashingStore(store);
    await diesOn(
      runnerOn(
        dying,
        registry({ ran, approval: bigOnly, after: () => dying.kill() }),
      ).resume(flow, 'rp', { approved: true }),
    );
    expect(ran).toHaveLength(1);
    const r = await runnerOn(
      store,
      registry({ ran, approval: bigOnly }),
    ).recover(flow, 'rp');
    expect(r).toMatchObject({ status: 'done', state: { r: 'refunded 300' } });
    expect(ran).toHaveLength(1);
  });

  it('with a synchronous port, only the calls the policy picks are sent to it', async () => {
    const ran: Setup['ran'] = [];
    const approver = port(() => ({ approved: true }));
    const runner = runnerOn(
      new MemoryCheckpointStore(),
      registry({ ran, approval: bigOnly }),
      approver,
    );
    await runner.run(flow, { amount: 10 });
    await runner.run(flow, { amount: 1000 });
    expect(approver.asked.map((a) => a.args)).toEqual([{ amount: 1000 }]);
    expect(ran.map((x) => x.amount)).toEqual([10, 1000]);
  });

  it.each<[string, () => unknown, RegExp]>([
    [
      'returns something else than a boolean',
      () => 'yes',
      /^Tool "refund": the approval policy returned "yes"; it must return true or false/,
    ],
    [
      'returns a promise',
      () => Promise.resolve(true),
      /the approval policy returned a promise/,
    ],
    [
      'throws',
      () => {
        throw new Error('policy bug');
      },
      /^policy bug$/,
    ],
  ])(
    'a policy that %s fails the call before anything is logged; the tool does not run',
    async (_what, policy, why) => {
      const ran: Setup['ran'] = [];
      const store = new MemoryCheckpointStore();
      const r = await runnerOn(
        store,
        registry({
          ran,
          approval: policy as ApprovalPolicy<{ amount: number }>,
        }),
      ).run(flow, { amount: 1 }, { runId: 'bad' });
      expect(ran).toEqual([]);
      expect(await logOf(store, 'bad')).toEqual([]);
      expect(r.state.r).toMatchObject({ error: { message: why } });
    },
  );
});
