/**
 * Transient store faults, as the runner meets them: a write that fails in a way that may pass is
 * read back and written again (a finished call's record is not lost, nothing becomes a decision),
 * and a store that stays unavailable stops the run with CheckpointStoreUnavailable and releases it
 * so another worker takes it at once. The real faults (pg_terminate_backend, a SQLite lock) are in
 * test/stores/store-faults.e2e-spec.ts.
 */
import {
  CheckpointStoreUnavailable,
  Flow,
  MemoryCheckpointStore,
  ToolRegistry,
} from 'agent-adapter';
import { ForwardingStore, InterceptingStore } from 'agent-adapter/testing';
import { runnerOn } from '../../../../../test/utils/specs';

const dropped = () =>
  Object.assign(
    new Error('terminating connection due to administrator command'),
    {
      code: '57P01',
    },
  );

function charging() {
  const charged: string[] = [];
  const registry = new ToolRegistry();
  registry.register('charge', (a: { order: string }) => {
    charged.push(a.order);
    return `charged ${a.order}`;
  });
  registry.register('mail', (a: { order: string }) => `mailed ${a.order}`);
  const flow = new Flow<{ order: string; receipt?: string; mail?: string }>(
    'order',
  )
    .node('charge', async (s, ctx) => ({
      receipt: await ctx.call<string>('charge', { order: s.order }),
    }))
    .node('mail', async (s, ctx) => ({
      mail: await ctx.call<string>('mail', { order: s.order }),
    }))
    .edge('charge', 'mail')
    .end('mail');
  return { charged, registry, flow };
}

describe('transient store faults', () => {
  it("the charge's done record lost to a dropped connection (twice, once after it landed) is written again: the run finishes, charged once, no decision", async () => {
    const inner = new MemoryCheckpointStore();
    const { charged, registry, flow } = charging();
    let faults = 0;
    let landedThenLost = false;
    const store = new InterceptingStore(inner, {
      before: (w) => {
        const done = w.records.some((r) => r.superstep === 0 && r.seq === 2);
        if (done && faults < 2) {
          faults++;
          throw dropped();
        }
      },
      after: (w) => {
        if (w.kind === 'save' && w.checkpoint.step === 1 && !landedThenLost) {
          landedThenLost = true;
          throw dropped();
        }
      },
    });
    const result = await runnerOn(store, registry).run(
      flow,
      { order: 'o-1' },
      { runId: 'o-1' },
    );
    expect(result.status).toBe('done');
    expect(faults).toBe(2);
    expect(landedThenLost).toBe(true);
    expect(charged).toEqual(['o-1']);
  });

  it('a store that stays unavailable stops the run with CheckpointStoreUnavailable and releases it: another worker recovers it at once, from what was stored', async () => {
    const inner = new MemoryCheckpointStore();
    const { charged, registry, flow } = charging();
    let down = false;
    const store = new InterceptingStore(inner, {
      before: () => {
        if (down) throw dropped();
      },
      after: (w) => {
        // Down right after the charge's `started` record is stored.
        if (w.kind === 'recordCall') down = true;
      },
    });
    const w1 = runnerOn(store, registry, {
      workerId: 'w1',
      leaseMs: 60_000,
    });
    const err = await w1
      .run(flow, { order: 'o-2' }, { runId: 'o-2' })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CheckpointStoreUnavailable);
    expect((err as Error).message).toMatch(/stayed unavailable/);
    // Released (the lease renewal is not one of the writes that failed): free at once.
    expect((await inner.head('o-2'))!.leaseExpiresAt).toBeLessThanOrEqual(
      Date.now(),
    );
    down = false;
    const w2 = runnerOn(store, registry, { workerId: 'w2', leaseMs: 60_000 });
    const outcomes = await w2.recoverAll(flow);
    // Taken at once (not "held by w1"): the charge ran and its result was never stored, so it
    // is in doubt and recovery asks for a decision rather than charging again.
    expect([...outcomes].map(([id, o]) => [id, (o as Error).name])).toEqual([
      ['o-2', 'RecoveryNeedsDecision'],
    ]);
    expect(charged).toEqual(['o-2']);
    w1.close();
    w2.close();
  }, 15_000);
  it('the release is tried again while the store still fails (a lock outlasting the run, found on SQLite): the lease is cleared once the store is back', async () => {
    const inner = new MemoryCheckpointStore();
    const { registry, flow } = charging();
    let down = false;
    let refusedReleases = 0;
    // Down for writes and for the first two releases, as a store still locked when the run gives up.
    class Failing extends ForwardingStore {
      override renewLeases(
        owner: string,
        leaseExpiresAt: number,
        runIds: readonly string[],
      ): Promise<number> {
        if (down && leaseExpiresAt <= Date.now() && refusedReleases < 2) {
          refusedReleases++;
          if (refusedReleases === 2) down = false;
          return Promise.reject(
            Object.assign(new Error('database is locked'), {
              code: 'SQLITE_BUSY',
            }),
          );
        }
        return super.renewLeases(owner, leaseExpiresAt, runIds);
      }
    }
    const store = new InterceptingStore(new Failing(inner), {
      before: () => {
        if (down) throw dropped();
      },
      after: (w) => {
        if (w.kind === 'recordCall') down = true;
      },
    });
    const w1 = runnerOn(store, registry, { workerId: 'w1', leaseMs: 60_000 });
    const err = await w1
      .run(flow, { order: 'o-3' }, { runId: 'o-3' })
      .catch((e: unknown) => e);
    w1.close();
    expect(err).toBeInstanceOf(CheckpointStoreUnavailable);
    expect(refusedReleases).toBe(2);
    expect((await inner.head('o-3'))!.leaseExpiresAt).toBeLessThanOrEqual(
      Date.now(),
    );
  }, 15_000);
});
