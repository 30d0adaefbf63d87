/**
 * RedisCheckpointStore under what Redis does to keys: TTLs running out during a long superstep,
 * and keys lost to eviction. Regression tests from a protocol review.
 */
import Redis from 'ioredis';
import {
  CheckpointStoreCorrupt,
  FlowRunner,
  RecoveryNeedsDecision,
  RedisCheckpointStore,
} from 'agent-adapter';
import { CrashingStore, SimulatedCrash, settle } from '../utils/crashing-store';
import {
  KEY,
  executorFor,
  ticketsFlow,
  type LedgerEntry,
} from '../utils/tickets';
import { dropPrefix } from '../utils/redis-keys';
import { REDIS_URL, describeWithService, suiteId } from '../utils/services';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describeWithService('redis', 'Redis hardening', () => {
  const prefixes: string[] = [];
  const stores: RedisCheckpointStore[] = [];
  let admin: Redis;

  beforeAll(() => {
    admin = new Redis(REDIS_URL);
  });

  afterAll(async () => {
    await Promise.all(stores.map((s) => s.close()));
    for (const prefix of prefixes) await dropPrefix(admin, prefix);
    await admin.quit();
  });

  function open(ttlSeconds?: number) {
    const prefix = suiteId('rf');
    prefixes.push(prefix);
    const store = new RedisCheckpointStore(() => new Redis(REDIS_URL), {
      prefix,
      ...(ttlSeconds !== undefined && { ttlSeconds }),
    });
    stores.push(store);
    return { store, prefix };
  }

  it('a live run whose superstep outlasts ttlSeconds does not expire while its worker renews the lease', async () => {
    const { store } = open(1);
    const w = new FlowRunner(
      executorFor([], 'w', {
        onTool: async (t) => {
          if (t === 'hold_seats') await sleep(2500);
        },
      }),
      { checkpoints: store, checkpointKey: KEY, leaseMs: 300 },
    );
    const outcome = await w
      .run(ticketsFlow(), { show: 'T', seats: 1 }, { runId: 'ttl-1' })
      .then(
        (r) => r,
        (e: unknown) => e,
      );
    w.close();
    // Today: every key expired during hold_seats (lease renewals never touch them); the worker
    // then fails with 'cannot save step 1, the run has no checkpoint yet' and the run is gone.
    expect(outcome).toMatchObject({ status: 'done' });
  });

  it('a lost call-log key (eviction, partial loss) is CheckpointStoreCorrupt, not a call that never ran', async () => {
    const { store, prefix } = open();
    const ledger: LedgerEntry[] = [];
    const runId = suiteId('order');
    const dying = new CrashingStore(store);
    const w1 = new FlowRunner(
      executorFor(ledger, 'w1', {
        onTool: (t) => (t === 'email_tickets' ? dying.kill() : undefined),
      }),
      { checkpoints: dying, checkpointKey: KEY },
    );
    await expect(
      w1.run(ticketsFlow(), { show: 'E', seats: 1 }, { runId }),
    ).rejects.toBeInstanceOf(SimulatedCrash);
    await settle();
    // email_tickets (superstep 2) is logged `started`: in doubt. The run's call index is evicted
    // (maxmemory-policy volatile-lru/allkeys-lru evicts per key; the run keys all carry a TTL).
    // The head's `calls` counter still says 5 records exist; none can be found.
    expect(await admin.hget(`{${prefix}:${runId}}:run`, 'calls')).toBe('5');
    expect(await admin.del(`{${prefix}:${runId}}:index`)).toBe(1);

    const w2 = new FlowRunner(executorFor(ledger, 'w2'), {
      checkpoints: store,
      checkpointKey: KEY,
    });
    const outcome = await w2.recover(ticketsFlow(), runId).then(
      (r) => r,
      (e: unknown) => e,
    );
    // Today: recovery sees no call at all, claims, and sends the mail again without a decision.
    expect(ledger.filter((e) => e.tool === 'email_tickets')).toEqual([]);
    expect(
      outcome instanceof RecoveryNeedsDecision ||
        outcome instanceof CheckpointStoreCorrupt,
    ).toBe(true);
  });
});
