/**
 * Approval deadlines (`approval: { timeoutMs, onTimeout }`): the pausing checkpoint seals the
 * deadline, the store makes the paused run due then, and the clock decides with the same
 * compare-and-set as a person: deny, approve, or fail the run. A person and the clock racing:
 * one decision is spent, the other is refused.
 */
import {
  ApprovalTimedOut,
  DurableSetupError,
  Executor,
  Flow,
  FlowRunner,
  ToolDenied,
  ToolRegistry,
  type ApprovalTimeoutAction,
  type CheckpointStore,
} from 'agent-adapter';
import { ToolLoop } from 'agent-adapter';
import { openCheckpoint } from '../../exec/durable/records';
import {
  KEY,
  ScriptedModel,
  answer,
  asking,
  memoryAndSqlite,
  ring,
  sleep,
  until,
} from '../../../../../test/utils/specs';

interface Refund {
  amount: number;
  note?: string;
}

function refunds(ran: string[], onTimeout: ApprovalTimeoutAction, ms = 100) {
  const registry = new ToolRegistry().register(
    'refund',
    (a: { amount: number }) => {
      ran.push(`refund ${a.amount}`);
      return `refunded ${a.amount}`;
    },
    { approval: { timeoutMs: ms, onTimeout } },
  );
  const flow = new Flow<Refund>('refunds')
    .node('decide', async (s, ctx) => ({
      note: await ctx
        .call<string>('refund', { amount: s.amount })
        .catch((e: unknown) => {
          if (e instanceof ToolDenied) return 'denied';
          throw e;
        }),
    }))
    .end('decide');
  return { registry, flow };
}

function runner(store: CheckpointStore, registry: ToolRegistry, name = 'w') {
  return new FlowRunner(new Executor(registry), {
    checkpoints: store,
    checkpointKey: KEY,
    workerId: name,
  });
}

describe.each(memoryAndSqlite('deadline'))(
  'approval deadlines on %s',
  (_n, fresh) => {
    let store: CheckpointStore;
    fresh((s) => (store = s));

    it('the clock denies a call nobody decided: sealed as a timed-out decision; before the deadline nothing happens', async () => {
      const ran: string[] = [];
      const { registry, flow } = refunds(ran, 'deny', 150);
      const w = runner(store, registry);
      const before = Date.now();
      const paused = await w.run(flow, { amount: 5 }, { runId: 'd1' });
      expect(paused.status).toBe('paused');
      const deadline = paused.pending?.deadline as number;
      expect(deadline).toBeGreaterThanOrEqual(before + 150);
      expect(paused.pending?.onTimeout).toBe('deny');
      expect((await store.head('d1'))?.leaseExpiresAt).toBe(deadline);
      // Before the deadline: recovery gives it back paused.
      expect(await w.recover(flow, 'd1')).toMatchObject({ status: 'paused' });
      expect(await store.listDue({ now: Date.now() })).toEqual([]);

      // A worker looking every 2 s: its first look sees the deadline ahead and sets a timer.
      const takeover = w.takeOver([flow], { everyMs: 2_000 });
      await takeover.lookNow();
      try {
        expect(
          await until(
            async () => (await store.head('d1'))?.status === 'done',
            2_000,
          ),
        ).toBe(true);
      } finally {
        await takeover.stop();
      }
      const done = await w.get(flow, 'd1');
      expect(done.state.note).toBe('denied');
      expect(ran).toEqual([]);
      const resumed = (await store.history('d1')).checkpoints
        .map((c) => openCheckpoint(ring, c))
        .find((c) => c.reason === 'resume');
      expect(resumed?.decisions?.[0]).toMatchObject({
        approved: false,
        timedOut: true,
        tool: 'refund',
      });
      expect(resumed?.decisions?.[0]?.at).toBeGreaterThanOrEqual(deadline);
      w.close();
    });

    it("onTimeout 'approve' runs the call once; 'fail' ends the run with ApprovalTimedOut", async () => {
      const ran: string[] = [];
      const approve = refunds(ran, 'approve', 20);
      const w = runner(store, approve.registry);
      await w.run(approve.flow, { amount: 7 }, { runId: 'a1' });
      await sleep(40);
      const approved = await w.recover(approve.flow, 'a1');
      expect(approved).toMatchObject({
        status: 'done',
        state: { note: 'refunded 7' },
      });
      expect(ran).toEqual(['refund 7']);
      w.close();

      const fail = refunds(ran, 'fail', 20);
      const f = runner(store, fail.registry);
      await f.run(fail.flow, { amount: 9 }, { runId: 'f1' });
      await sleep(40);
      const failed = await f.recover(fail.flow, 'f1');
      expect(failed.status).toBe('failed');
      expect(failed.error).toMatchObject({ name: 'ApprovalTimedOut' });
      expect(failed.error?.message).toMatch(/"refund".*onTimeout: 'fail'/);
      expect(ran).toEqual(['refund 7']);
      // A person's decision after that is refused, naming why.
      await expect(
        f.resume(fail.flow, 'f1', { approved: true }),
      ).rejects.toThrow(/ended \(failed\)/);
      f.close();
      expect(new ApprovalTimedOut('x', 'refund', 0)).toBeInstanceOf(Error);
    });

    it('a person and the clock racing, 40 times: one decision each time, the loser refused', async () => {
      const ran: string[] = [];
      const { registry, flow } = refunds(ran, 'deny', 30);
      let personWon = 0;
      let clockWon = 0;
      for (let i = 0; i < 40; i++) {
        const runId = `race${i}`;
        const a = runner(store, registry, 'person');
        const b = runner(store, registry, 'clock');
        await a.run(flow, { amount: i }, { runId });
        await sleep(30 + (i % 5));
        const [person, clock] = await Promise.allSettled([
          a.resume(flow, runId, { approved: true, by: 'ann' }),
          b.recover(flow, runId),
        ]);
        const checkpoints = (await store.history(runId)).checkpoints.map((c) =>
          openCheckpoint(ring, c),
        );
        const decisions = checkpoints.filter((c) => c.reason === 'resume');
        expect(decisions).toHaveLength(1);
        const decided = decisions[0]?.decisions?.[0];
        if (decided?.timedOut) {
          clockWon++;
          expect(decided.approved).toBe(false);
          expect(person.status).toBe('rejected');
          expect(ran).not.toContain(`refund ${i}`);
        } else {
          personWon++;
          expect(decided).toMatchObject({ approved: true, by: 'ann' });
          expect(ran.filter((r) => r === `refund ${i}`)).toHaveLength(1);
          // The clock lost: refused, or it found the run no longer paused (taken by the person).
          if (clock.status === 'fulfilled')
            expect(clock.value.status).not.toBe('done');
        }
        a.close();
        b.close();
      }
      expect(personWon + clockWon).toBe(40);
    });

    it('bad approval deadlines are refused when the tool is registered, naming the option', () => {
      const registry = new ToolRegistry();
      const bad = (approval: unknown) => () =>
        registry.register('t', () => 1, { approval } as never);
      expect(bad({ timeoutMs: 0, onTimeout: 'deny' })).toThrow(
        /approval\.timeoutMs/,
      );
      expect(bad({ timeoutMs: 1.5, onTimeout: 'deny' })).toThrow(
        DurableSetupError,
      );
      expect(bad({ timeoutMs: 100, onTimeout: 'maybe' })).toThrow(
        /approval\.onTimeout.*'deny', 'approve' or 'fail'/,
      );
      expect(bad({ timeoutMs: 100, onTimeout: 'deny', when: 3 })).toThrow(
        /approval\.when/,
      );
      expect(bad('yes')).toThrow(/\{ timeoutMs, onTimeout, when\? \}/);
    });

    it('`when` limits which calls need approval; the others run at once', async () => {
      const ran: string[] = [];
      const registry = new ToolRegistry().register(
        'refund',
        (a: { amount: number }) => {
          ran.push(`refund ${a.amount}`);
          return 'ok';
        },
        {
          approval: {
            when: (a: { amount: number }) => a.amount > 100,
            timeoutMs: 1_000,
            onTimeout: 'deny',
          },
        },
      );
      const flow = refunds([], 'deny').flow;
      const w = runner(store, registry);
      expect((await w.run(flow, { amount: 5 })).status).toBe('done');
      expect((await w.run(flow, { amount: 500 })).status).toBe('paused');
      expect(ran).toEqual(['refund 5']);
      w.close();
    });

    it("a tool loop's tool: the clock denies it and the model hears the denial", async () => {
      const ran: string[] = [];
      const tools = refunds(ran, 'deny', 30).registry;
      const model = new ScriptedModel([
        asking({ id: 'r', name: 'refund', arguments: { amount: 3 } }),
        answer('no refund then'),
      ]);
      const loop = new ToolLoop(model, tools, {
        checkpoints: store,
        checkpointKey: KEY,
      });
      const paused = await loop.run([{ role: 'user', content: 'refund' }], {
        runId: 'loop1',
      });
      expect(paused.status).toBe('paused');
      expect(paused.pending?.deadline).toBeGreaterThan(Date.now() - 100);
      await sleep(50);
      const done = await loop.recover('loop1');
      loop.close();
      expect(done.status).toBe('done');
      expect(ran).toEqual([]);
      const toolMessage = done.messages.find((m) => m.role === 'tool');
      expect(toolMessage?.content).toMatch(/denied/i);
    });
  },
);
