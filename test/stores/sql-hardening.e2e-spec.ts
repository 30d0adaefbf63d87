/**
 * The SQL store under interleavings a review found unsafe: an application transaction on a shared
 * SQLite connection, delete() racing a save, failed starts, boot-time DDL behind writes, leases.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  CheckpointConflict,
  CheckpointStoreCorrupt,
  CheckpointStoreUnavailable,
  SQLCheckpointStore,
  type CheckpointRecord,
} from 'agent-adapter';
import { DataSource } from 'typeorm';
import { DATABASE_URL, describeWithService, suiteId } from '../utils/services';

const cp = (
  runId: string,
  step: number,
  segment = 1,
  status: CheckpointRecord['status'] = 'running',
): CheckpointRecord => ({
  runId,
  step,
  flow: 'f',
  status,
  segment,
  sealed: `s${step}`,
});
const call = (
  runId: string,
  segment: number,
  superstep: number,
  seq: number,
) => ({
  runId,
  segment,
  superstep,
  seq,
  sealed: `c${segment}/${superstep}/${seq}`,
});
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * A head that counts records but whose last key was zeroed below the store (as Redis refuses a
 * missing `lastCall`): every append refused as CheckpointStoreCorrupt, nothing written.
 */
async function zeroedLastKeyRefused(
  store: SQLCheckpointStore,
  zero: (runId: string) => Promise<unknown>,
): Promise<void> {
  const runId = 'zeroed';
  await store.save(cp(runId, 0), { calls: [call(runId, 1, 0, 1)] });
  expect((await store.head(runId))?.lastCall).toEqual({
    segment: 1,
    superstep: 0,
    seq: 1,
  });
  await zero(runId);
  expect((await store.head(runId))?.lastCall).toBeUndefined();
  for (const write of [
    () => store.recordCall(runId, 1, [call(runId, 1, 0, 2)]),
    () => store.save(cp(runId, 1), { calls: [call(runId, 1, 0, 2)] }),
  ]) {
    const err = await write().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CheckpointStoreCorrupt);
    expect((err as Error).message).toMatch(
      /last call key .*it is missing \(zeros\), and the run has call records/,
    );
  }
  expect((await store.head(runId))?.step).toBe(0);
  expect((await store.history(runId)).calls.map((c) => c.seq)).toEqual([1]);
}

describe('SQL store hardening: SQLite', () => {
  const dir = mkdtempSync(join(tmpdir(), 'aa-review-'));
  const ds = new DataSource({
    type: 'better-sqlite3',
    database: join(dir, 'app.db'),
    enableWAL: true,
  });
  beforeAll(async () => {
    await ds.initialize();
  });
  afterAll(async () => {
    await ds.destroy();
    rmSync(dir, { recursive: true, force: true });
  });

  it('tables of the same name that agent-adapter did not make are refused', async () => {
    await ds.query(
      'CREATE TABLE "other_runs" (id INTEGER PRIMARY KEY, mine TEXT)',
    );
    const store = new SQLCheckpointStore(ds, { tablePrefix: 'other_' });
    await expect(store.head('r')).rejects.toThrow(/not made by agent-adapter/);
    const tables = await ds.query<Array<{ name: string }>>(
      "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'other_%'",
    );
    expect(tables.map((t) => t.name)).toEqual(['other_runs']);
  });

  it('a head whose last call key was zeroed while it counts records refuses every append as CheckpointStoreCorrupt', async () => {
    const store = new SQLCheckpointStore(ds, { tablePrefix: 'zk_' });
    await zeroedLastKeyRefused(store, (runId) =>
      ds.query(
        'UPDATE "zk_runs" SET last_segment = 0, last_superstep = 0, last_seq = 0 WHERE run_id = ?',
        [runId],
      ),
    );
  });

  it('a write while the application has a transaction open on the shared connection is refused, not rolled back later', async () => {
    // better-sqlite3 has ONE connection: inside the app's transaction the store's write would be
    // a savepoint that the app's rollback erases after the store reported success.
    const store = new SQLCheckpointStore(ds, { tablePrefix: 'tx_' });
    await store.save(cp('r', 0));
    const qr = ds.createQueryRunner();
    await qr.startTransaction();
    await qr.query('SELECT 1');
    await expect(
      store.recordCall('r', 1, [call('r', 1, 0, 1)]),
    ).rejects.toBeInstanceOf(CheckpointStoreUnavailable);
    await qr.rollbackTransaction();
    await qr.release();
    expect((await store.head('r'))?.calls).toBe(0);
    // Outside the app's transaction the write goes through and stays.
    await store.recordCall('r', 1, [call('r', 1, 0, 1)]);
    expect(await store.calls('r', 0)).toHaveLength(1);
  });
});

describeWithService('postgres', 'SQL store hardening: Postgres', () => {
  const ds = new DataSource({
    type: 'postgres',
    url: DATABASE_URL,
    poolSize: 6,
  });
  const schemas: string[] = [];
  const fresh = () => {
    const schema = suiteId('aa_rev');
    schemas.push(schema);
    return { store: new SQLCheckpointStore(ds, { schema }), schema };
  };
  beforeAll(async () => {
    await ds.initialize();
  });
  afterAll(async () => {
    for (const s of schemas)
      await ds.query(`DROP SCHEMA IF EXISTS "${s}" CASCADE`);
    await ds.destroy();
  });

  it('delete() is atomic: a save racing it leaves no orphan rows, and the id can be reused', async () => {
    const { store, schema } = fresh();
    await store.save(cp('x', 0, 5));
    await store.recordCall('x', 5, [call('x', 5, 0, 1)]);
    // Another session touches the run's step-0 checkpoint row (any row lock will do; here it only
    // makes the interleaving deterministic): delete() gets past its first statement and waits.
    const qr = ds.createQueryRunner();
    await qr.connect();
    await qr.startTransaction();
    await qr.query(
      `SELECT 1 FROM "${schema}"."aa_checkpoints" WHERE run_id = 'x' FOR UPDATE`,
    );
    const deleting = store.delete('x');
    await sleep(300);
    // The live worker finishes its superstep meanwhile: delete holds the head, so the save waits
    // and then finds no run.
    const saving = store
      .save(cp('x', 1, 5), { calls: [call('x', 5, 0, 2)] })
      .then(
        () => 'saved',
        (e: Error) => e,
      );
    await sleep(200);
    await qr.commitTransaction();
    await qr.release();
    expect(await deleting).toBe(true);
    expect(await saving).toBeInstanceOf(CheckpointConflict);

    const left = await store.history('x');
    // Orphans: checkpoint step 1 and a call record survive without a head.
    expect({ head: await store.head('x'), left }).toEqual({
      head: undefined,
      left: { checkpoints: [], calls: [] },
    });
  });

  it('a new run under a deleted run id is not bricked by orphans of the old one', async () => {
    const { store, schema } = fresh();
    await store.save(cp('y', 0, 5));
    const qr = ds.createQueryRunner();
    await qr.connect();
    await qr.startTransaction();
    await qr.query(
      `SELECT 1 FROM "${schema}"."aa_checkpoints" WHERE run_id = 'y' FOR UPDATE`,
    );
    const deleting = store.delete('y');
    await sleep(300);
    const saving = store.save(cp('y', 1, 5)).catch((e: Error) => e);
    await sleep(200);
    await qr.commitTransaction();
    await qr.release();
    await deleting;
    expect(await saving).toBeInstanceOf(CheckpointConflict);
    // The id is started again (new incarnation): step 0 is accepted...
    await store.save(cp('y', 0, 900));
    // ...latest() already returns the old incarnation's step 1 (recover: step mismatch forever),
    expect((await store.latest('y'))?.step).toBe(0);
    // ...and the new run's first superstep checkpoint hits the orphan's primary key.
    await expect(store.save(cp('y', 1, 900))).resolves.toBeUndefined();
  });

  it('a store that fails its version check does not leak a connection pool per attempt', async () => {
    const schema = suiteId('aa_rev');
    schemas.push(schema);
    await ds.query(`CREATE SCHEMA "${schema}"`);
    await ds.query(
      `CREATE TABLE "${schema}"."aa_meta" (key VARCHAR(64) PRIMARY KEY, value TEXT NOT NULL)`,
    );
    await ds.query(
      `INSERT INTO "${schema}"."aa_meta" (key, value) VALUES ('schema_version', '99')`,
    );
    const app = `aa_leak_${schema.slice(-8)}`;
    const store = new SQLCheckpointStore(
      { type: 'postgres', url: DATABASE_URL, applicationName: app },
      { schema },
    );
    for (let i = 0; i < 4; i++)
      await expect(store.head('r')).rejects.toThrow(/schema version 99/);
    await store.close();
    await sleep(200);
    const [row] = await ds.query<Array<{ n: number }>>(
      `SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1`,
      [app],
    );
    expect(row?.n).toBe(0);
  });

  it('tables of schema version 1 (unsealed heads) are refused by name, nothing changed', async () => {
    const schema = suiteId('aa_v1');
    schemas.push(schema);
    await ds.query(`CREATE SCHEMA "${schema}"`);
    await ds.query(
      `CREATE TABLE "${schema}"."aa_meta" (key VARCHAR(64) PRIMARY KEY, value TEXT NOT NULL)`,
    );
    await ds.query(
      `INSERT INTO "${schema}"."aa_meta" (key, value) VALUES ('schema_version', '1')`,
    );
    const store = new SQLCheckpointStore(
      { type: 'postgres', url: DATABASE_URL },
      { schema },
    );
    await expect(store.head('r')).rejects.toThrow(
      /schema version 1 \(run heads without a seal\), a development format this version no longer reads/,
    );
    await store.close();
    const rows = await ds.query<Array<{ value: string }>>(
      `SELECT value FROM "${schema}"."aa_meta" WHERE key = 'schema_version'`,
    );
    expect(rows.map((r) => r.value)).toEqual(['1']);
  });

  it('opening a store does not wait behind (and then block) writes in flight', async () => {
    const { store, schema } = fresh();
    await store.save(cp('w', 0));
    // A write transaction in progress on the runs table (any app session, or a slow statement).
    const qr = ds.createQueryRunner();
    await qr.connect();
    await qr.startTransaction();
    await qr.query(
      `UPDATE "${schema}"."aa_runs" SET updated_at = updated_at WHERE run_id = 'w'`,
    );
    // A new worker boots: with its tables in place it runs no DDL (CREATE INDEX IF NOT EXISTS would
    // take a SHARE lock on the runs table and queue behind the write, and every later write behind it).
    const booting = new SQLCheckpointStore(ds, { schema });
    const opened = booting.head('w').then(() => 'opened');
    const result = await Promise.race([
      opened,
      sleep(1500).then(() => 'blocked'),
    ]);
    await qr.rollbackTransaction();
    await qr.release();
    await opened;
    expect(result).toBe('opened');
  });

  it('a fractional lease expiry (leaseMs: 1500.5) does not break every save', async () => {
    const { store } = fresh();
    await expect(
      store.save(cp('l', 0), {
        owner: 'w',
        leaseExpiresAt: Date.now() + 1500.5,
      }),
    ).resolves.toBeUndefined();
  });

  it('tables of the same name that agent-adapter did not make are refused, and left as they were', async () => {
    const schema = suiteId('aa_rev');
    schemas.push(schema);
    await ds.query(`CREATE SCHEMA "${schema}"`);
    await ds.query(
      `CREATE TABLE "${schema}"."aa_runs" (id INT PRIMARY KEY, mine TEXT)`,
    );
    const store = new SQLCheckpointStore(ds, { schema });
    await expect(store.head('r')).rejects.toThrow(/not made by agent-adapter/);
    const [row] = await ds.query<Array<{ n: number }>>(
      `SELECT count(*)::int AS n FROM information_schema.tables WHERE table_schema = $1`,
      [schema],
    );
    expect(row?.n).toBe(1);
  });

  it('workers starting at once on an empty schema all get working tables', async () => {
    const schema = suiteId('aa_rev');
    schemas.push(schema);
    const stores = Array.from(
      { length: 6 },
      () => new SQLCheckpointStore(ds, { schema }),
    );
    await Promise.all(stores.map((st, i) => st.save(cp(`w${i}`, 0))));
    expect((await stores[0]!.list()).runs).toHaveLength(6);
  });

  it('a head whose last call key was zeroed while it counts records refuses every append as CheckpointStoreCorrupt', async () => {
    const { store, schema } = fresh();
    await zeroedLastKeyRefused(store, (runId) =>
      ds.query(
        `UPDATE "${schema}"."aa_runs" SET last_segment = 0, last_superstep = 0, last_seq = 0 WHERE run_id = $1`,
        [runId],
      ),
    );
  });

  it('a duplicate key on the checkpoints table is a CheckpointConflict', async () => {
    const { store, schema } = fresh();
    await store.save(cp('d', 0, 3));
    await ds.query(
      `INSERT INTO "${schema}"."aa_checkpoints" (run_id, step, flow, status, segment, sealed) VALUES ('d', 1, 'f', 'running', 3, 'orphan')`,
    );
    await expect(store.save(cp('d', 1, 3))).rejects.toBeInstanceOf(
      CheckpointConflict,
    );
  });
});
