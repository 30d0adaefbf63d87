/**
 * Continuous takeover (`FlowRunner.takeOver`): a live worker finishes the runs of a worker that
 * died, within the lease plus one look and with no restart; it leaves live workers' runs alone,
 * takes a run needing a decision once (not again until its head changes), and stops cleanly.
 */
import {
  Executor,
  FlowRunner,
  RecoveryNeedsDecision,
  RunAccessDenied,
  type CheckpointStore,
  type RecoveryOutcome,
} from 'agent-adapter';
import { CrashingStore, settle } from 'agent-adapter/testing';
import {
  KEY,
  ticketsFlow,
  ticketsRegistry,
  type LedgerEntry,
} from 'agent-adapter/testing/fixtures';
import { memoryAndSqlite, sleep, until } from '../../../../../test/utils/specs';

const LEASE = 300;
const ORDER = { show: 'Hamlet', seats: 2 };

/**
 * A worker on `store` whose tools append to `ledger`, holding leases of `leaseMs`; `dieIn` kills it
 * (its store view) when that tool starts, `slowIn` makes that tool outlast two of its leases.
 */
function worker(
  store: CheckpointStore,
  ledger: LedgerEntry[],
  name: string,
  tools: { dieIn?: string; slowIn?: string; leaseMs?: number } = {},
): FlowRunner {
  const leaseMs = tools.leaseMs ?? LEASE;
  const view = tools.dieIn ? new CrashingStore(store) : store;
  const registry = ticketsRegistry(ledger, name, {
    onTool: async (tool) => {
      if (tool === tools.dieIn) (view as CrashingStore).kill();
      if (tool === tools.slowIn) await sleep(2 * leaseMs);
    },
  });
  return new FlowRunner(new Executor(registry), {
    checkpoints: view,
    checkpointKey: KEY,
    leaseMs,
    workerId: name,
  });
}

/** `runner`'s takeover of tickets runs, looking every `everyMs`, with the outcomes it reported. */
function watching(runner: FlowRunner, everyMs: number) {
  const outcomes: Array<RecoveryOutcome<unknown>> = [];
  const takeover = runner.takeOver([ticketsFlow()], {
    everyMs,
    onOutcome: (_flow, o) => outcomes.push(o),
  });
  return { takeover, outcomes };
}
const by = (ledger: LedgerEntry[], worker: string) =>
  ledger.filter((e) => e.worker === worker).map((e) => e.tool);

describe.each(memoryAndSqlite('takeover'))('takeOver on %s', (_name, fresh) => {
  let store: CheckpointStore;
  fresh((s) => (store = s));
  const done = async (runId: string) =>
    (await store.head(runId))?.status === 'done';

  it("finishes a dead worker's run within the lease plus one look, with no restart; a live worker's run is left alone", async () => {
    const ledger: LedgerEntry[] = [];
    const w1 = worker(store, ledger, 'w1', { dieIn: 'hold_seats' });
    const w2 = worker(store, ledger, 'w2');
    const { takeover, outcomes } = watching(w2, 50);
    try {
      const died = Date.now();
      await w1.run(ticketsFlow(), ORDER, { runId: 'o1' }).catch(() => 0);
      await settle();
      // A live worker's run, in a mail that outlasts two of its leases (renewed meanwhile), is
      // left alone while w2 looks every 50 ms. Its lease is four of w1's: a renewal a third of
      // the way in still lands in time when a loaded CI machine stalls the event loop for 500 ms
      // (with 300 ms leases a 125 ms stall let w2 see it lapse).
      const w3 = worker(store, ledger, 'w3', {
        slowIn: 'email_tickets',
        leaseMs: 4 * LEASE,
      });
      const o2 = w3.run(ticketsFlow(), ORDER, { runId: 'o2' });

      expect(await until(() => done('o1'), LEASE + 2_000)).toBe(true);
      expect(Date.now() - died).toBeLessThan(LEASE + 2_000);
      expect((await o2).status).toBe('done');
      w3.close();
      // w1 died as its hold (idempotent, in doubt) began: w2 ran the whole order once.
      expect(by(ledger, 'w1')).toEqual([]);
      expect(by(ledger, 'w2')).toEqual([
        'hold_seats',
        'charge_card',
        'email_tickets',
      ]);
      expect(by(ledger, 'w3')).toEqual([
        'hold_seats',
        'charge_card',
        'email_tickets',
      ]);
      expect(outcomes.map(([id]) => id)).toEqual(['o1']);
      expect(await store.listDue({ now: Date.now() + LEASE })).toEqual([]);
    } finally {
      await takeover.stop();
      w1.close();
      w2.close();
    }
  });

  it('a run needing a decision is reported once, not taken again until its head changes', async () => {
    const ledger: LedgerEntry[] = [];
    const w1 = worker(store, ledger, 'w1', { dieIn: 'charge_card' });
    await w1.run(ticketsFlow(), ORDER, { runId: 'o3' }).catch(() => 0);
    await settle();
    const w2 = worker(store, ledger, 'w2');
    const { takeover, outcomes } = watching(w2, 20);
    try {
      expect(await until(async () => outcomes.length > 0, LEASE + 2_000)).toBe(
        true,
      );
      await sleep(300); // many looks
      expect(outcomes).toHaveLength(1);
      expect(outcomes[0]![1]).toBeInstanceOf(RecoveryNeedsDecision);
      expect(by(ledger, 'w2')).toEqual([]);
      // The operator decides (a new checkpoint): the takeover finishes it.
      await w2.resolve(ticketsFlow(), 'o3', {
        calls: [{ call: 'pay#0', ran: true, result: 'charged elsewhere' }],
        by: 'ann',
        reason: 'provider says charged',
      });
      expect(await until(() => done('o3'), LEASE + 2_000)).toBe(true);
      expect(by(ledger, 'w2')).toEqual(['email_tickets']);
    } finally {
      await takeover.stop();
      w1.close();
      w2.close();
    }
  });

  it('a run it cannot take as it stands (it needs its principal) is reported once, not at every look', async () => {
    const w1 = worker(store, [], 'w1', { dieIn: 'hold_seats' });
    await w1
      .run(ticketsFlow(), ORDER, {
        runId: 'o4',
        ctx: { user: 'u1', principal: 'svc-1' },
      })
      .catch(() => 0);
    await settle();
    const w2 = worker(store, [], 'w2');
    const { takeover, outcomes } = watching(w2, 20);
    try {
      expect(await until(async () => outcomes.length > 0, LEASE + 2_000)).toBe(
        true,
      );
      await sleep(300); // many looks
      expect(outcomes).toHaveLength(1);
      expect(outcomes[0]![1]).toBeInstanceOf(RunAccessDenied);
    } finally {
      await takeover.stop();
      w1.close();
      w2.close();
    }
  });

  it('stop() ends the looks and waits for the takeovers in flight', async () => {
    const w = worker(store, [], 'w');
    let looks = 0;
    const listDue = store.listDue.bind(store);
    store.listDue = (query) => {
      looks++;
      return listDue(query);
    };
    const takeover = w.takeOver([ticketsFlow()], { everyMs: 10 });
    await sleep(100);
    await takeover.stop();
    const seen = looks;
    expect(seen).toBeGreaterThan(2);
    await sleep(60);
    expect(looks).toBe(seen);
    w.close();
  });

  it('stop() waits for a look against a store that stopped answering at most deadlineMs', async () => {
    const w = worker(store, [], 'w');
    let looking = false;
    // A store whose answer never comes (a client queueing commands while it reconnects).
    store.listDue = () => {
      looking = true;
      return new Promise(() => undefined);
    };
    const takeover = w.takeOver([ticketsFlow()], { everyMs: 10 });
    expect(await until(async () => looking, 2000)).toBe(true);
    const stopping = Date.now();
    await expect(takeover.stop({ deadlineMs: 100 })).resolves.toBe(0);
    const took = Date.now() - stopping;
    expect(took).toBeGreaterThanOrEqual(90);
    expect(took).toBeLessThan(1000);
    await expect(takeover.stop({ deadlineMs: -1 })).rejects.toThrow(
      /deadlineMs/,
    );
    w.close();
  });

  it('refuses an everyMs or concurrency that is not a whole number in range', () => {
    const w = worker(store, [], 'w');
    expect(() => w.takeOver([ticketsFlow()], { everyMs: 0 })).toThrow(
      /everyMs/,
    );
    expect(() => w.takeOver([ticketsFlow()], { concurrency: 1.5 })).toThrow(
      /concurrency/,
    );
    w.close();
  });
});
