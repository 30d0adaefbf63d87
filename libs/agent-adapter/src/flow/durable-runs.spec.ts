/**
 * One test per behaviour sentence of the spec page (spec/durable-runs.md), quoted in the title,
 * plus the protocol points of DESIGN.md. Framework-free, on the memory store.
 */
import {
  Call,
  CheckpointConflict,
  CheckpointKeyError,
  CheckpointNotFound,
  CheckpointStore,
  CheckpointStoreCorrupt,
  Executor,
  Flow,
  FlowError,
  FlowRunner,
  InvalidFlowState,
  KeyRing,
  MemoryCheckpointStore,
  RecoveryNeedsDecision,
  RunAccessDenied,
  RunLeaseHeld,
  ToolFailed,
  ToolRegistry,
  DurableEvents,
  idempotencyKey,
  type CallRecord,
  type CheckpointRecord,
  type CheckpointSavedEvent,
  type RunRecoveredEvent,
} from 'agent-adapter';
import { IsInt, IsString, Min, MinLength } from 'class-validator';
import { CrashingStore, SimulatedCrash, settle } from 'agent-adapter/testing';
import {
  KEY,
  count,
  executorFor,
  ticketsFlow,
  type LedgerEntry,
} from 'agent-adapter/testing/fixtures';
import { openCheckpoint, sealCall } from '../exec/durable/records';
import { crashInEmail } from '../testing/conformance/crash-in-email';
import { bodyOf, decode, ring, runnerOn } from '../../../../test/utils/specs';

const input = { show: 'Hamlet', seats: 2 };

/** A memory store holding order-7 cut short inside email_tickets, and its ledger. */
async function crashedOrder7() {
  const ledger: LedgerEntry[] = [];
  const store = new MemoryCheckpointStore();
  await crashInEmail(store, ledger, 'order-7');
  return { ledger, store };
}

/**
 * Runs `flow` as `runId` on a worker whose tools (from `registry`) kill its store where they
 * call the kill they are given; the run dies there and its writes settle.
 */
async function crashedIn(
  store: CheckpointStore,
  flow: Flow<Record<string, unknown>>,
  runId: string,
  registry: (kill: () => void) => ToolRegistry,
): Promise<void> {
  const dying = new CrashingStore(store);
  await runnerOn(
    dying,
    registry(() => dying.kill()),
  )
    .run(flow, {}, { runId })
    .catch(() => undefined);
  await settle();
}

function worker(
  ledger: LedgerEntry[],
  store: CheckpointStore,
  name = 'w2',
  events?: DurableEvents,
) {
  return new FlowRunner(executorFor(ledger, name), {
    checkpoints: store,
    checkpointKey: KEY,
    ...(events && { events }),
  });
}

describe('Durable runs (spec sentences)', () => {
  it('"A durable run survives its worker ... a new worker calls recover and the run goes on from its last checkpoint."', async () => {
    const { ledger, store } = await crashedOrder7();
    const latest = await store.latest('order-7');
    expect(latest?.step).toBe(2); // hold and pay are checkpointed
    const r = await worker(ledger, store).recover(ticketsFlow(), 'order-7', {
      rerunInDoubt: true,
    });
    expect(r).toMatchObject({ runId: 'order-7', status: 'done', step: 4 });
    expect(r.state.note).toBe('sent Hamlet');
  });

  it('"Tool calls that finished before the crash are not run again: their results replay from the store."', async () => {
    const ledger: LedgerEntry[] = [];
    const store = new MemoryCheckpointStore();
    // A node with two calls: the first finishes, the worker dies in the second.
    const registry = (who: string, die?: () => void) =>
      new ToolRegistry()
        .register('charge_card', async () => {
          ledger.push({
            tool: 'charge_card',
            worker: who,
            key: idempotencyKey(),
          });
          return 'ch_1';
        })
        .register(
          'email_tickets',
          async () => {
            die?.();
            ledger.push({
              tool: 'email_tickets',
              worker: who,
              key: idempotencyKey(),
            });
            return 'sent';
          },
          { idempotent: true },
        );
    const flow = new Flow('checkout')
      .node('pay_and_send', async (_s, ctx) => ({
        charge: await ctx.call('charge_card', { amount: 5 }),
        mail: await ctx.call('email_tickets', { to: 'a@b.c' }),
      }))
      .end('pay_and_send');
    const dying = new CrashingStore(store);
    const w1 = new FlowRunner(
      new Executor(registry('w1', () => dying.kill())),
      { checkpoints: dying, checkpointKey: KEY },
    );
    await expect(w1.run(flow, {}, { runId: 'c1' })).rejects.toBeInstanceOf(
      SimulatedCrash,
    );
    await settle();
    const w2 = runnerOn(store, registry('w2'));
    const r = await w2.recover(flow, 'c1');
    expect(r.state).toEqual({ charge: 'ch_1', mail: 'sent' });
    expect(
      ledger.filter((e) => e.tool === 'charge_card').map((e) => e.worker),
    ).toEqual(['w1']);
  });

  it('"Every superstep ends with a checkpoint signed (HMAC) with checkpoint_key: state, frontier, visits, the graph digest, and the row\'s run id, step, status and segment."', async () => {
    const store = new MemoryCheckpointStore();
    await worker([], store).run(ticketsFlow(), input, { runId: 'o1' });
    const { checkpoints } = await store.history('o1');
    expect(checkpoints.map((c) => c.step)).toEqual([0, 1, 2, 3]);
    const opened = checkpoints.map((c) => openCheckpoint(ring, c));
    expect(opened[1]).toMatchObject({
      runId: 'o1',
      step: 1,
      status: 'running',
      segment: opened[0]!.incarnation,
      frontier: ['pay'],
      visits: { hold: 1 },
      digest: ticketsFlow().digest,
      state: { show: 'Hamlet', seats: 2, note: 'held 2 for Hamlet' },
    });
    // Each column is covered by the signature.
    for (const edit of [
      { runId: 'o2' },
      { step: 9 },
      { status: 'done' as const },
      { segment: 7 },
      { flow: 'x' },
    ]) {
      expect(() =>
        openCheckpoint(ring, { ...checkpoints[1]!, ...edit }),
      ).toThrow(CheckpointStoreCorrupt);
    }
  });

  it('"Use the same key on every worker." (another key cannot read the run)', async () => {
    const { ledger, store } = await crashedOrder7();
    const other = new FlowRunner(executorFor(ledger, 'w2'), {
      checkpoints: store,
      checkpointKey: 'another-secret-another-secret-32',
    });
    await expect(
      other.recover(ticketsFlow(), 'order-7'),
    ).rejects.toBeInstanceOf(CheckpointStoreCorrupt);
  });

  it('"Every tool call is logged twice, each record signed and numbered: started before it can run, then done (its result)"', async () => {
    const store = new MemoryCheckpointStore();
    const seenWhileRunning: string[][] = [];
    const registry = new ToolRegistry().register('t', async () => {
      seenWhileRunning.push(
        (await store.history('r')).calls.map((c) => decode(c).phase),
      );
      return 'ok';
    });
    const flow = new Flow('f')
      .node('n', async (_s, ctx) => ({
        a: await ctx.call('t', { i: 1 }),
        b: await ctx.call('t', { i: 2 }),
      }))
      .end('n');
    await runnerOn(store, registry).run(flow, {}, { runId: 'r' });
    expect(seenWhileRunning).toEqual([
      ['started'],
      ['started', 'done', 'started'],
    ]);
    const calls = (await store.history('r')).calls;
    const segment = calls[0]!.segment;
    expect(
      calls.map((c) => [c.segment, c.superstep, c.seq, decode(c).phase]),
    ).toEqual([
      [segment, 0, 1, 'started'],
      [segment, 0, 2, 'done'],
      [segment, 0, 3, 'started'],
      [segment, 0, 4, 'done'],
    ]);
    expect(bodyOf(calls[1]!.sealed)).toMatchObject({
      outcome: { ok: true, value: 'ok' },
      tool: 't',
      node: 'n',
      index: 0,
    });
  });

  describe('"A changed, forged or missing record (a gap in the numbers) is CheckpointStoreCorrupt."', () => {
    /** A memory store a test can tamper with. */
    class Tamperable extends MemoryCheckpointStore {
      edit(runId: string, fn: (calls: Map<string, CallRecord>) => void) {
        fn(this.runs.get(runId)!.calls);
      }
      editCheckpoint(runId: string, fn: (cps: CheckpointRecord[]) => void) {
        fn(this.runs.get(runId)!.checkpoints);
      }
    }

    async function crashedRun(store: Tamperable, runId = 'order-7') {
      const ledger: LedgerEntry[] = [];
      // Parallel tools so the cut superstep has several records to tamper with.
      await crashInEmail(store, ledger, runId);
      return ledger;
    }

    const recover = (store: CheckpointStore) =>
      worker([], store).recover(ticketsFlow(), 'order-7', {
        rerunInDoubt: true,
      });

    /** Tampering with order-7 after its crash: recovery refuses the run either way. */
    it.each<[string, (store: Tamperable) => void]>([
      [
        'changed: one byte of a call record',
        (store) =>
          store.edit('order-7', (calls) => {
            for (const c of calls.values())
              if (c.superstep === 2)
                c.sealed = c.sealed.replace('Hamlet', 'Hamlex');
          }),
      ],
      [
        'changed: a checkpoint',
        (store) =>
          store.editCheckpoint('order-7', (cps) => {
            const last = cps[cps.length - 1]!;
            last.sealed = last.sealed.replace('"seats":2', '"seats":9');
          }),
      ],
      [
        'forged: a record signed with another key',
        (store) => {
          const forger = KeyRing.from('forged-forged-forged-forged-key!!');
          store.edit('order-7', (calls) => {
            for (const [k, c] of calls) {
              if (c.superstep !== 2) continue;
              const body = bodyOf(c.sealed) as never;
              calls.set(
                k,
                sealCall(forger, {
                  ...(body as object),
                  runId: c.runId,
                  segment: c.segment,
                  seq: c.seq,
                  superstep: c.superstep,
                } as never),
              );
            }
          });
        },
      ],
    ])('%s', async (_name, tamper) => {
      const store = new Tamperable();
      await crashedRun(store);
      tamper(store);
      await expect(recover(store)).rejects.toBeInstanceOf(
        CheckpointStoreCorrupt,
      );
    });

    it('missing: a gap in the numbers', async () => {
      const store = new Tamperable();
      // Two calls in the cut superstep: delete the first record.
      const flow = new Flow('tickets')
        .node('hold', async (_s, ctx) => ({
          a: await ctx.call('hold_seats', { show: 'x', seats: 1 }),
        }))
        .node('pay', Call('charge_card', { args: () => ({ seats: 1 }) }))
        .node('send', Call('email_tickets', { args: () => ({ show: 'x' }) }))
        .edge('hold', 'pay')
        .edge('pay', 'send')
        .end('send');
      const dying = new CrashingStore(store);
      const w1 = new FlowRunner(
        executorFor([], 'w1', {
          onTool: (t) => (t === 'email_tickets' ? dying.kill() : undefined),
        }),
        { checkpoints: dying, checkpointKey: KEY },
      );
      await w1.run(flow, {}, { runId: 'g' }).catch(() => undefined);
      await settle();
      // Now add a started record for a second call and delete the first: seq 2 without seq 1.
      store.edit('g', (calls) => {
        const first = [...calls.entries()].find(([, c]) => c.superstep === 2)!;
        calls.delete(first[0]);
        const body = bodyOf(first[1].sealed) as never;
        const segment = first[1].segment;
        calls.set(
          `${segment}/2/2`,
          sealCall(ring, {
            ...(body as object),
            runId: 'g',
            segment,
            seq: 2,
            superstep: 2,
          } as never),
        );
      });
      const err = await worker([], store)
        .recover(flow, 'g', { rerunInDoubt: true })
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(CheckpointStoreCorrupt);
      expect((err as Error).message).toMatch(/gap/);
    });

    it('spliced: a record copied from another run into this one', async () => {
      const store = new Tamperable();
      await crashedRun(store, 'order-7');
      await crashedRun(store, 'order-8');
      const theirs = [...(await store.history('order-8')).calls];
      store.edit('order-7', (calls) => {
        for (const c of theirs)
          calls.set(`${c.segment}/${c.superstep}/${c.seq}`, {
            ...c,
            runId: 'order-7',
          });
      });
      await expect(recover(store)).rejects.toBeInstanceOf(
        CheckpointStoreCorrupt,
      );
    });
  });

  it('"recover(flow, run_id) reruns the superstep that was cut short."', async () => {
    const store = new MemoryCheckpointStore();
    const runs: string[] = [];
    const flow = new Flow('f')
      .node('a', () => {
        runs.push('a');
        return { a: 1 };
      })
      .node('b', () => {
        runs.push('b');
        return { b: 2 };
      })
      .edge('a', 'b')
      .end('b');
    const crashing = new CrashingStore(
      store,
      (w, m) => w.kind === 'save' && w.checkpoint.step === 2 && m === 'before',
    );
    await expect(
      runnerOn(crashing, new ToolRegistry()).run(flow, {}, { runId: 'x' }),
    ).rejects.toBeInstanceOf(SimulatedCrash);
    const r = await runnerOn(store, new ToolRegistry()).recover(flow, 'x');
    expect(runs).toEqual(['a', 'b', 'b']);
    expect(r.state).toEqual({ a: 1, b: 2 });
  });

  it('"a call whose arguments changed does not replay; it runs again and checkpoint.saved reports it as unreplayed."', async () => {
    const store = new MemoryCheckpointStore();
    let amount = 5;
    const charged: number[] = [];
    const registry = (die?: () => void) =>
      new ToolRegistry()
        .register('quote', async (a: { amount: number }) => {
          charged.push(a.amount);
          return a.amount * 2;
        })
        .register(
          'stop',
          async () => {
            die?.();
            return 'ok';
          },
          { idempotent: true },
        );
    const flow = new Flow('f')
      .node('n', async (_s, ctx) => ({
        q: await ctx.call('quote', { amount }),
        s: await ctx.call('stop'),
      }))
      .end('n');
    await crashedIn(store, flow, 'u', registry);
    amount = 7; // node code is not deterministic
    const events = new DurableEvents();
    const saved: CheckpointSavedEvent[] = [];
    events.on('checkpoint.saved', (e) => saved.push(e));
    const r = await runnerOn(store, registry(), {
      events,
    }).recover(flow, 'u');
    expect(charged).toEqual([5, 7]);
    expect(r.state).toEqual({ q: 14, s: 'ok' });
    expect(saved.find((e) => e.unreplayed)?.unreplayed).toEqual([
      { node: 'n', index: 0, tool: 'quote' },
    ]);
  });

  it('"The run\'s end user, thread and principal are signed into each checkpoint."', async () => {
    const store = new MemoryCheckpointStore();
    await worker([], store).run(ticketsFlow(), input, {
      runId: 'i',
      ctx: { user: 'u1', thread: 't1', principal: 'svc' },
    });
    for (const c of (await store.history('i')).checkpoints) {
      expect(openCheckpoint(ring, c).identity).toEqual({
        user: 'u1',
        thread: 't1',
        principal: 'svc',
      });
    }
  });

  it('"recover without a ctx restores the user and thread; a ctx for anyone else is refused."', async () => {
    const ledger: LedgerEntry[] = [];
    const store = new MemoryCheckpointStore();
    const dying = new CrashingStore(store);
    const seen: unknown[] = [];
    const flow = new Flow('who')
      .node('a', (_s, ctx) => {
        seen.push(ctx.identity);
        if (seen.length === 1) dying.kill();
        return {};
      })
      .end('a');
    await new FlowRunner(executorFor(ledger, 'w1'), {
      checkpoints: dying,
      checkpointKey: KEY,
    })
      .run(flow, {}, { runId: 'w', ctx: { user: 'u1', thread: 't1' } })
      .catch(() => undefined);
    const w2 = worker(ledger, store);
    await expect(
      w2.recover(flow, 'w', { ctx: { user: 'mallory', thread: 't1' } }),
    ).rejects.toBeInstanceOf(RunAccessDenied);
    await expect(
      w2.recover(flow, 'w', { ctx: { user: 'u1', thread: 'other' } }),
    ).rejects.toBeInstanceOf(RunAccessDenied);
    const r = await w2.recover(flow, 'w');
    expect(r.status).toBe('done');
    expect(seen[1]).toEqual({ user: 'u1', thread: 't1' });
  });

  it('"A run that had a principal needs its ctx back (recover_all reports it)."', async () => {
    const store = new MemoryCheckpointStore();
    const dying = new CrashingStore(store);
    const flow = new Flow('p').node('a', () => dying.kill()).end('a');
    await new FlowRunner(executorFor([], 'w1'), {
      checkpoints: dying,
      checkpointKey: KEY,
    })
      .run(
        flow,
        {},
        { runId: 'p1', ctx: { user: 'u', principal: 'svc-billing' } },
      )
      .catch(() => undefined);
    const okFlow = new Flow('p').node('a', () => ({ ok: true })).end('a');
    const w2 = worker([], store);
    const all = await w2.recoverAll(okFlow, { force: true });
    expect(all.get('p1')).toBeInstanceOf(RunAccessDenied);
    const r = await w2.recover(okFlow, 'p1', {
      ctx: { user: 'u', principal: 'svc-billing' },
    });
    expect(r.state).toEqual({ ok: true });
  });

  it('"recover_all(flow) recovers every unfinished run of the flow ... It maps each run id to its result or to the error that stopped it."', async () => {
    const ledger: LedgerEntry[] = [];
    const store = new MemoryCheckpointStore();
    await crashInEmail(store, ledger, 'a');
    await crashInEmail(store, ledger, 'b');
    await worker(ledger, store).run(ticketsFlow(), input, {
      runId: 'finished',
    });
    await worker(ledger, store).run(
      new Flow('other').node('x', () => ({})).end('x'),
      {},
      { runId: 'other-flow' },
    );
    const w2 = worker(ledger, store);
    const first = await w2.recoverAll(ticketsFlow(), { force: true });
    expect([...first.keys()].sort()).toEqual(['a', 'b']);
    expect(first.get('a')).toBeInstanceOf(RecoveryNeedsDecision);
    const second = await w2.recoverAll(ticketsFlow(), {
      force: true,
      rerunInDoubt: true,
    });
    expect(
      [...second.values()].map((r) => (r instanceof Error ? r.name : r.status)),
    ).toEqual(['done', 'done']);
    expect(count(ledger, 'charge_card')).toBe(3);
  });

  it("recoverAll claims only runs whose owner's lease expired (a healthy worker is not fenced), and reports the others as RunLeaseHeld", async () => {
    const store = new MemoryCheckpointStore();
    const dying = new CrashingStore(store);
    const w1 = new FlowRunner(
      executorFor([], 'w1', {
        onTool: (t) => (t === 'email_tickets' ? dying.kill() : undefined),
      }),
      { checkpoints: dying, checkpointKey: KEY, leaseMs: 60_000 },
    );
    await w1.run(ticketsFlow(), input, { runId: 'l' }).catch(() => undefined);
    const w2 = worker([], store);
    const held = (
      await w2.recoverAll(ticketsFlow(), { rerunInDoubt: true })
    ).get('l');
    expect(held).toBeInstanceOf(RunLeaseHeld);
    expect((held as RunLeaseHeld).owner).toBe(w1.workerId);
    expect((held as RunLeaseHeld).until).toBeGreaterThan(Date.now() + 40_000);
    expect((await store.head('l'))?.step).toBe(2); // nothing was written
    expect(
      (
        await w2.recoverAll(ticketsFlow(), { rerunInDoubt: true, force: true })
      ).get('l'),
    ).toMatchObject({ status: 'done' });
  });

  describe('Calls in doubt', () => {
    it('"A call logged started with no result may or may not have run. Recovery fails closed": anything else → RecoveryNeedsDecision with .calls as (tool, why) pairs', async () => {
      const { ledger, store } = await crashedOrder7();
      const before = await store.history('order-7');
      const err = await worker(ledger, store)
        .recover(ticketsFlow(), 'order-7')
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(RecoveryNeedsDecision);
      expect((err as RecoveryNeedsDecision).calls).toEqual([
        ['email_tickets', 'started, no result recorded'],
      ]);
      expect((err as RecoveryNeedsDecision).runId).toBe('order-7');
      expect(await store.history('order-7')).toEqual(before);
    });

    it('"idempotent=True: runs again"', async () => {
      const ledger: LedgerEntry[] = [];
      const store = new MemoryCheckpointStore();
      const dying = new CrashingStore(store);
      const w1 = new FlowRunner(
        executorFor(ledger, 'w1', {
          onTool: (t) => (t === 'hold_seats' ? dying.kill() : undefined),
        }),
        { checkpoints: dying, checkpointKey: KEY },
      );
      await w1.run(ticketsFlow(), input, { runId: 'h' }).catch(() => undefined);
      const events = new DurableEvents();
      const recovered: RunRecoveredEvent[] = [];
      events.on('run.recovered', (e) => recovered.push(e));
      const r = await worker(ledger, store, 'w2', events).recover(
        ticketsFlow(),
        'h',
      );
      expect(r.status).toBe('done');
      expect(recovered).toEqual([
        {
          kind: 'flow',
          runId: 'h',
          flow: 'tickets',
          step: 2,
          replayed: [],
          rerun: [{ node: 'hold', index: 0, tool: 'hold_seats' }],
        },
      ]);
    });

    it('"Then recover with rerun_in_doubt=True" — the in-doubt call runs again, once', async () => {
      const { ledger, store } = await crashedOrder7();
      const r = await worker(ledger, store).recover(ticketsFlow(), 'order-7', {
        rerunInDoubt: true,
      });
      expect(r.status).toBe('done');
      expect(ledger.map((e) => `${e.worker}:${e.tool}`)).toEqual([
        'w1:hold_seats',
        'w1:charge_card',
        'w2:email_tickets',
      ]);
    });

    it('"A call whose result could not be stored (an unsealable value) counts as in doubt too."', async () => {
      const store = new MemoryCheckpointStore();
      const registry = (die?: () => void) =>
        new ToolRegistry()
          .register('make_date', async () => new Date(0))
          .register(
            'after',
            async () => {
              die?.();
              return 1;
            },
            { idempotent: true },
          );
      const flow = new Flow('d')
        .node('n', async (_s, ctx) => {
          await ctx.call('make_date');
          return { x: await ctx.call('after') };
        })
        .end('n');
      await crashedIn(store, flow, 'd', registry);
      expect(
        (await store.history('d')).calls.map((c) => decode(c).phase),
      ).toContain('unrecordable');
      const err = await runnerOn(store, registry())
        .recover(flow, 'd')
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(RecoveryNeedsDecision);
      expect((err as RecoveryNeedsDecision).calls[0]?.[0]).toBe('make_date');
      expect((err as RecoveryNeedsDecision).calls[0]?.[1]).toMatch(
        /could not be recorded/,
      );
    });
  });

  describe('Two workers', () => {
    it('"save(run_id, step, checkpoint) is a compare-and-set: step 0 for a new run, else exactly one past the stored step."', async () => {
      const store = new MemoryCheckpointStore();
      const w = worker([], store);
      await w.run(ticketsFlow(), input, { runId: 'cas' });
      // Step 0 of a run that exists is refused; the runner then finds the run (same input) or
      // reports the conflict (another input): see flow/runner/start.spec.ts.
      const first = (await store.history('cas')).checkpoints[0]!;
      await expect(store.save(first)).rejects.toBeInstanceOf(
        CheckpointConflict,
      );
      await expect(
        w.run(ticketsFlow(), { ...input, seats: 3 }, { runId: 'cas' }),
      ).rejects.toBeInstanceOf(CheckpointConflict);
      const latest = (await store.latest('cas'))!;
      await expect(
        store.save({ ...latest, step: latest.step }),
      ).rejects.toBeInstanceOf(CheckpointConflict);
      await expect(
        store.save({ ...latest, step: latest.step + 2 }),
      ).rejects.toBeInstanceOf(CheckpointConflict);
      await expect(
        store.save({ ...latest, runId: 'new', step: 1 }),
      ).rejects.toBeInstanceOf(CheckpointConflict);
    });

    it('"A recovering worker first claims the next step with a new call log segment."', async () => {
      const store = new MemoryCheckpointStore();
      await crashInEmail(store, [], 'order-7');
      await worker([], store).recover(ticketsFlow(), 'order-7', {
        rerunInDoubt: true,
      });
      const { checkpoints, calls } = await store.history('order-7');
      const g = checkpoints[0]!.segment; // random: the run's incarnation
      expect(
        checkpoints.map((c) => [c.step, c.segment, bodyOf(c.sealed).reason]),
      ).toEqual([
        [0, g, 'start'],
        [1, g, 'superstep'],
        [2, g, 'superstep'],
        [3, g + 1, 'claim'],
        [4, g + 1, 'superstep'],
      ]);
      expect(
        calls.filter((c) => c.segment === g + 1).map((c) => decode(c).phase),
      ).toEqual(['started', 'done']);
    });

    it('"If two workers race, one wins and the other gets CheckpointConflict before it runs anything."', async () => {
      const { ledger, store } = await crashedOrder7();
      const [a, b] = await Promise.allSettled([
        worker(ledger, store, 'A').recover(ticketsFlow(), 'order-7', {
          rerunInDoubt: true,
        }),
        worker(ledger, store, 'B').recover(ticketsFlow(), 'order-7', {
          rerunInDoubt: true,
        }),
      ]);
      const outcomes = [a, b]
        .map((o) =>
          o.status === 'fulfilled' ? 'won' : (o.reason as Error).name,
        )
        .sort();
      expect(outcomes).toEqual(['CheckpointConflict', 'won']);
      const loser = a.status === 'rejected' ? 'A' : 'B';
      expect(ledger.filter((e) => e.worker === loser)).toEqual([]);
      expect(count(ledger, 'email_tickets')).toBe(1); // only the winner reran it (w1 died before its entry)
    });

    it('"A slow worker that was cut off is fenced: its next started write is refused, so it starts no new call, and its next save conflicts."', async () => {
      const store = new MemoryCheckpointStore();
      const ran: string[] = [];
      let release!: () => void;
      const gate = new Promise<void>((r) => (release = r));
      const registry = (who: string, slow: boolean) =>
        new ToolRegistry()
          .register(
            'reserve',
            async () => {
              ran.push(`${who}:reserve`);
              if (slow) await gate;
              return 'r';
            },
            { idempotent: true },
          )
          .register('charge', async () => {
            ran.push(`${who}:charge`);
            return 'c';
          });
      const flow = new Flow('slow')
        .node('n', async (_s, ctx) => ({
          r: await ctx.call('reserve'),
          c: await ctx.call('charge'),
        }))
        .end('n');
      const slow = runnerOn(store, registry('slow', true)).run(
        flow,
        {},
        { runId: 's' },
      );
      while (!ran.includes('slow:reserve')) await settle();
      // The slow worker looks dead; another recovers the run and finishes it.
      const r = await runnerOn(store, registry('fast', false)).recover(
        flow,
        's',
      );
      expect(r.status).toBe('done');
      release();
      await expect(slow).rejects.toBeInstanceOf(CheckpointConflict);
      expect(ran).toEqual(['slow:reserve', 'fast:reserve', 'fast:charge']);
      // And a cut-off worker's save conflicts.
      const latest = (await store.latest('s'))!;
      await expect(
        store.save({ ...latest, step: 2, segment: 1 }),
      ).rejects.toBeInstanceOf(CheckpointConflict);
    });

    it('"the key is the same for the call on every worker and after every recovery" (idempotency_key())', async () => {
      const store = new MemoryCheckpointStore();
      const keys: string[] = [];
      const flow = ticketsFlow();
      // Two workers die inside email_tickets after passing its key on; a third finishes.
      for (const who of ['w1', 'w2']) {
        const dying = new CrashingStore(store);
        const w = new FlowRunner(
          executorFor([], who, {
            onTool: (t) => {
              if (t !== 'email_tickets') return;
              keys.push(idempotencyKey());
              dying.kill();
            },
          }),
          { checkpoints: dying, checkpointKey: KEY },
        );
        const attempt =
          who === 'w1'
            ? w.run(flow, input, { runId: 'k' })
            : w.recover(flow, 'k', { rerunInDoubt: true });
        await expect(attempt).rejects.toBeInstanceOf(SimulatedCrash);
        await settle();
      }
      const ledger: LedgerEntry[] = [];
      await worker(ledger, store, 'w3').recover(flow, 'k', {
        rerunInDoubt: true,
      });
      keys.push(ledger.find((e) => e.tool === 'email_tickets')!.key);
      expect(keys).toHaveLength(3);
      expect(new Set(keys).size).toBe(1);
      expect(keys[0]).toMatch(/^[A-Za-z0-9_-]{43}$/);
      // Another run's same call gets another key.
      const other: LedgerEntry[] = [];
      await worker(other, store, 'w4').run(flow, input, { runId: 'k2' });
      expect(other.find((e) => e.tool === 'email_tickets')!.key).not.toBe(
        keys[0],
      );
    });
  });

  describe('Stores and errors', () => {
    it('"A store other than the memory one needs checkpoint_key="', () => {
      class SharedStore extends MemoryCheckpointStore {
        override readonly shared = true as never;
      }
      expect(
        () =>
          new FlowRunner(executorFor([], 'w'), {
            checkpoints: new SharedStore(),
          }),
      ).toThrow(CheckpointKeyError);
      expect(
        () =>
          new FlowRunner(executorFor([], 'w'), {
            checkpoints: new SharedStore(),
            checkpointKey: 'short',
          }),
      ).toThrow(/at least 32/);
    });

    it('"CheckpointNotFound: nothing is stored for the run id"', async () => {
      await expect(
        worker([], new MemoryCheckpointStore()).recover(ticketsFlow(), 'nope'),
      ).rejects.toBeInstanceOf(CheckpointNotFound);
    });

    it('"CheckpointConflict: ... it ended, or it is another flow\'s"', async () => {
      const store = new MemoryCheckpointStore();
      const w = worker([], store);
      await w.run(ticketsFlow(), input, { runId: 'e' });
      await expect(w.recover(ticketsFlow(), 'e')).rejects.toThrow(
        /has ended \(done\)/,
      );
      const other = new Flow('other').node('x', () => ({})).end('x');
      await expect(w.recover(other, 'e')).rejects.toBeInstanceOf(
        CheckpointConflict,
      );
    });

    it('"FlowError: the flow\'s graph changed since the checkpoint was saved"', async () => {
      const store = new MemoryCheckpointStore();
      await crashInEmail(store, [], 'order-7');
      const err = await worker([], store)
        .recover(
          new Flow('tickets').node('hold', () => ({})).end('hold'),
          'order-7',
        )
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(FlowError);
      expect((err as Error).message).toMatch(/graph .* changed/);
    });
  });
});

describe('Durable protocol (DESIGN.md)', () => {
  it('a superstep makes two store writes however many calls its nodes make at once: the started records together, then the done records with the checkpoint', async () => {
    const { store, writes } = countingStore();
    const registry = new ToolRegistry()
      .register('lookup', async (a: { n: number }) => a.n * 2, {
        readOnly: true,
      })
      .register('charge', (a: { n: number }) => `charged ${a.n}`);
    const flow = new Flow<{ out: unknown[] }>('fan-out')
      .node('a', async (_, ctx) => ({
        out: await Promise.all([
          ctx.call('charge', { n: 1 }),
          ctx.call('lookup', { n: 2 }),
          ctx.call('charge', { n: 3 }),
          ctx.call('lookup', { n: 4 }),
        ]),
      }))
      .end('a');
    const runner = runnerOn(store, registry);
    const result = await runner.run(flow, { out: [] });
    expect(result.state.out).toEqual(['charged 1', 4, 'charged 3', 8]);
    // The step-0 checkpoint, then the superstep's two writes.
    expect(writes).toEqual(['save +0', 'recordCall 4', 'save +4']);
  });

  /** A memory store that lists its writes: `save +<calls it carried>` or `recordCall <n>`. */
  function countingStore() {
    const store = new MemoryCheckpointStore();
    const writes: string[] = [];
    const [recordCall, save] = [
      store.recordCall.bind(store),
      store.save.bind(store),
    ];
    jest.spyOn(store, 'recordCall').mockImplementation(async (...a) => {
      writes.push(`recordCall ${a[2].length}`);
      return recordCall(...a);
    });
    jest.spyOn(store, 'save').mockImplementation(async (...a) => {
      writes.push(`save +${a[1]?.calls?.length ?? 0}`);
      return save(...a);
    });
    return { store, writes };
  }

  /** Three nodes, one call each; b runs `before` first. */
  const chain = (callsFirst: boolean, before?: () => Promise<void>) =>
    new Flow<{ out: string[] }>('chain')
      .node('a', async (s, ctx) => ({
        out: [...s.out, await ctx.call<string>('step', { n: 1 })],
      }))
      .node(
        'b',
        async (s, ctx) => {
          await before?.();
          return {
            out: [...s.out, await ctx.call<string>('step', { n: 2 })],
          };
        },
        { callsFirst },
      )
      .node(
        'c',
        async (s, ctx) => ({
          out: [...s.out, await ctx.call<string>('step', { n: 3 })],
        }),
        { callsFirst },
      )
      .edge('a', 'b')
      .edge('b', 'c')
      .end('c');

  const stepRunner = (store: CheckpointStore) =>
    new FlowRunner(
      new Executor(
        new ToolRegistry().register('step', (a: { n: number }) => `s${a.n}`),
      ),
      { checkpoints: store, checkpointKey: KEY },
    );

  it("before a callsFirst node, the checkpoint goes out with its first call's started record: one write per superstep with one call", async () => {
    const { store, writes } = countingStore();
    const runner = stepRunner(store);
    const saved: number[] = [];
    runner.events.on('checkpoint.saved', (e) => saved.push(e.step));
    const result = await runner.run(chain(true), { out: [] }, { runId: 'c1' });
    expect(result.state.out).toEqual(['s1', 's2', 's3']);
    // Step 0; a's started; a's done + checkpoint 1 + b's started; b's done + checkpoint 2 + c's
    // started; c's done + the final checkpoint.
    expect(writes).toEqual([
      'save +0',
      'recordCall 1',
      'save +2',
      'save +2',
      'save +1',
    ]);
    expect(saved).toEqual([0, 1, 2, 3]);
    // Every record is stored where it belongs: each checkpoint counts the records before it.
    const history = await store.history('c1');
    expect(history.checkpoints.map((c) => c.step)).toEqual([0, 1, 2, 3]);
    expect(
      history.calls.map((c) => [c.superstep, c.seq, decode(c).phase]),
    ).toEqual([
      [0, 1, 'started'],
      [0, 2, 'done'],
      [1, 1, 'started'],
      [1, 2, 'done'],
      [2, 1, 'started'],
      [2, 2, 'done'],
    ]);
  });

  it('a callsFirst node that waits before its first call does not hold the checkpoint back: it is written alone', async () => {
    const { store, writes } = countingStore();
    let stored: number | undefined;
    const wait = async () => {
      await new Promise((resolve) => setTimeout(resolve, 5));
      stored = (await store.latest('c2'))?.step;
    };
    await stepRunner(store).run(
      chain(true, wait),
      { out: [] },
      {
        runId: 'c2',
      },
    );
    expect(stored).toBe(1); // b's node saw a's checkpoint stored while it waited
    expect(writes).toEqual([
      'save +0',
      'recordCall 1',
      'save +1',
      'recordCall 1',
      'save +2',
      'save +1',
    ]);
  });

  it('any other node starts only once the previous checkpoint is stored (two writes per superstep)', async () => {
    const { store, writes } = countingStore();
    const seen: Array<number | undefined> = [];
    let runId = 'c4';
    const look = async () => {
      seen.push((await store.latest(runId))?.step);
    };
    await stepRunner(store).run(
      chain(false, look),
      { out: [] },
      {
        runId: 'c4',
      },
    );
    expect(seen).toEqual([1]);
    expect(writes).toEqual([
      'save +0',
      'recordCall 1',
      'save +1',
      'recordCall 1',
      'save +1',
      'recordCall 1',
      'save +1',
    ]);
    // The same node marked callsFirst starts before it: that is what the option allows.
    seen.length = 0;
    runId = 'c5';
    await stepRunner(store).run(chain(true, look), { out: [] }, { runId });
    expect(seen).toEqual([0]);
  });

  it("a checkpoint the store refuses is never followed by a tool: the next superstep's call is refused with it", async () => {
    const store = new MemoryCheckpointStore();
    const ran: number[] = [];
    const refused = new CheckpointConflict('taken by another worker', 'c3');
    const save = store.save.bind(store);
    jest.spyOn(store, 'save').mockImplementation(async (record, options) => {
      if (record.step === 2) throw refused;
      return save(record, options);
    });
    const runner = new FlowRunner(
      new Executor(
        new ToolRegistry().register('step', (a: { n: number }) => {
          ran.push(a.n);
          return `s${a.n}`;
        }),
      ),
      { checkpoints: store, checkpointKey: KEY },
    );
    await expect(
      runner.run(chain(true), { out: [] }, { runId: 'c3' }),
    ).rejects.toBe(refused);
    expect(ran).toEqual([1, 2]); // c's tool never ran
    const history = await store.history('c3');
    expect(history.checkpoints.map((c) => c.step)).toEqual([0, 1]);
    // b's done and c's started went with the refused write: b is in doubt, as after a crash.
    expect(history.calls.map((c) => [c.superstep, decode(c).phase])).toEqual([
      [0, 'started'],
      [0, 'done'],
      [1, 'started'],
    ]);
  });

  it('an event listener that throws after a checkpoint that carried a started record does not leave that call in doubt', async () => {
    const store = new MemoryCheckpointStore();
    const ran: string[] = [];
    const registry = () =>
      new ToolRegistry()
        .register('step', () => (ran.push('step'), 's'), { idempotent: true })
        .register('charge', () => (ran.push('charge'), 'c'));
    const flow = () =>
      new Flow('listener')
        .node('a', Call('step'))
        .node('b', Call('charge'))
        .edge('a', 'b')
        .end('b');
    // Its error reporter is down too: the listener's error escapes the events object.
    const events = new DurableEvents(() => {
      throw new Error('error reporter down');
    });
    events.on('checkpoint.saved', (e) => {
      if (e.step === 1) throw new Error('listener');
    });
    const warn = jest.spyOn(console, 'warn').mockImplementation(() => {});
    const result = await runnerOn(store, registry(), {
      events,
    }).run(flow(), {}, { runId: 'l1' });
    expect(warn).toHaveBeenCalledWith(
      'agent-adapter: a checkpoint.saved listener failed',
      expect.any(Error),
    );
    warn.mockRestore();
    expect(result.status).toBe('done');
    expect(ran).toEqual(['step', 'charge']);
  });

  it('run ids are 128-bit random unless the caller gives one', async () => {
    const w = worker([], new MemoryCheckpointStore());
    const a = await w.run(ticketsFlow(), input);
    const b = await w.run(ticketsFlow(), input);
    expect(a.runId).toMatch(/^[0-9a-f]{32}$/);
    expect(a.runId).not.toBe(b.runId);
  });

  it('a node that throws ends the run failed with the error sealed (not recovered again)', async () => {
    const store = new MemoryCheckpointStore();
    const flow = new Flow('boom')
      .node('a', () => {
        throw new RangeError('bad seat');
      })
      .end('a');
    const w = worker([], store);
    const r = await w.run(flow, {}, { runId: 'f' });
    expect(r).toMatchObject({
      status: 'failed',
      error: { name: 'RangeError', message: 'bad seat', node: 'a' },
    });
    expect(openCheckpoint(ring, (await store.latest('f'))!).error).toEqual(
      r.error,
    );
    await expect(w.recover(flow, 'f')).rejects.toThrow(/has ended \(failed\)/);
    expect(await store.listUnfinished('boom')).toEqual([]);
  });

  it('a tool that throws is logged done with its error, and recovery replays the error instead of running it again', async () => {
    const store = new MemoryCheckpointStore();
    let declines = 0;
    const registry = (die?: () => void) =>
      new ToolRegistry()
        .register('charge', async () => {
          declines++;
          throw new TypeError('card declined');
        })
        .register(
          'next',
          async () => {
            die?.();
            return 1;
          },
          { idempotent: true },
        );
    const seen: unknown[] = [];
    const flow = new Flow('e')
      .node('n', async (_s, ctx) => {
        try {
          await ctx.call('charge');
        } catch (e) {
          seen.push([
            (e as ToolFailed).name,
            (e as ToolFailed).errorName,
            (e as Error).message,
            (e as ToolFailed).replayed,
          ]);
        }
        return { x: await ctx.call('next') };
      })
      .end('n');
    await crashedIn(store, flow, 'e', registry);
    const r = await runnerOn(store, registry()).recover(flow, 'e');
    expect(r.status).toBe('done');
    expect(declines).toBe(1);
    expect(seen).toEqual([
      ['ToolFailed', 'TypeError', 'card declined', false],
      ['ToolFailed', 'TypeError', 'card declined', true],
    ]);
  });

  it('two nodes writing one key in one superstep is a FlowError unless the state declares a reducer', async () => {
    const mk = () =>
      new Flow<{ log?: string[] }>('fan')
        .node('a', () => ({ log: ['a'] }))
        .node('b', () => ({ log: ['b'] }))
        .start('a', 'b')
        .end('a', 'b');
    const r = await worker([], new MemoryCheckpointStore()).run(mk(), {});
    expect(r.status).toBe('failed');
    expect(r.error?.message).toMatch(/"a" and "b" both wrote "log"/);
    const ok = await worker([], new MemoryCheckpointStore()).run(
      mk().reducer('log', (cur, upd) => [...(cur ?? []), ...upd]),
      { log: [] },
    );
    expect(ok.state.log).toEqual(['a', 'b']);
  });

  it('routes, loops and the visit limit', async () => {
    const flow = new Flow<{ n: number }>('loop', { maxVisits: 5 })
      .node('inc', (s) => ({ n: s.n + 1 }))
      .route('inc', (s) => (s.n < 3 ? 'inc' : 'END'), ['inc', 'END'])
      .node('END', () => ({}))
      .end('END');
    const r = await worker([], new MemoryCheckpointStore()).run(flow, { n: 0 });
    expect(r).toMatchObject({ status: 'done', state: { n: 3 } });
    const r2 = await worker([], new MemoryCheckpointStore()).run(flow, {
      n: -10,
    });
    expect(r2.status).toBe('failed');
    expect(r2.error?.message).toMatch(/more than 5 times/);
  });

  it('invalid input state is refused with every violation named, before anything is stored', async () => {
    class Order {
      @IsString() @MinLength(1) show = '';
      @IsInt() @Min(1) seats = 0;
    }
    const store = new MemoryCheckpointStore();
    const flow = new Flow('v', { state: Order }).node('a', () => ({})).end('a');
    const err = await worker([], store)
      .run(flow, { show: '', seats: 0.5 }, { runId: 'v' })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InvalidFlowState);
    expect(
      new Set((err as InvalidFlowState).violations.map((v) => v.path)),
    ).toEqual(new Set(['show', 'seats']));
    expect((err as Error).message).toMatch(/seats/);
    expect((err as Error).message).toMatch(/show/);
    expect(await store.latest('v')).toBeUndefined();
  });

  it('idempotencyKey() outside a tool call throws a clear error', () => {
    expect(() => idempotencyKey()).toThrow(/outside a durable run's tool call/);
  });

  it('key rotation: a run signed with the old key is recovered after rotation, with the same idempotency keys', async () => {
    const store = new MemoryCheckpointStore();
    const keys: string[] = [];
    const dying = new CrashingStore(store);
    const w1 = new FlowRunner(
      executorFor([], 'w1', {
        onTool: (t) => {
          if (t !== 'email_tickets') return;
          keys.push(idempotencyKey());
          dying.kill();
        },
      }),
      { checkpoints: dying, checkpointKey: KEY },
    );
    await expect(
      w1.run(ticketsFlow(), input, { runId: 'rot' }),
    ).rejects.toBeInstanceOf(SimulatedCrash);
    await settle();
    const NEW = 'a-brand-new-key-a-brand-new-key-32';
    const ledger: LedgerEntry[] = [];
    const rotated = new FlowRunner(executorFor(ledger, 'w2'), {
      checkpoints: store,
      checkpointKey: { current: NEW, previous: [KEY] },
    });
    const r = await rotated.recover(ticketsFlow(), 'rot', {
      rerunInDoubt: true,
    });
    expect(r.status).toBe('done');
    expect(ledger.find((e) => e.tool === 'email_tickets')?.key).toBe(keys[0]);
    const newest = (await store.latest('rot'))!;
    expect(() => openCheckpoint(KeyRing.from(NEW), newest)).not.toThrow();
    // Without the old key, the run's older records cannot be verified.
    const first = (await store.history('rot')).checkpoints[0]!;
    expect(() => openCheckpoint(KeyRing.from(NEW), first)).toThrow(
      CheckpointStoreCorrupt,
    );
  });
});
