import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  SQLCheckpointStore,
  SQLiteCheckpointStore,
  type CheckpointStore,
} from 'agent-adapter';
import { DataSource } from 'typeorm';
import { describeCheckpointStoreConformance } from 'agent-adapter/testing';
import { tamperFuzz } from '../../tools/tamper/tamper-fuzz';
import { sqlRaw } from './sql.fixtures';

describe('SQLCheckpointStore on SQLite', () => {
  const dir = mkdtempSync(join(tmpdir(), 'aa-sqlite-'));
  // One file for the suite; every store gets its own table prefix (a tenant).
  const ds = new DataSource({
    type: 'better-sqlite3',
    database: join(dir, 'shared.db'),
    enableWAL: true,
  });
  const prefixOf = new Map<CheckpointStore, string>();
  let n = 0;

  beforeAll(async () => {
    await ds.initialize();
  });
  afterAll(async () => {
    await ds.destroy();
    rmSync(dir, { recursive: true, force: true });
  });

  const fixture = {
    name: 'sqlite (table prefix per tenant)',
    make: async () => {
      const tablePrefix = `t${++n}_`;
      const store = new SQLCheckpointStore(ds, { tablePrefix });
      prefixOf.set(store, tablePrefix);
      return store;
    },
    raw: sqlRaw(
      ds,
      (store) => ({
        calls: `"${prefixOf.get(store)!}calls"`,
        checkpoints: `"${prefixOf.get(store)!}checkpoints"`,
        runs: `"${prefixOf.get(store)!}runs"`,
      }),
      () => '?',
    ),
  };
  describeCheckpointStoreConformance(fixture);
  tamperFuzz(fixture);

  describe('SQLiteCheckpointStore(path)', () => {
    it('is the SQL store on its own WAL file, shared by two store objects like two processes', async () => {
      const path = join(dir, 'own.db');
      const a = new SQLiteCheckpointStore(path);
      const b = new SQLiteCheckpointStore(path);
      await a.save({
        runId: 'r',
        step: 0,
        flow: 'f',
        status: 'running',
        segment: 1,
        sealed: 'x',
      });
      await expect(
        b.save({
          runId: 'r',
          step: 0,
          flow: 'f',
          status: 'running',
          segment: 1,
          sealed: 'y',
        }),
      ).rejects.toThrow(/already exists/);
      await b.save({
        runId: 'r',
        step: 1,
        flow: 'f',
        status: 'done',
        segment: 1,
        sealed: 'z',
      });
      expect((await a.latest('r'))?.sealed).toBe('z');
      const check = new DataSource({ type: 'better-sqlite3', database: path });
      await check.initialize();
      expect(await check.query('PRAGMA journal_mode')).toEqual([
        { journal_mode: 'wal' },
      ]);
      await check.destroy();
      await a.close();
      await b.close();
    });

    it('opens a new file while another process holds its write lock: waits, not "database is locked"', async () => {
      // SQLite does not run the busy handler for the switch to WAL, so processes opening one new
      // file at once failed at connect (a CI flake of the queue crash suite).
      const path = join(dir, 'contended.db');
      const holder = new DataSource({ type: 'better-sqlite3', database: path });
      await holder.initialize();
      await holder.query('CREATE TABLE t (a)');
      const runner = holder.createQueryRunner();
      await runner.query('BEGIN IMMEDIATE');
      await runner.query('INSERT INTO t VALUES (1)');
      const store = new SQLiteCheckpointStore(path);
      const opened = store.head('r');
      const started = Date.now();
      await new Promise((resolve) => setTimeout(resolve, 300));
      await runner.query('COMMIT');
      await expect(opened).resolves.toBeUndefined();
      expect(Date.now() - started).toBeGreaterThanOrEqual(250);
      await runner.release();
      await store.close();
      await holder.destroy();
      const check = new DataSource({ type: 'better-sqlite3', database: path });
      await check.initialize();
      expect(await check.query('PRAGMA journal_mode')).toEqual([
        { journal_mode: 'wal' },
      ]);
      await check.destroy();
    });

    it('refuses an empty path and a Postgres-only option', () => {
      expect(() => new SQLiteCheckpointStore('')).toThrow(/file path/);
      expect(
        () =>
          new SQLiteCheckpointStore(join(dir, 'x.db'), {
            schema: 'x',
          }),
      ).toThrow(/Postgres/);
    });
  });
});
