/**
 * Durable sleep (`ctx.sleep`, `ctx.sleepUntil`): the run checkpoints `sleeping` with its sealed wake
 * time and its worker lets it go; any worker's takeover wakes it on time; the node runs again and
 * its calls and its sleep replay (no second sleep, no second call); a time that passed while no
 * worker was up runs at once.
 */
import {
  Executor,
  Flow,
  FlowRunner,
  RunSleeping,
  ToolRegistry,
  type CheckpointStore,
} from 'agent-adapter';
import { CrashingStore, SimulatedCrash } from 'agent-adapter/testing';
import {
  KEY,
  memoryAndSqlite,
  sleep,
  until,
} from '../../../../../test/utils/specs';

interface Reminder {
  to: string;
  sent?: string;
  late?: number;
}

/** A flow that charges, sleeps `ms`, then mails; `ran` logs each tool run. */
function reminderFlow(ms: number) {
  return new Flow<Reminder>('reminder')
    .node('remind', async (s, ctx) => {
      const charged = await ctx.call<string>('charge', { to: s.to });
      await ctx.sleep(ms);
      return { sent: await ctx.call<string>('mail', { to: s.to, charged }) };
    })
    .end('remind');
}

function tools(ran: string[], onMail?: () => void) {
  return new ToolRegistry()
    .register('charge', (a: { to: string }) => {
      ran.push('charge');
      return `charged ${a.to}`;
    })
    .register('mail', (a: { to: string }) => {
      ran.push('mail');
      onMail?.();
      return `mailed ${a.to}`;
    });
}

function runnerOn(
  store: CheckpointStore,
  ran: string[],
  name: string,
  onMail?: () => void,
) {
  return new FlowRunner(new Executor(tools(ran, onMail)), {
    checkpoints: store,
    checkpointKey: KEY,
    leaseMs: 2_000,
    workerId: name,
  });
}

describe.each(memoryAndSqlite('sleep'))('durable sleep on %s', (_n, fresh) => {
  let store: CheckpointStore;
  fresh((s) => (store = s));

  it('sleeps as a checkpoint and is woken on time by another worker; nothing runs twice', async () => {
    const ran: string[] = [];
    const flow = reminderFlow(400);
    const w1 = runnerOn(store, ran, 'w1');
    const before = Date.now();
    const slept = await w1.run(flow, { to: 'ann' }, { runId: 'r1' });
    expect(slept.status).toBe('sleeping');
    expect(slept.wakeAt).toBeGreaterThanOrEqual(before + 400);
    expect(ran).toEqual(['charge']);
    const head = await store.head('r1');
    expect(head).toMatchObject({
      status: 'sleeping',
      leaseExpiresAt: slept.wakeAt,
    });
    w1.close();

    // Another worker, looking every 5 s: its look-ahead sets a timer for the wake time.
    const w2 = runnerOn(store, ran, 'w2');
    const takeover = w2.takeOver([flow], { everyMs: 5_000 });
    await takeover.lookNow();
    try {
      expect(
        await until(
          async () => (await store.head('r1'))?.status === 'done',
          3_000,
        ),
      ).toBe(true);
      const woke = Date.now() - (slept.wakeAt as number);
      expect(woke).toBeGreaterThanOrEqual(0);
      expect(woke).toBeLessThan(500);
      expect(ran).toEqual(['charge', 'mail']);
      const done = await w2.get(flow, 'r1');
      expect(done.state.sent).toBe('mailed ann');
      expect(done.wakeAt).toBeUndefined();
    } finally {
      await takeover.stop();
      w2.close();
    }
  });

  it('before its wake time a sleeping run is not due, and recovering it changes nothing', async () => {
    // A wake time no test reaches: what follows cannot race it, however slow the machine.
    const ran: string[] = [];
    const flow = reminderFlow(60_000);
    const w1 = runnerOn(store, ran, 'w1');
    try {
      const slept = await w1.run(flow, { to: 'ann' }, { runId: 'early' });
      expect(slept.status).toBe('sleeping');
      expect(await store.listDue({ now: Date.now() })).toEqual([]);
      expect(await w1.recover(flow, 'early')).toMatchObject({
        status: 'sleeping',
        step: slept.step,
        wakeAt: slept.wakeAt,
      });
      expect(await store.head('early')).toMatchObject({
        status: 'sleeping',
        step: slept.step,
        leaseExpiresAt: slept.wakeAt,
      });
      expect(ran).toEqual(['charge']);
    } finally {
      w1.close();
    }
  });

  it('more runs waking at one time than a takeover takes at once: each place that comes free takes the next at once, not a look later', async () => {
    const ran: string[] = [];
    const flow = reminderFlow(300);
    const w1 = runnerOn(store, ran, 'w1');
    const wakes = await Promise.all(
      Array.from({ length: 12 }, (_, i) =>
        w1.run(flow, { to: `p${i}` }, { runId: `many${i}` }),
      ),
    );
    w1.close();
    const last = Math.max(...wakes.map((r) => r.wakeAt as number));
    // Two at a time, looking every 5 s: the look-ahead's timer wakes the first two; the others
    // follow as places come free (before the fix: one batch per look, seconds apart).
    const w2 = runnerOn(store, ran, 'w2');
    const takeover = w2.takeOver([flow], { everyMs: 5_000, concurrency: 2 });
    await takeover.lookNow();
    try {
      expect(
        await until(
          async () => (await store.listUnfinished('reminder')).length === 0,
          1_500 + (last - Date.now()),
        ),
      ).toBe(true);
      expect(Date.now() - last).toBeLessThan(1_500);
      expect(ran.filter((r) => r === 'mail')).toHaveLength(12);
    } finally {
      await takeover.stop();
      w2.close();
    }
  });

  it('a wake time that passed while no worker was up runs at once; recovery counts no crash', async () => {
    const ran: string[] = [];
    const flow = reminderFlow(50);
    const w1 = runnerOn(store, ran, 'w1');
    await w1.run(flow, { to: 'bo' }, { runId: 'r2' });
    w1.close();
    await sleep(80);
    const w2 = runnerOn(store, ran, 'w2');
    const done = await w2.recover(flow, 'r2');
    expect(done.status).toBe('done');
    expect(ran).toEqual(['charge', 'mail']);
    const { checkpoints } = await store.history('r2');
    expect(checkpoints.map((c) => c.status)).toEqual([
      'running',
      'sleeping',
      'running',
      'done',
    ]);
    w2.close();
  });

  it('a worker that dies after waking: the recovery replays the sleep (no second sleep) and the charge', async () => {
    const ran: string[] = [];
    const flow = reminderFlow(50);
    const w1 = runnerOn(store, ran, 'w1');
    await w1.run(flow, { to: 'cy' }, { runId: 'r3' });
    w1.close();
    await sleep(80);
    const view = new CrashingStore(store);
    const w2 = new FlowRunner(new Executor(tools(ran, () => view.kill())), {
      checkpoints: view,
      checkpointKey: KEY,
      leaseMs: 2_000,
      workerId: 'w2',
    });
    await expect(w2.recover(flow, 'r3')).rejects.toBeInstanceOf(SimulatedCrash);
    w2.close();
    const w3 = runnerOn(store, ran, 'w3');
    // The mail may have run (it is in doubt): run it again, as an idempotent mail would.
    const done = await w3.recover(flow, 'r3', { rerunInDoubt: true });
    expect(done.status).toBe('done');
    // Charged once; the sleep did not start over (the run did not go back to sleeping).
    expect(ran).toEqual(['charge', 'mail', 'mail']);
    const statuses = (await store.history('r3')).checkpoints.map(
      (c) => c.status,
    );
    expect(statuses.filter((s) => s === 'sleeping')).toHaveLength(1);
    w3.close();
  });

  it('parallel nodes: the run wakes at the earliest sleep, then sleeps what is left of the other', async () => {
    const ran: string[] = [];
    // A time, not a duration: the same on every run of the node (as a call's arguments must be).
    const later = new Date(Date.now() + 150);
    const flow = new Flow<{ a?: number; b?: number }>('two-sleeps')
      .node('short', async (_s, ctx) => {
        await ctx.sleep(40);
        return { a: 1 };
      })
      .node('long', async (_s, ctx) => {
        await ctx.sleepUntil(later);
        return { b: 2 };
      })
      .start('short', 'long')
      .end('short', 'long');
    const w = runnerOn(store, ran, 'w1');
    const first = await w.run(flow, {}, { runId: 'r4' });
    expect(first.status).toBe('sleeping');
    await sleep(60);
    const second = await w.recover(flow, 'r4');
    expect(second.status).toBe('sleeping');
    expect(second.wakeAt).toBeGreaterThan(first.wakeAt as number);
    await sleep(120);
    const done = await w.recover(flow, 'r4');
    expect(done).toMatchObject({ status: 'done', state: { a: 1, b: 2 } });
    w.close();
  });

  it('a node that catches RunSleeping cannot run a tool meanwhile; the run sleeps anyway', async () => {
    const ran: string[] = [];
    const caught: unknown[] = [];
    const flow = new Flow<Reminder>('sneaky')
      .node('n', async (s, ctx) => {
        await ctx.sleep(10_000).catch((e: unknown) => caught.push(e));
        await ctx.call('mail', { to: s.to }).catch((e: unknown) => {
          caught.push(e);
        });
        return { sent: 'never' };
      })
      .end('n');
    const w = runnerOn(store, ran, 'w1');
    const r = await w.run(flow, { to: 'di' }, { runId: 'r5' });
    expect(r.status).toBe('sleeping');
    expect(ran).toEqual([]);
    expect(caught).toHaveLength(2);
    expect(caught.every((e) => e instanceof RunSleeping)).toBe(true);
    w.close();
  });

  it('bad durations fail the node with a message naming it; nothing sleeps', async () => {
    const w = runnerOn(store, [], 'w1');
    for (const [i, bad] of [-1, Number.NaN, Infinity].entries()) {
      const flow = new Flow<Reminder>('bad')
        .node('n', async (_s, ctx) => {
          await ctx.sleep(bad);
        })
        .end('n');
      const r = await w.run(flow, { to: 'x' }, { runId: `bad${i}` });
      expect(r.status).toBe('failed');
      expect(r.error?.message).toMatch(/ctx\.sleep in node "n".*duration/);
    }
    const flow = new Flow<Reminder>('bad-until')
      .node('n', async (_s, ctx) => {
        await ctx.sleepUntil(new Date('not a date'));
      })
      .end('n');
    const r = await w.run(flow, { to: 'x' }, { runId: 'bad-until' });
    expect(r.error?.message).toMatch(/ctx\.sleepUntil in node "n"/);
    w.close();
  });
});
