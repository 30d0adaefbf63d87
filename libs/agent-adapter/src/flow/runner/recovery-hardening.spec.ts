/**
 * Interleavings a protocol review proved unsafe, kept as regression tests: run ids used again,
 * restarted workers and their leases, rotated keys, deleted runs, lost checkpoints. Memory store;
 * the Redis-specific ones (TTL, evicted keys) are in test/stores/redis-hardening.e2e-spec.ts.
 */
import {
  CheckpointConflict,
  CheckpointKeyError,
  CheckpointStoreCorrupt,
  FlowRunner,
  KeyRing,
  MemoryCheckpointStore,
  type CheckpointRecord,
  type SaveOptions,
} from 'agent-adapter';
import { CrashingStore, SimulatedCrash, settle } from 'agent-adapter/testing';
import {
  KEY,
  executorFor,
  ticketsFlow,
  type LedgerEntry,
} from 'agent-adapter/testing/fixtures';
import { crashInEmail } from '../../testing/conformance/crash-in-email';
import { sleep } from '../../../../../test/utils/specs';

function gate() {
  let open!: () => void;
  const opened = new Promise<void>((r) => (open = r));
  let signal!: () => void;
  const entered = new Promise<void>((r) => (signal = r));
  return { open, opened, signal, entered };
}

describe('recovery hardening (memory store)', () => {
  it('a worker of a deleted run cannot write into (or run calls for) a new run with the same id', async () => {
    const store = new MemoryCheckpointStore();
    const ledger: LedgerEntry[] = [];
    const g1 = gate();
    const g2 = gate();
    const blockIn = (g: ReturnType<typeof gate>) => async (tool: string) => {
      if (tool !== 'hold_seats') return;
      g.signal();
      await g.opened;
    };
    const w1 = new FlowRunner(
      executorFor(ledger, 'w1', { onTool: blockIn(g1) }),
      { checkpoints: store, checkpointKey: KEY },
    );
    const w2 = new FlowRunner(
      executorFor(ledger, 'w2', { onTool: blockIn(g2) }),
      { checkpoints: store, checkpointKey: KEY },
    );
    // Incarnation 1 (order A); W1 is slow inside hold_seats.
    const p1 = w1.run(ticketsFlow(), { show: 'A', seats: 1 }, { runId: 'o-9' });
    const r1 = p1.then(
      (r) => r,
      (e: unknown) => e,
    );
    await g1.entered;
    // An operator deletes the run and the app starts it again with the same business id.
    expect(await store.delete('o-9')).toBe(true);
    const p2 = w2.run(ticketsFlow(), { show: 'B', seats: 5 }, { runId: 'o-9' });
    const r2 = p2.then(
      (r) => r,
      (e: unknown) => e,
    );
    await g2.entered;
    // The stale W1 wakes up.
    g1.open();
    const stale = await r1;
    g2.open();
    await r2;
    // W1 belongs to a run that no longer exists: it must be fenced and must charge nothing.
    expect(
      ledger.filter((e) => e.worker === 'w1' && e.tool === 'charge_card'),
    ).toEqual([]);
    expect(stale).toBeInstanceOf(CheckpointConflict);
  });

  it('a run id used again gets new idempotency keys (its incarnation is part of them)', async () => {
    const store = new MemoryCheckpointStore();
    const ledger: LedgerEntry[] = [];
    const w = new FlowRunner(executorFor(ledger, 'w'), {
      checkpoints: store,
      checkpointKey: KEY,
    });
    await w.run(ticketsFlow(), { show: 'A', seats: 1 }, { runId: 'order-8' });
    await store.delete('order-8'); // or: its Redis keys expired (ttlSeconds)
    await w.run(ticketsFlow(), { show: 'B', seats: 5 }, { runId: 'order-8' });
    const charges = ledger.filter((e) => e.tool === 'charge_card');
    expect(charges).toHaveLength(2);
    // Same key for a different charge (1 seat vs 5): the payment API returns the OLD charge and
    // the new order is never charged. Doc of idempotencyKey(): "different for every other call".
    expect(charges[1]!.key).not.toBe(charges[0]!.key);
  });

  it('recoverAll on a quickly restarted worker reports the crashed run whose lease is still live', async () => {
    const store = new MemoryCheckpointStore();
    const ledger: LedgerEntry[] = [];
    await crashInEmail(store, ledger, 'order-7');
    // The process restarts within leaseMs (15 s by default; k8s/systemd restart in ~1 s) and runs
    // the bootstrap recovery, the only place recoverAll is called.
    const restarted = new FlowRunner(executorFor(ledger, 'w1-restarted'), {
      checkpoints: store,
      checkpointKey: KEY,
    });
    const out = await restarted.recoverAll(ticketsFlow(), {
      rerunInDoubt: true,
    });
    // Spec: "recover_all(flow) recovers every unfinished run ... It maps each run id to its result
    // or to the error that stopped it." The run is silently skipped and nothing retries it later.
    expect([...out.keys()]).toContain('order-7');
  });

  it('a run its worker dropped after a store error stops being renewed, though the worker drives other runs', async () => {
    class FlakyStore extends MemoryCheckpointStore {
      readonly failOnce = new Set<string>();
      // The first write after the start (step 0 rides with the first call's `started`).
      override async save(
        cp: CheckpointRecord,
        options?: SaveOptions,
      ): Promise<void> {
        if (cp.step === 1 && this.failOnce.delete(cp.runId))
          throw new Error('ECONNRESET (simulated transient store error)');
        return super.save(cp, options);
      }
    }
    const store = new FlakyStore();
    let slowMs = 0;
    const w = new FlowRunner(
      executorFor([], 'w', {
        onTool: async (t) => {
          if (t === 'hold_seats' && slowMs) await sleep(slowMs);
        },
      }),
      { checkpoints: store, checkpointKey: KEY, leaseMs: 300 },
    );
    store.failOnce.add('r1');
    await expect(
      w.run(ticketsFlow(), { show: 'X', seats: 1 }, { runId: 'r1' }),
    ).rejects.toThrow(/ECONNRESET/);
    // r1 is unfinished and nobody drives it. The same worker goes on with other work.
    slowMs = 1500;
    const p2 = w.run(ticketsFlow(), { show: 'Y', seats: 1 }, { runId: 'r2' });
    await sleep(1000); // > 3 × leaseMs after r1 was dropped
    const claimable = await store.listUnfinished('tickets', {
      leaseExpiredBefore: Date.now(),
    });
    slowMs = 0;
    await p2;
    w.close();
    expect(claimable.map((h) => h.runId)).toContain('r1');
  });

  it('a run whose idempotency key id left the ring is refused before anything is written', async () => {
    const A = KEY;
    const B = 'bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb';
    const store = new MemoryCheckpointStore();
    const input = { show: 'K', seats: 1 };
    // W1 (key A) dies inside charge_card.
    const d1 = new CrashingStore(store);
    const w1 = new FlowRunner(
      executorFor([], 'w1', {
        onTool: (t) => (t === 'charge_card' ? d1.kill() : undefined),
      }),
      { checkpoints: d1, checkpointKey: A },
    );
    await expect(
      w1.run(ticketsFlow(), input, { runId: 'k' }),
    ).rejects.toBeInstanceOf(SimulatedCrash);
    await settle();
    // W2 (rotated: B current, A previous) recovers, finishes pay, dies inside email_tickets.
    const d2 = new CrashingStore(store);
    const w2 = new FlowRunner(
      executorFor([], 'w2', {
        onTool: (t) => (t === 'email_tickets' ? d2.kill() : undefined),
      }),
      { checkpoints: d2, checkpointKey: { current: B, previous: [A] } },
    );
    await expect(
      w2.recover(ticketsFlow(), 'k', { rerunInDoubt: true }),
    ).rejects.toBeInstanceOf(SimulatedCrash);
    await settle();
    // Everything the next recovery reads is now signed with B, so the operator drops A.
    const before = (await store.head('k'))!;
    const w3 = new FlowRunner(executorFor([], 'w3'), {
      checkpoints: store,
      checkpointKey: B,
    });
    const outcome = await w3
      .recover(ticketsFlow(), 'k', { rerunInDoubt: true })
      .then(
        (r) => r,
        (e: unknown) => e,
      );
    const after = (await store.head('k'))!;
    expect(outcome).toBeInstanceOf(CheckpointKeyError);
    expect(after).toMatchObject({ step: before.step, status: 'running' });
  });

  it('the unknown-key message names the KeyRing option that exists (previous)', () => {
    let message = '';
    try {
      new KeyRing({ current: KEY }).get('nope');
    } catch (e) {
      message = (e as Error).message;
    }
    expect(message).not.toContain('previousKeys');
    expect(message).toMatch(/\bprevious\b/);
  });

  it('a worker whose run was deleted under it is told so', async () => {
    const store = new MemoryCheckpointStore();
    const g = gate();
    const w = new FlowRunner(
      executorFor([], 'w', {
        onTool: async (t) => {
          if (t !== 'hold_seats') return;
          g.signal();
          await g.opened;
        },
      }),
      { checkpoints: store, checkpointKey: KEY },
    );
    const p = w
      .run(ticketsFlow(), { show: 'D', seats: 1 }, { runId: 'del' })
      .then(
        (r) => r,
        (e: unknown) => e,
      );
    await g.entered;
    await store.delete('del');
    g.open();
    const error = (await p) as Error;
    expect(error).toBeInstanceOf(CheckpointConflict);
    expect(error.message).not.toMatch(
      /another worker recovered it|has no checkpoint yet/,
    );
  });

  it('lost tail checkpoints (a rolled-back head) are CheckpointStoreCorrupt, not a silent rerun of done calls', async () => {
    class EditableStore extends MemoryCheckpointStore {
      /** Loses the last n checkpoint rows (a partial restore, or an edited head), nothing else. */
      dropLatest(runId: string, n: number): void {
        const run = this.runs.get(runId)!;
        run.checkpoints.splice(-n);
        const last = run.checkpoints[run.checkpoints.length - 1]!;
        run.head = {
          ...run.head,
          step: last.step,
          status: last.status,
          segment: last.segment,
        };
      }
    }
    const store = new EditableStore();
    const ledger: LedgerEntry[] = [];
    await crashInEmail(store, ledger, 'rb');
    expect(ledger.map((e) => e.tool)).toEqual(['hold_seats', 'charge_card']);
    // The call log (5 records, all signed, no gap) is intact; steps 1 and 2 are gone.
    store.dropLatest('rb', 2);
    const w2 = new FlowRunner(executorFor(ledger, 'w2'), {
      checkpoints: store,
      checkpointKey: KEY,
    });
    const outcome = await w2.recover(ticketsFlow(), 'rb').then(
      (r) => r,
      (e: unknown) => e,
    );
    // Today: recovery succeeds, charges the card a second time and sends the in-doubt mail
    // without a RecoveryNeedsDecision (the replay book covers only the first superstep).
    expect(ledger.filter((e) => e.tool === 'charge_card')).toHaveLength(1);
    expect(outcome).toBeInstanceOf(CheckpointStoreCorrupt);
  });
});

describe('caller-given run ids', () => {
  const RULE =
    'is invalid: use 1-200 letters, digits, "_", ".", ":", "@" or "-".';
  // What `run` refuses; recover, get and resume must refuse them the same way.
  const odd: Array<[string, string]> = [
    ['empty', ''],
    ['201 characters', 'x'.repeat(201)],
    ['a megabyte', 'x'.repeat(1 << 20)],
    ['a NUL byte', 'a\0b'],
    ['a hash-tag brace', 'a{b}'],
    ['a space', 'order 7'],
  ];

  /** A memory store that records which methods were called. */
  function watched() {
    const store = new MemoryCheckpointStore();
    const called: string[] = [];
    for (const m of ['head', 'latest', 'calls', 'history', 'save'] as const) {
      const original = store[m].bind(store) as (...a: unknown[]) => unknown;
      (store as unknown as Record<string, unknown>)[m] = (...a: unknown[]) => {
        called.push(m);
        return original(...a);
      };
    }
    return { store, called };
  }

  /**
   * A tickets runner on a {@link watched} store, and `reads`: what its recover, get and resume of
   * `runId` each settled with, in turn.
   */
  function watchedRunner() {
    const { store, called } = watched();
    const runner = new FlowRunner(executorFor([], 'w'), {
      checkpoints: store,
      checkpointKey: KEY,
    });
    const flow = ticketsFlow();
    const reads = async (runId: string): Promise<unknown[]> => {
      const settled: unknown[] = [];
      for (const read of [
        () => runner.recover(flow, runId),
        () => runner.get(flow, runId),
        () => runner.resume(flow, runId, { approved: true }),
      ])
        settled.push(await read().catch((e: unknown) => e));
      return settled;
    };
    return { runner, flow, called, reads };
  }

  it.each(odd)(
    'recover, get and resume refuse a run id that is %s with run’s TypeError, before reading the store',
    async (_what, id) => {
      const { runner, flow, called, reads } = watchedRunner();
      const refused = await runner
        .run(flow, { show: 'A', seats: 1 }, { runId: id })
        .catch((e: unknown) => e);
      expect(refused).toBeInstanceOf(TypeError);
      const message = (refused as Error).message;
      expect(message).toContain(RULE);
      expect(message.length).toBeLessThan(200); // a long id is shortened
      for (const error of await reads(id)) {
        expect(error).toBeInstanceOf(TypeError);
        expect((error as Error).message).toBe(message);
      }
      expect(called).toEqual([]);
    },
  );

  it.each([undefined, null, 42, { id: 'x' }])(
    'recover, get and resume refuse a run id that is not a string (%p)',
    async (id) => {
      const { called, reads } = watchedRunner();
      for (const error of await reads(id as unknown as string)) {
        expect(error).toBeInstanceOf(TypeError);
        expect((error as Error).message).toMatch(/^Run id .* is invalid: use/);
      }
      expect(called).toEqual([]);
    },
  );
});
