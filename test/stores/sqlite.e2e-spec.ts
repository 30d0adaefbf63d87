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

/** A checkpoint record of run `runId` in segment 1. */
const cp = (runId: string, step: number, status: 'running' | 'done') => ({
  runId,
  step,
  flow: 'f',
  status,
  segment: 1,
  sealed: `s${step}`,
});

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

    it('makes a new file with 2 KB pages, and opens a file of another page size as it is', async () => {
      const pageSize = async (path: string) => {
        const check = new DataSource({
          type: 'better-sqlite3',
          database: path,
        });
        await check.initialize();
        const [row] =
          await check.query<Array<{ page_size: number }>>('PRAGMA page_size');
        await check.destroy();
        return row!.page_size;
      };
      const fresh = new SQLiteCheckpointStore(join(dir, 'pages-new.db'));
      await fresh.save(cp('r', 0, 'running'));
      await fresh.close();
      expect(await pageSize(join(dir, 'pages-new.db'))).toBe(2048);

      // A file someone made with SQLite's default pages: used as it is, nothing rewritten.
      const old = join(dir, 'pages-4k.db');
      const maker = new DataSource({ type: 'better-sqlite3', database: old });
      await maker.initialize();
      await maker.query('CREATE TABLE other (a)');
      await maker.destroy();
      const store = new SQLiteCheckpointStore(old);
      await store.save(cp('r', 0, 'running'));
      await store.save(cp('r', 1, 'done'));
      expect((await store.latest('r'))?.status).toBe('done');
      await store.close();
      expect(await pageSize(old)).toBe(4096);
    });

    it('keeps a running run due at the lease its last save gave, moved or not', async () => {
      const store = new SQLiteCheckpointStore(join(dir, 'leases.db'));
      const owned = (lease: number) => ({ owner: 'w1', leaseExpiresAt: lease });
      const dueAt = async () =>
        (await store.listDue({ now: 10_000_000, limit: 10 })).map((h) => [
          h.runId,
          h.leaseExpiresAt,
        ]);
      await store.save(cp('r', 0, 'running'), owned(1_000));
      await store.save(cp('r', 1, 'running'), owned(1_000));
      expect(await dueAt()).toEqual([['r', 1_000]]);
      // The lease moved on (a new quantum): the save that carries it sets it.
      await store.save(cp('r', 2, 'running'), owned(2_000));
      expect(await dueAt()).toEqual([['r', 2_000]]);
      await store.save(cp('r', 3, 'running'), owned(2_000));
      expect((await store.latest('r'))?.step).toBe(3);
      expect(await dueAt()).toEqual([['r', 2_000]]);
      // A save that keeps the lease is still fenced like any other: a stale segment is refused.
      await expect(
        store.save({ ...cp('r', 4, 'running'), segment: 3 }, owned(2_000)),
      ).rejects.toThrow(/fenced|segment/i);
      expect((await store.latest('r'))?.step).toBe(3);
      await store.close();
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
