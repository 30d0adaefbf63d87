/**
 * Continuous takeover (`FlowRunner.takeOver`): a live worker finishes the runs of a worker that
 * died, within the lease plus one look and with no restart; it leaves live workers' runs alone,
 * takes a run needing a decision once (not again until its head changes), and stops cleanly.
 */
import {
  Flow,
  RecoveryNeedsDecision,
  ToolRegistry,
  type CheckpointStore,
  type RecoveryOutcome,
} from 'agent-adapter';
import { CrashingStore, settle } from 'agent-adapter/testing';
import { memoryAndSqlite, runnerOn } from '../../../../../test/utils/specs';

interface Order {
  paid?: string;
  sent?: string;
}

/** charge (not idempotent), then mail (idempotent); `gate` holds the mail until opened. */
function orderFlow(): Flow<Order> {
  return new Flow<Order>('order')
    .node('pay', async (_s, ctx) => ({
      paid: await ctx.call<string>('charge', { run: ctx.runId }),
    }))
    .node('send', async (_s, ctx) => ({
      sent: await ctx.call<string>('mail', { run: ctx.runId }),
    }))
    .edge('pay', 'send')
    .end('send');
}

function tools(
  ran: string[],
  die?: { store: CrashingStore; in: string },
  mailMs = 0,
) {
  return new ToolRegistry()
    .register('charge', async (a: { run: string }) => {
      if (die?.in === 'charge') die.store.kill();
      ran.push(`charge:${a.run}`);
      return 'charged';
    })
    .register(
      'mail',
      async (a: { run: string }) => {
        if (die?.in === 'mail') die.store.kill();
        await new Promise((r) => setTimeout(r, mailMs));
        ran.push(`mail:${a.run}`);
        return 'sent';
      },
      { idempotent: true },
    );
}

const until = async (ok: () => Promise<boolean>, ms: number) => {
  const end = Date.now() + ms;
  while (!(await ok())) {
    if (Date.now() > end) return false;
    await new Promise((r) => setTimeout(r, 20));
  }
  return true;
};

describe.each(memoryAndSqlite('takeover'))('takeOver on %s', (_name, fresh) => {
  const LEASE = 300;
  let store: CheckpointStore;
  fresh((s) => (store = s));

  it("finishes a dead worker's run within the lease plus one look, with no restart; a live worker's run is left alone", async () => {
    const ran: string[] = [];
    const dying = new CrashingStore(store);
    const w1 = runnerOn(dying, tools(ran, { store: dying, in: 'mail' }), {
      leaseMs: LEASE,
      workerId: 'w1',
    });
    const w2 = runnerOn(store, tools(ran), { leaseMs: LEASE, workerId: 'w2' });
    const outcomes: Array<RecoveryOutcome<unknown>> = [];
    const takeover = w2.takeOver([orderFlow()], {
      everyMs: 50,
      onOutcome: (_flow, o) => outcomes.push(o),
    });
    try {
      const died = Date.now();
      await w1.run(orderFlow(), {}, { runId: 'o1' }).catch(() => undefined);
      await settle();
      // A live worker's run, in a mail that outlasts three leases (renewed meanwhile), is left
      // alone while w2 looks every 50 ms.
      const w3 = runnerOn(store, tools(ran, undefined, 3 * LEASE), {
        leaseMs: LEASE,
        workerId: 'w3',
      });
      const live = await w3.run(orderFlow(), {}, { runId: 'o2' });
      w3.close();
      expect(live.status).toBe('done');

      expect(
        await until(
          async () => (await store.head('o1'))?.status === 'done',
          LEASE + 2_000,
        ),
      ).toBe(true);
      expect(Date.now() - died).toBeLessThan(LEASE + 2_000);
      // The charge ran once (replayed), the mail (idempotent, in doubt) ran again once.
      expect(ran.filter((r) => r === 'charge:o1')).toHaveLength(1);
      expect(ran.filter((r) => r === 'mail:o1')).toHaveLength(1);
      expect(ran.filter((r) => r.endsWith(':o2'))).toEqual([
        'charge:o2',
        'mail:o2',
      ]);
      expect(outcomes.map(([id]) => id)).toEqual(['o1']);
      expect((await store.listDue({ now: Date.now() + LEASE })).length).toBe(0);
    } finally {
      await takeover.stop();
      w1.close();
      w2.close();
    }
  });

  it('a run needing a decision is reported once, not taken again until its head changes', async () => {
    const ran: string[] = [];
    const dying = new CrashingStore(store);
    const w1 = runnerOn(dying, tools(ran, { store: dying, in: 'charge' }), {
      leaseMs: LEASE,
    });
    await w1.run(orderFlow(), {}, { runId: 'o3' }).catch(() => undefined);
    await settle();
    const w2 = runnerOn(store, tools(ran), { leaseMs: LEASE });
    const outcomes: Array<RecoveryOutcome<unknown>> = [];
    const takeover = w2.takeOver([orderFlow()], {
      everyMs: 20,
      onOutcome: (_flow, o) => outcomes.push(o),
    });
    try {
      expect(await until(async () => outcomes.length > 0, LEASE + 2_000)).toBe(
        true,
      );
      await new Promise((r) => setTimeout(r, 300)); // many looks
      expect(outcomes).toHaveLength(1);
      expect(outcomes[0]![1]).toBeInstanceOf(RecoveryNeedsDecision);
      expect(ran).toEqual([]);
      // The operator decides (a new checkpoint): the takeover finishes it.
      await w2.resolve(orderFlow(), 'o3', {
        calls: [{ call: 'pay#0', ran: true, result: 'charged elsewhere' }],
        by: 'ann',
        reason: 'provider says charged',
      });
      expect(
        await until(
          async () => (await store.head('o3'))?.status === 'done',
          LEASE + 2_000,
        ),
      ).toBe(true);
      expect(ran).toEqual(['mail:o3']);
    } finally {
      await takeover.stop();
      w1.close();
      w2.close();
    }
  });

  it('stop() ends the looks and waits for the takeovers in flight', async () => {
    const w = runnerOn(store, tools([]), { leaseMs: LEASE });
    let looks = 0;
    const listDue = store.listDue.bind(store);
    store.listDue = (q) => {
      looks++;
      return listDue(q);
    };
    const takeover = w.takeOver([orderFlow()], { everyMs: 10 });
    await new Promise((r) => setTimeout(r, 100));
    await takeover.stop();
    const seen = looks;
    expect(seen).toBeGreaterThan(2);
    await new Promise((r) => setTimeout(r, 60));
    expect(looks).toBe(seen);
    w.close();
  });

  it('refuses an everyMs or concurrency that is not a whole number in range', () => {
    const w = runnerOn(store, tools([]), { leaseMs: LEASE });
    expect(() => w.takeOver([orderFlow()], { everyMs: 0 })).toThrow(/everyMs/);
    expect(() => w.takeOver([orderFlow()], { concurrency: 1.5 })).toThrow(
      /concurrency/,
    );
    w.close();
  });
});
