/**
 * Restoring a store from a backup (issue 16 item 7), on a real SQLite file: a snapshot taken after
 * the seats were held, the run finished (card charged, mail sent), the snapshot put back. Without
 * `runs restored`, recovery charges the card again; with it, every call the restored rows do not
 * record done, of a tool that is not idempotent, waits for a decision (here: "it ran"), and the
 * card is charged and the mail sent once.
 */
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import {
  Flow,
  RecoveryNeedsDecision,
  SQLiteCheckpointStore,
  ToolRegistry,
} from 'agent-adapter';
import { InterceptingStore } from 'agent-adapter/testing';
import { KeyRing } from 'agent-adapter/exec/durable/key-ring';
import { KEY, runnerOn } from '../utils/specs';
import { readDecisions } from 'agent-adapter/flow/runner/decisions';
import { runCli } from 'agent-adapter/cli/program';
import { markRestored } from 'agent-adapter/cli/restore';

interface Order {
  order: string;
  held?: string;
  receipt?: string;
  mailed?: string;
}

function shop(ledger: string[]) {
  const tool = (name: string) => (a: { order: string }) => {
    ledger.push(name);
    return `${name}:${a.order}`;
  };
  const registry = new ToolRegistry()
    .register('hold_seats', tool('hold_seats'), { idempotent: true })
    .register('charge_card', tool('charge_card'))
    .register('send_mail', tool('send_mail'));
  const flow = new Flow<Order>('shop')
    .node('hold', async (s, ctx) => ({
      held: await ctx.call<string>('hold_seats', { order: s.order }),
    }))
    .node('pay', async (s, ctx) => ({
      receipt: await ctx.call<string>('charge_card', { order: s.order }),
    }))
    .node('mail', async (s, ctx) => ({
      mailed: await ctx.call<string>('send_mail', { order: s.order }),
    }))
    .edge('hold', 'pay')
    .edge('pay', 'mail')
    .end('mail');
  return { registry, flow };
}

const count = (ledger: string[], tool: string) =>
  ledger.filter((t) => t === tool).length;

describe('restoring the store from a backup', () => {
  let dir: string;
  beforeEach(() => (dir = mkdtempSync(join(tmpdir(), 'aa-restore-'))));
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  /**
   * Runs order-1 to the end on runs.db, with a consistent snapshot (VACUUM INTO) taken right after
   * the checkpoint that closed the `hold` superstep; returns the snapshot's path.
   */
  async function finishWithSnapshot(ledger: string[]): Promise<string> {
    const path = join(dir, 'runs.db');
    const snapshot = join(dir, 'snapshot.db');
    const inner = new SQLiteCheckpointStore(path);
    const store = new InterceptingStore(inner, {
      after: (w) => {
        if (w.kind === 'save' && w.checkpoint.step === 1) {
          const db = new Database(path);
          db.prepare(`VACUUM INTO ?`).run(snapshot);
          db.close();
        }
      },
    });
    const { registry, flow } = shop(ledger);
    const w1 = runnerOn(store, registry, { workerId: 'w1' });
    expect(
      (await w1.run(flow, { order: 'o-1' }, { runId: 'o-1' })).status,
    ).toBe('done');
    w1.close();
    await inner.close();
    return snapshot;
  }

  /** Puts `snapshot` back as a store file of its own, and opens it. */
  function restored(snapshot: string, name: string): SQLiteCheckpointStore {
    const path = join(dir, name);
    copyFileSync(snapshot, path);
    return new SQLiteCheckpointStore(path);
  }

  it('without `runs restored`, recovery runs the charge again (the hazard this guards against)', async () => {
    const ledger: string[] = [];
    const snapshot = await finishWithSnapshot(ledger);
    const store = restored(snapshot, 'plain.db');
    const { registry, flow } = shop(ledger);
    const w2 = runnerOn(store, registry, { workerId: 'w2' });
    expect((await w2.recover(flow, 'o-1')).status).toBe('done');
    expect(count(ledger, 'charge_card')).toBe(2); // charged twice: nothing could tell
    w2.close();
    await store.close();
  });

  it('with `runs restored`: each call not done in the restored rows waits for a decision; "it ran" ends with one charge and one mail', async () => {
    const ledger: string[] = [];
    const snapshot = await finishWithSnapshot(ledger);
    const path = join(dir, 'restored.db');
    copyFileSync(snapshot, path);
    // The one command, as an operator runs it.
    let out = '';
    const code = await runCli(
      [
        '--store',
        `sqlite:${path}`,
        'runs',
        'restored',
        '--by',
        'ann',
        '--reason',
        'disk lost',
      ],
      {
        stdout: (t) => (out += t),
        stderr: (t) => (out += t),
        env: { CHECKPOINT_KEY: KEY },
      },
    );
    expect([code, out]).toEqual([
      0,
      expect.stringMatching(/Marked 1 unfinished run\(s\) restored/),
    ]);

    const store = new SQLiteCheckpointStore(path);
    const { registry, flow } = shop(ledger);
    const w2 = runnerOn(store, registry, { workerId: 'w2' });
    const first = await w2.recover(flow, 'o-1').catch((e: unknown) => e);
    expect(first).toBeInstanceOf(RecoveryNeedsDecision);
    expect((first as RecoveryNeedsDecision).calls).toEqual([
      ['charge_card', expect.stringMatching(/restored from a backup/)],
    ]);
    expect(count(ledger, 'charge_card')).toBe(1);
    // get() names it too, with its arguments.
    const stuck = await w2.get(flow, 'o-1');
    expect(stuck.needsDecision?.calls.map((c) => [c.callId, c.args])).toEqual([
      ['pay#0', { order: 'o-1' }],
    ]);

    // The operator finds the charge at the provider: it ran. The mail is next, and waits too.
    const second = await w2
      .resolve(flow, 'o-1', {
        calls: [{ call: 'pay#0', ran: true, result: 'charge_card:o-1' }],
        by: 'ann',
      })
      .catch((e: unknown) => e);
    expect(second).toBeInstanceOf(RecoveryNeedsDecision);
    expect(
      (second as RecoveryNeedsDecision).calls.map(([tool]) => tool),
    ).toEqual(['send_mail']);
    const result = await w2.resolve(flow, 'o-1', {
      calls: [{ call: 'mail#0', ran: true, result: 'send_mail:o-1' }],
      by: 'ann',
    });
    expect(result.status).toBe('done');
    expect(result.state).toMatchObject({
      receipt: 'charge_card:o-1',
      mailed: 'send_mail:o-1',
    });
    expect(count(ledger, 'charge_card')).toBe(1);
    expect(count(ledger, 'send_mail')).toBe(1);
    expect(count(ledger, 'hold_seats')).toBe(1); // replayed from the restored rows
    const decisions = await readDecisions(store, KeyRing.from(KEY), 'o-1');
    expect(decisions.map((d) => [d.kind, d.by])).toEqual([
      ['restore', 'ann'],
      ['resolve', 'ann'],
      ['resolve', 'ann'],
    ]);
    w2.close();
    await store.close();
  });

  it('after a Redis failover the store reports: --failover holds each call back; --failover --planned (a coordinated failover loses nothing) lets the run go on', async () => {
    // The store as a coordinated failover left it: the worker had held the seats, nothing more.
    const snapshot = await finishWithSnapshot([]);
    const failover = { lostHistory: 'a'.repeat(40), history: 'b'.repeat(40) };
    for (const planned of [false, true]) {
      const store = restored(snapshot, `failover-${String(planned)}.db`);
      // What RedisCheckpointStore reports of a run a replaced master wrote last (the real
      // failover: test/stores/redis-failover.e2e-spec.ts); this store is SQLite.
      store.failover = (runId) =>
        Promise.resolve(runId === 'o-1' ? failover : undefined);
      const done = await markRestored(store, KeyRing.from(KEY), {
        failover: true,
        planned,
        by: 'ann',
      });
      expect(done).toEqual({ marked: ['o-1'], skipped: [] });
      const ledger: string[] = [];
      const { registry, flow } = shop(ledger);
      const w2 = runnerOn(store, registry, { workerId: 'w2' });
      if (planned) {
        expect((await w2.recover(flow, 'o-1')).status).toBe('done');
        expect(ledger).toEqual(['charge_card', 'send_mail']);
      } else {
        await expect(w2.recover(flow, 'o-1')).rejects.toThrow(
          RecoveryNeedsDecision,
        );
        expect(ledger).toEqual([]);
      }
      const [mark] = await readDecisions(store, KeyRing.from(KEY), 'o-1');
      expect(mark).toMatchObject({ kind: 'restore', by: 'ann' });
      w2.close();
      await store.close();
    }
    // --planned alone is a usage error, and nothing is opened or written.
    let out = '';
    const code = await runCli(
      [
        '--store',
        `sqlite:${join(dir, 'none.db')}`,
        'runs',
        'restored',
        '--planned',
      ],
      {
        stdout: (t) => (out += t),
        stderr: (t) => (out += t),
        env: { CHECKPOINT_KEY: KEY },
      },
    );
    expect([code, out]).toEqual([
      2,
      expect.stringMatching(/--planned is for a failover/),
    ]);
  });

  it('"it did not run" runs the call once; an idempotent call runs without asking', async () => {
    const ledger: string[] = [];
    const snapshot = await finishWithSnapshot(ledger);
    const store = restored(snapshot, 'not-run.db');
    const { markRestored } = await import('agent-adapter/cli/restore');
    expect((await markRestored(store, KeyRing.from(KEY))).marked).toEqual([
      'o-1',
    ]);
    const { registry, flow } = shop(ledger);
    const w2 = runnerOn(store, registry, { workerId: 'w2' });
    await expect(w2.recover(flow, 'o-1')).rejects.toBeInstanceOf(
      RecoveryNeedsDecision,
    );
    await expect(
      w2.resolve(flow, 'o-1', { calls: [{ call: 'pay#0', ran: false }] }),
    ).rejects.toBeInstanceOf(RecoveryNeedsDecision); // ran the charge, then the mail waits
    expect(count(ledger, 'charge_card')).toBe(2); // the operator said it had not run
    const done = await w2.recover(flow, 'o-1', { rerunInDoubt: true });
    expect(done.status).toBe('done');
    expect(count(ledger, 'send_mail')).toBe(2);
    w2.close();
    await store.close();
  });
});

describe('runs list with the key', () => {
  it('checks each head it lists: an edited status column is listed CORRUPT, not as the status it claims', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'aa-list-'));
    try {
      const path = join(dir, 'runs.db');
      const store = new SQLiteCheckpointStore(path);
      const ledger: string[] = [];
      const { registry, flow } = shop(ledger);
      const w = runnerOn(store, registry);
      await w.run(flow, { order: 'a' }, { runId: 'a' });
      await w.run(flow, { order: 'b' }, { runId: 'b' });
      w.close();
      await store.close();
      const db = new Database(path);
      db.prepare(
        `UPDATE "aa_runs" SET status = 'failed' WHERE run_id = 'b'`,
      ).run();
      db.close();
      const list = async (env: Record<string, string>) => {
        let out = '';
        const code = await runCli(
          ['--store', `sqlite:${path}`, 'runs', 'list', '--json'],
          {
            stdout: (t) => (out += t),
            stderr: (t) => (out += t),
            env,
          },
        );
        return {
          code,
          runs: (
            JSON.parse(out) as {
              runs: Array<{ runId: string; status: string; corrupt?: string }>;
            }
          ).runs,
        };
      };
      const checked = await list({ CHECKPOINT_KEY: KEY });
      expect(checked.code).toBe(0);
      expect(
        checked.runs.map((r) => [r.runId, r.status, r.corrupt !== undefined]),
      ).toEqual([
        ['b', 'failed', true],
        ['a', 'done', false],
      ]);
      // Without the key the columns are listed as stored (unverified), as docs/cli.md says.
      const unchecked = await list({});
      expect(unchecked.runs.map((r) => r.corrupt)).toEqual([
        undefined,
        undefined,
      ]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
