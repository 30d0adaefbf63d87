/**
 * Transient store faults, real ones (issue 16 item 6): a Postgres backend terminated with
 * `pg_terminate_backend` while the write carrying a finished call's `done` record waits, a reply
 * lost after the server committed (a TCP proxy resets the connection once the answer comes), a
 * SQLite file locked by another process past the busy timeout, a Redis connection killed with
 * CLIENT KILL. The writer reads the head back and writes again (confirmed-write.ts): the run
 * finishes, the tool ran once, nothing becomes a decision, `runs verify` finds nothing. A lock held
 * past the retry budget stops the run with CheckpointStoreUnavailable and releases it. On Redis,
 * ioredis itself sends again a command lost with its connection (the scripts know their own write
 * token); with that off, only `commandTimeout` ends the command and the writer reads back.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawn } from 'node:child_process';
import Redis from 'ioredis';
import { DataSource } from 'typeorm';
import {
  CheckpointStoreUnavailable,
  Flow,
  KeyRing,
  RedisCheckpointStore,
  SQLCheckpointStore,
  ToolRegistry,
  type CheckpointStore,
  type RunResult,
} from 'agent-adapter';
import { InterceptingStore, type StoreWrite } from 'agent-adapter/testing';
import { verifyRun } from 'agent-adapter/cli/verify';
import { KEY, runnerOn } from '../utils/specs';
import { ChildHarness } from '../utils/child-process';
import { CutProxy } from '../utils/cut-proxy';
import { dropPrefix } from '../utils/redis-keys';
import {
  DATABASE_URL,
  REDIS_URL,
  describeWithService,
  suiteId,
} from '../utils/services';

const ring = KeyRing.from(KEY);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Note {
  paid?: string;
  sent?: string;
}

/**
 * pay (charge, not idempotent) then send (`second`, idempotent or not), one superstep each;
 * `during` runs inside the second tool after its side effect, right before it returns.
 */
function orders(during: () => Promise<void>, secondIdempotent = false) {
  const ran: string[] = [];
  let fault: (() => Promise<void>) | undefined = during;
  const registry = new ToolRegistry()
    .register('charge', () => {
      ran.push('charge');
      return 'charged';
    })
    .register(
      'mail',
      async () => {
        ran.push('mail');
        const once = fault;
        fault = undefined;
        await once?.();
        return 'mailed';
      },
      { idempotent: secondIdempotent },
    );
  const flow = new Flow<Note>('store-faults')
    .node('pay', async (_s, ctx) => ({
      paid: await ctx.call<string>('charge'),
    }))
    .node('send', async (_s, ctx) => ({ sent: await ctx.call<string>('mail') }))
    .edge('pay', 'send')
    .end('send');
  return { ran, registry, flow };
}

/** Whether a write carries the `done` record of the mail call (superstep 1). */
const carriesMailDone = (w: StoreWrite) =>
  w.records.some((r) => r.superstep === 1 && /"phase":"done"/.test(r.sealed));

/** A part of the write's sealed bytes that no escaping changes (a signature), for the proxy. */
function markerOf(w: StoreWrite): string {
  const parts = w.records[w.records.length - 1]!.sealed.split('.').slice(0, 3);
  return parts.reduce((a, b) => (b.length > a.length ? b : a));
}

/** Counts the attempts at mail's done write and runs `before` on the first. */
function watching(
  inner: CheckpointStore,
  before?: (w: StoreWrite) => void,
): { store: CheckpointStore; attempts: () => number } {
  let attempts = 0;
  const store = new InterceptingStore(inner, {
    before: (w) => {
      if (!carriesMailDone(w)) return;
      if (++attempts === 1) before?.(w);
    },
  });
  return { store, attempts: () => attempts };
}

async function expectFinishedCleanly(
  store: CheckpointStore,
  runId: string,
  result: RunResult<Note>,
  ran: string[],
): Promise<void> {
  expect(result.error).toBeUndefined();
  expect(result).toMatchObject({
    status: 'done',
    state: { paid: 'charged', sent: 'mailed' },
  });
  expect(ran).toEqual(['charge', 'mail']);
  const head = await store.head(runId);
  expect(head?.status).toBe('done');
  // Every record was written once: 2 calls x (started, done).
  expect(head?.calls).toBe(4);
  expect((await verifyRun(store, ring, runId))?.problems).toEqual([]);
}

describeWithService('postgres', 'store faults: Postgres', () => {
  const admin = new DataSource({ type: 'postgres', url: DATABASE_URL });
  const sources: DataSource[] = [];
  const schemas: string[] = [];
  let proxy: (CutProxy & { port: number }) | undefined;

  beforeAll(() => admin.initialize());
  afterAll(async () => {
    for (const ds of sources) if (ds.isInitialized) await ds.destroy();
    for (const s of schemas)
      await admin.query(`DROP SCHEMA IF EXISTS "${s}" CASCADE`);
    await admin.destroy();
    await proxy?.close();
  });

  async function storeOn(through?: { port: number }) {
    const app = suiteId('aa_sfault');
    const url = new URL(DATABASE_URL);
    const ds = new DataSource({
      type: 'postgres',
      host: url.hostname,
      port: through?.port ?? Number(url.port || 5432),
      username: decodeURIComponent(url.username),
      password: decodeURIComponent(url.password),
      database: url.pathname.slice(1),
      applicationName: app,
      poolSize: 4,
    });
    await ds.initialize();
    sources.push(ds);
    schemas.push(app);
    return { app, store: new SQLCheckpointStore(ds, { schema: app }) };
  }

  it("pg_terminate_backend while mail's done record waits to be written: retried, done, mail ran once, verify clean", async () => {
    const { app, store: sql } = await storeOn();
    const runId = 'pg-terminated';
    // An admin transaction locks the run's head row while mail runs, so the done write blocks
    // inside Postgres; its backend is then terminated mid-statement.
    const locker = admin.createQueryRunner();
    let killed = 0;
    let killer: Promise<void> = Promise.resolve();
    const { ran, registry, flow } = orders(async () => {
      await locker.connect();
      await locker.startTransaction();
      await locker.query(
        `SELECT 1 FROM "${app}"."aa_runs" WHERE run_id = $1 FOR UPDATE`,
        [runId],
      );
      killer = (async () => {
        for (let i = 0; i < 250 && !killed; i++) {
          const rows: Array<{ killed: boolean }> = await admin.query(
            `SELECT pg_terminate_backend(pid) AS killed FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'`,
            [app],
          );
          killed += rows.filter((r) => r.killed).length;
          await sleep(20);
        }
        await locker.rollbackTransaction();
        await locker.release();
      })();
    });
    const { store, attempts } = watching(sql);
    const runner = runnerOn(store, registry);
    const result = await runner.run(flow, {}, { runId });
    runner.close();
    await killer;
    expect(killed).toBe(1);
    expect(attempts()).toBeGreaterThanOrEqual(2); // the terminated write, then the one that landed
    await expectFinishedCleanly(sql, runId, result, ran);
  });

  it("mail's done write commits and its reply is lost (connection reset after the server answered): read back as ours, not written again, done", async () => {
    const url = new URL(DATABASE_URL);
    proxy = await CutProxy.start({
      host: url.hostname,
      port: Number(url.port || 5432),
    });
    const { store: sql } = await storeOn(proxy);
    const runId = 'pg-reply-lost';
    const { ran, registry, flow } = orders(() => Promise.resolve());
    const cut = proxy;
    const { store, attempts } = watching(sql, (w) => cut.arm(markerOf(w)));
    const runner = runnerOn(store, registry);
    const result = await runner.run(flow, {}, { runId });
    runner.close();
    expect(cut.cuts).toBe(1);
    // The head read back carried this write's seal: it was not sent again.
    expect(attempts()).toBe(1);
    await expectFinishedCleanly(sql, runId, result, ran);
  });
});

describe('store faults: SQLite locked by another process', () => {
  const dir = mkdtempSync(join(tmpdir(), 'aa-sqlite-faults-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  /** Another process takes the write lock on `file` (BEGIN IMMEDIATE) and holds it `ms`. */
  async function lockFor(file: string, ms: number): Promise<ChildHarness> {
    const script = `
      const db = require('better-sqlite3')(${JSON.stringify(file)});
      db.exec('BEGIN IMMEDIATE');
      console.log('LOCKED');
      setTimeout(() => { db.exec('COMMIT'); db.close(); console.log('RELEASED'); }, ${ms});`;
    const child = new ChildHarness(
      spawn(process.execPath, ['-e', script], { cwd: process.cwd() }),
      { name: 'sqlite locker' },
    );
    await child.waitForLine(/^LOCKED$/, 10_000);
    return child;
  }

  function sqliteStore(name: string) {
    const file = join(dir, `${name}.db`);
    return {
      file,
      store: new SQLCheckpointStore({
        type: 'better-sqlite3',
        database: file,
        enableWAL: true,
        timeout: 200, // a short busy timeout: the lock outlasts it
      }),
    };
  }

  it('a lock held ~1 s past the 200 ms busy timeout: SQLITE_BUSY, retried, done, mail ran once', async () => {
    const { file, store: sql } = sqliteStore('short');
    let locker: ChildHarness | undefined;
    const { ran, registry, flow } = orders(async () => {
      locker = await lockFor(file, 1000);
    });
    const { store, attempts } = watching(sql);
    const runner = runnerOn(store, registry);
    const result = await runner.run(flow, {}, { runId: 'sqlite-busy' });
    runner.close();
    await locker!.exit();
    expect(attempts()).toBeGreaterThanOrEqual(2);
    await expectFinishedCleanly(sql, 'sqlite-busy', result, ran);
    await sql.close();
  });

  it('a lock held past the retry budget: CheckpointStoreUnavailable (not SqliteError), the lease released, another worker takes the run at once and finishes it', async () => {
    const { file, store: sql } = sqliteStore('long');
    let locker: ChildHarness | undefined;
    // mail is idempotent here: its done record is lost to the outage, so recovery reruns it.
    const { ran, registry, flow } = orders(async () => {
      locker = await lockFor(file, 6500); // the writer gives up after about 4.6 s
    }, true);
    const w1 = runnerOn(sql, registry, { workerId: 'w1', leaseMs: 60_000 });
    const error = await w1.run(flow, {}, { runId: 'sqlite-outage' }).then(
      () => undefined,
      (e: unknown) => e,
    );
    w1.close();
    expect(error).toBeInstanceOf(CheckpointStoreUnavailable);
    expect((error as Error).message).toMatch(/stayed unavailable/);
    // The store's own transient error, the driver's SQLITE_BUSY under it.
    const cause = (error as Error).cause as CheckpointStoreUnavailable;
    expect(cause).toBeInstanceOf(CheckpointStoreUnavailable);
    expect((cause.cause as { code?: string }).code).toMatch(/^SQLITE_BUSY/);
    await locker!.exit();
    const head = await sql.head('sqlite-outage');
    expect(head).toMatchObject({ status: 'running', owner: 'w1' });
    expect(head!.leaseExpiresAt).toBeLessThanOrEqual(Date.now());

    const w2 = runnerOn(sql, registry, { workerId: 'w2', leaseMs: 60_000 });
    const outcomes = await w2.recoverAll(flow);
    w2.close();
    const outcome = outcomes.get('sqlite-outage');
    expect(outcome).not.toBeInstanceOf(Error);
    expect(outcome).toMatchObject({
      status: 'done',
      state: { paid: 'charged', sent: 'mailed' },
    });
    // charge replayed from its done record; mail (idempotent, in doubt) ran again.
    expect(ran).toEqual(['charge', 'mail', 'mail']);
    expect((await verifyRun(sql, ring, 'sqlite-outage'))?.problems).toEqual([]);
    await sql.close();
  }, 20_000);
});

describeWithService('redis', 'store faults: Redis', () => {
  const admin = new Redis(REDIS_URL);
  const clients: Redis[] = [];
  /** The tests' key prefixes: their keys are deleted after the suite. */
  const prefixes: string[] = [];
  let proxy: (CutProxy & { port: number }) | undefined;
  afterAll(async () => {
    for (const c of clients) c.disconnect();
    for (const prefix of prefixes) await dropPrefix(admin, prefix);
    admin.disconnect();
    await proxy?.close();
  });

  it("the store's connection killed (CLIENT KILL ID) right before mail returns: ioredis reconnects, done, mail ran once", async () => {
    const name = suiteId('aa_sfault');
    prefixes.push(name);
    const client = new Redis(REDIS_URL, { connectionName: name });
    clients.push(client);
    const redis = new RedisCheckpointStore(() => client, { prefix: name });
    let killed = 0;
    const { ran, registry, flow } = orders(async () => {
      const list = String(await admin.call('CLIENT', 'LIST'));
      for (const line of list.split('\n')) {
        if (!line.includes(` name=${name} `)) continue;
        const id = /\bid=(\d+)/.exec(line)![1]!;
        killed += Number(await admin.call('CLIENT', 'KILL', 'ID', id));
      }
    });
    const runner = runnerOn(redis, registry);
    const result = await runner.run(flow, {}, { runId: 'redis-killed' });
    runner.close();
    expect(killed).toBe(1);
    // ioredis reconnects and sends the queued write: the writer may never see a failure.
    await expectFinishedCleanly(redis, 'redis-killed', result, ran);
  });

  it.each([
    [true, 'ioredis resends the script, which knows its own write token'],
    // ioredis drops (never settles) a lost command when resending is off: `commandTimeout` ends it.
    [
      false,
      'the command times out, the writer reads the head back and finds its seal',
    ],
  ])(
    "mail's done write runs and its reply is lost (connection reset after Redis answered), autoResendUnfulfilledCommands %s: %s; done, mail ran once, not written twice",
    async (autoResend) => {
      const url = new URL(REDIS_URL);
      proxy ??= await CutProxy.start({
        host: url.hostname,
        port: Number(url.port || 6379),
      });
      const prefix = suiteId('aa_sfault');
      prefixes.push(prefix);
      const client = new Redis({
        host: '127.0.0.1',
        port: proxy.port,
        autoResendUnfulfilledCommands: autoResend,
        ...(!autoResend && { commandTimeout: 500 }),
      });
      clients.push(client);
      const redis = new RedisCheckpointStore(() => client, { prefix });
      const cut = proxy;
      const before = cut.cuts;
      const { store, attempts } = watching(redis, (w) => cut.arm(markerOf(w)));
      const { ran, registry, flow } = orders(() => Promise.resolve());
      const runner = runnerOn(store, registry);
      const runId = `redis-reply-lost-${autoResend}`;
      const result = await runner.run(flow, {}, { runId });
      runner.close();
      expect(cut.cuts - before).toBe(1);
      expect(attempts()).toBe(1); // never sent twice by the writer
      await expectFinishedCleanly(redis, runId, result, ran);
    },
  );
});
