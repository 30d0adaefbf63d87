/**
 * What an app and an operator see of a run stuck on calls in doubt: `get` says `needsDecision`
 * (only once the worker's lease expired, never for a run in progress), each call with its call id,
 * arguments, start time and the exact idempotency key the tool got; decisions are sealed with who,
 * when and why, emitted as `run.decided`, and read back by `runs inspect` / `runs show`. On the
 * memory store and on SQLite.
 */
import {
  Call,
  FailoverNeedsDecision,
  Flow,
  MemoryCheckpointStore,
  RecoveryNeedsDecision,
  ToolRegistry,
  idempotencyKey,
  type CheckpointStore,
  type RunDecidedEvent,
} from 'agent-adapter';
import { CrashingStore } from 'agent-adapter/testing';
import { cancelRun, showRun } from '../../cli/operations';
import { inspectRun } from '../../cli/inspect';
import {
  diesOn,
  memoryAndSqlite,
  runnerOn,
  sleep,
} from '../../../../../test/utils/specs';

interface Order {
  show: string;
  seats: number;
  note?: string;
}

const LEASE_MS = 150;

/**
 * hold_seats (idempotent) then charge_card (not): `crashIn` names the tool whose next call kills
 * its worker after it asked for its idempotency key; `gate` holds charge_card until released.
 */
function setup() {
  const keys: Record<string, string[]> = { hold_seats: [], charge_card: [] };
  const ran: string[] = [];
  const control: { crashIn?: string; gate?: Promise<void> } = {};
  const flow = () => {
    const args = (o: Order) => ({ show: o.show, seats: o.seats });
    return new Flow<Order>('tickets')
      .node('hold', Call('hold_seats', { args, into: 'note' }))
      .node('pay', Call('charge_card', { args, into: 'note' }))
      .edge('hold', 'pay')
      .end('pay');
  };
  const worker = (inner: CheckpointStore, workerId: string) => {
    const store = new CrashingStore(inner);
    const tool =
      (name: string) =>
      async (a: { show: string; seats: number }): Promise<string> => {
        keys[name]!.push(idempotencyKey());
        if (name === 'charge_card' && control.gate) await control.gate;
        if (control.crashIn === name) {
          control.crashIn = undefined;
          store.kill(`inside ${name}`);
        }
        ran.push(name);
        return `${name} ${a.seats}`;
      };
    const registry = new ToolRegistry()
      .register('hold_seats', tool('hold_seats'), { idempotent: true })
      .register('charge_card', tool('charge_card'));
    return runnerOn(store, registry, { workerId, leaseMs: LEASE_MS });
  };
  return { flow, worker, keys, ran, control };
}

const stores = memoryAndSqlite('needs-decision');

describe.each(stores)('calls in doubt on the %s store', (_, freshEach) => {
  let store: CheckpointStore;
  freshEach((made) => (store = made));

  /**
   * A fresh setup whose order-7 ran on w1, which died inside `tool` (waited past its lease when
   * `expire`), and the worker w2 that finds it.
   */
  async function crashedIn(tool: string, expire = true) {
    const s = setup();
    s.control.crashIn = tool;
    const w1 = s.worker(store, 'w1');
    await diesOn(
      w1.run(s.flow(), { show: 'Hamlet', seats: 2 }, { runId: 'order-7' }),
      w1,
    );
    if (expire) await sleep(LEASE_MS * 2);
    return { s, w2: s.worker(store, 'w2') };
  }

  it('a run whose worker is alive and inside a call is running, not in doubt', async () => {
    const s = setup();
    let release!: () => void;
    s.control.gate = new Promise((r) => (release = r));
    const w1 = s.worker(store, 'w1');
    const running = w1.run(
      s.flow(),
      { show: 'Hamlet', seats: 2 },
      { runId: 'order-7' },
    );
    while (s.keys.charge_card!.length === 0) await sleep(5);
    await sleep(LEASE_MS * 2); // renewed meanwhile: the worker is alive
    const now = await w1.get(s.flow(), 'order-7');
    expect(now.status).toBe('running');
    expect(now.needsDecision).toBeUndefined();
    release();
    expect((await running).status).toBe('done');
    expect((await w1.get(s.flow(), 'order-7')).needsDecision).toBeUndefined();
    w1.close();
  });

  it('a crashed run needs a decision once its lease expired: the calls, their arguments and the key the tool got', async () => {
    const { s, w2 } = await crashedIn('charge_card', false);
    // The lease is still live: w1 may be alive, so the run reads as in progress.
    expect((await w2.get(s.flow(), 'order-7')).needsDecision).toBeUndefined();
    await sleep(LEASE_MS * 2);

    const got = await w2.get(s.flow(), 'order-7');
    expect(got.status).toBe('running');
    expect(got.needsDecision).toEqual({
      owner: 'w1',
      leaseExpiresAt: expect.any(Number),
      calls: [
        {
          callId: 'pay#0',
          node: 'pay',
          index: 0,
          tool: 'charge_card',
          superstep: 1,
          segment: expect.any(Number),
          seq: 1,
          why: 'started, no result recorded',
          args: { show: 'Hamlet', seats: 2 },
          idempotencyKey: s.keys.charge_card![0],
          startedAt: expect.any(Number),
          at: expect.any(Number),
        },
      ],
    });
    expect(got.needsDecision!.leaseExpiresAt!).toBeLessThan(Date.now());

    // Recovery stops with the in-doubt error and writes nothing: still the same answer.
    await expect(w2.recover(s.flow(), 'order-7')).rejects.toBeInstanceOf(
      RecoveryNeedsDecision,
    );
    expect((await w2.get(s.flow(), 'order-7')).needsDecision?.calls).toEqual(
      got.needsDecision!.calls,
    );

    // The operator's tools show the same call, the same key.
    const inspected = await inspectRun(store, w2.keyRing, 'order-7');
    expect(inspected.verdict).toBe('needs-decision');
    expect(inspected.leaseLive).toBe(false);
    expect(inspected.owner).toBe('w1');
    expect(inspected.inDoubt).toEqual([
      {
        ...got.needsDecision!.calls[0],
        action: 'in doubt (rerun only if idempotent)',
      },
    ]);
    const shown = await showRun(store, w2.keyRing, 'order-7');
    expect(shown.leaseLive).toBe(false);
    expect(shown.inDoubt.map((c) => c.idempotencyKey)).toEqual([
      s.keys.charge_card![0],
    ]);
    w2.close();
  });

  it('a failover the store reports is named first, with the calls in doubt it still holds (get, recover, runs inspect)', async () => {
    const { s, w2 } = await crashedIn('charge_card');
    // What RedisCheckpointStore says of a run a replaced master wrote last (redis.failover.ts;
    // the real failover: test/stores/redis-failover.e2e-spec.ts).
    const failover = { lostHistory: 'a'.repeat(40), history: 'b'.repeat(40) };
    store.failover = () => Promise.resolve(failover);
    const got = await w2.get(s.flow(), 'order-7');
    expect(got.needsDecision).toMatchObject({
      failover,
      calls: [{ callId: 'pay#0', tool: 'charge_card' }],
    });
    const recovery = w2.recover(s.flow(), 'order-7');
    await expect(recovery).rejects.toBeInstanceOf(FailoverNeedsDecision);
    await expect(recovery).rejects.toMatchObject({
      lostHistory: failover.lostHistory,
      calls: [['charge_card', 'started, no result recorded']],
    });
    await expect(recovery).rejects.toThrow(
      /1 call\(s\) the store holds are in doubt besides.*runs restored --failover/,
    );
    const inspected = await inspectRun(store, w2.keyRing, 'order-7');
    expect(inspected).toMatchObject({ verdict: 'needs-decision', failover });
    expect(s.ran).toEqual(['hold_seats']);
    w2.close();
  });

  it('calls in doubt of idempotent tools need no decision (recovery reruns them)', async () => {
    const { s, w2 } = await crashedIn('hold_seats');
    expect((await w2.get(s.flow(), 'order-7')).needsDecision).toBeUndefined();
    // The inspector still lists it, with its key: it is in doubt, just not a decision.
    const inspected = await inspectRun(store, w2.keyRing, 'order-7', {
      idempotent: ['hold_seats'],
    });
    expect(inspected.inDoubt.map((c) => [c.callId, c.idempotencyKey])).toEqual([
      ['hold#0', s.keys.hold_seats![0]],
    ]);
    expect((await w2.recover(s.flow(), 'order-7')).status).toBe('done');
    // The rerun got the same key: what the display showed is what the tool was given.
    expect(s.keys.hold_seats).toEqual([
      s.keys.hold_seats![0],
      s.keys.hold_seats![0],
    ]);
    w2.close();
  });

  it('a rerun in doubt is sealed with who, when, why and the calls, emitted once stored, and shown', async () => {
    const { s, w2 } = await crashedIn('charge_card');
    const decided: RunDecidedEvent[] = [];
    w2.events.on('run.decided', (e) => decided.push(e));
    const before = Date.now();
    const r = await w2.recover(s.flow(), 'order-7', {
      rerunInDoubt: true,
      by: 'ops@example',
      reason: 'no charge at the provider',
    });
    expect(r.status).toBe('done');
    expect(r.needsDecision).toBeUndefined();
    expect(s.keys.charge_card).toEqual([
      s.keys.charge_card![0],
      s.keys.charge_card![0],
    ]);
    const rerun = {
      kind: 'rerun',
      step: expect.any(Number),
      calls: ['pay#0'],
      tools: ['charge_card'],
      by: 'ops@example',
      reason: 'no charge at the provider',
      at: expect.any(Number),
    };
    expect(decided).toEqual([
      {
        kind: 'flow',
        runId: 'order-7',
        flow: 'tickets',
        step: expect.any(Number),
        decision: rerun,
      },
    ]);
    expect(decided[0]!.decision.at!).toBeGreaterThanOrEqual(before);
    const inspected = await inspectRun(store, w2.keyRing, 'order-7');
    expect(inspected.decisions).toEqual([decided[0]!.decision]);
    expect((await showRun(store, w2.keyRing, 'order-7')).decisions).toEqual([
      decided[0]!.decision,
    ]);
    expect((await w2.get(s.flow(), 'order-7')).needsDecision).toBeUndefined();
    w2.close();
  });

  it('a plain recovery decides nothing: no decision is sealed or emitted', async () => {
    const { s, w2 } = await crashedIn('hold_seats');
    const decided: RunDecidedEvent[] = [];
    w2.events.on('run.decided', (e) => decided.push(e));
    await w2.recover(s.flow(), 'order-7');
    expect(decided).toEqual([]);
    expect((await inspectRun(store, w2.keyRing, 'order-7')).decisions).toEqual(
      [],
    );
    w2.close();
  });

  it("an operator's cancel is shown with who, when and why", async () => {
    const { s, w2 } = await crashedIn('charge_card');
    await cancelRun(store, w2.keyRing, 'order-7', {
      by: 'operator:ann',
      reason: 'customer called',
    });
    const shown = await showRun(
      store,
      s.worker(store, 'w3').keyRing,
      'order-7',
    );
    expect(shown.inDoubt).toEqual([]);
    expect(shown.decisions).toEqual([
      {
        kind: 'cancel',
        step: shown.head.step,
        calls: [],
        tools: [],
        by: 'operator:ann',
        reason: 'customer called',
        at: expect.any(Number),
      },
    ]);
  });
});

describe('approvals as decisions', () => {
  /** A refund tool that needs an approval. */
  const registry = new ToolRegistry().register(
    'refund',
    async (a: { amount: number }) => `refunded ${a.amount}`,
    { approval: true },
  );

  it('approve and deny are sealed with who, when and why, emitted, and listed in order', async () => {
    const store = new MemoryCheckpointStore();
    const flow = () =>
      new Flow<{ a?: string; b?: string }>('refunds')
        .node('first', async (_s, ctx) => ({
          a: await ctx.call<string>('refund', { amount: 5 }),
        }))
        .node('second', async (_s, ctx) => {
          try {
            return { b: await ctx.call<string>('refund', { amount: 9 }) };
          } catch {
            return { b: 'denied' };
          }
        })
        .edge('first', 'second')
        .end('second');
    const runner = runnerOn(store, registry);
    const decided: RunDecidedEvent[] = [];
    runner.events.on('run.decided', (e) => decided.push(e));
    expect((await runner.run(flow(), {}, { runId: 'r1' })).status).toBe(
      'paused',
    );
    await runner.resume(flow(), 'r1', {
      approved: true,
      by: 'ann',
      reason: 'ok',
    });
    const r = await runner.resume(flow(), 'r1', {
      approved: false,
      by: 'bob',
      reason: 'too much',
    });
    expect(r.status).toBe('done');
    expect(decided.map((e) => e.decision)).toEqual([
      {
        kind: 'approve',
        step: expect.any(Number),
        calls: ['first#0'],
        tools: ['refund'],
        by: 'ann',
        reason: 'ok',
        at: expect.any(Number),
      },
      {
        kind: 'deny',
        step: expect.any(Number),
        calls: ['second#0'],
        tools: ['refund'],
        by: 'bob',
        reason: 'too much',
        at: expect.any(Number),
      },
    ]);
    expect((await inspectRun(store, runner.keyRing, 'r1')).decisions).toEqual(
      decided.map((e) => e.decision),
    );
    runner.close();
  });

  it("a synchronous approval port's decision is listed too, dated by its record", async () => {
    const store = new MemoryCheckpointStore();
    const flow = new Flow<{ a?: string }>('sync-refunds')
      .node('only', async (_s, ctx) => ({
        a: await ctx.call<string>('refund', { amount: 3 }),
      }))
      .end('only');
    const runner = runnerOn(store, registry, {
      approvals: {
        decide: () => ({ approved: true, by: 'policy', reason: 'small' }),
      },
    });
    expect((await runner.run(flow, {}, { runId: 's1' })).status).toBe('done');
    expect((await showRun(store, runner.keyRing, 's1')).decisions).toEqual([
      {
        kind: 'approve',
        step: expect.any(Number),
        calls: ['only#0'],
        tools: ['refund'],
        by: 'policy',
        reason: 'small',
        at: expect.any(Number),
        sync: true,
      },
    ]);
    runner.close();
  });
});
