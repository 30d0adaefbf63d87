import {
  CheckpointStoreUnavailable,
  DriverNotInstalledError,
  SQLCheckpointStore,
  agentAdapterMigrations,
  type CheckpointStore,
} from 'agent-adapter';
import { createCheckpointStore } from 'agent-adapter/nest';
import { DataSource } from 'typeorm';
import { describeCheckpointStoreConformance } from 'agent-adapter/testing';
import { tamperFuzz } from '../../tools/tamper/tamper-fuzz';
import { sqlRaw } from './sql.fixtures';
import { DATABASE_URL, describeWithService, suiteId } from '../utils/services';

describeWithService('postgres', 'SQLCheckpointStore on Postgres', () => {
  // One pool for the whole suite; every store gets its own schema (a tenant).
  const ds = new DataSource({
    type: 'postgres',
    url: DATABASE_URL,
    poolSize: 8,
  });
  const schemas: string[] = [];
  const schemaOf = new Map<CheckpointStore, string>();

  beforeAll(async () => {
    await ds.initialize();
  });
  afterAll(async () => {
    for (const s of schemas)
      await ds.query(`DROP SCHEMA IF EXISTS "${s}" CASCADE`);
    await ds.destroy();
  });

  const fresh = (
    options: { createTables?: boolean; preparedStatements?: boolean } = {},
  ) => {
    const schema = suiteId('aa_pg');
    schemas.push(schema);
    const store = new SQLCheckpointStore(ds, { schema, ...options });
    schemaOf.set(store, schema);
    return store;
  };

  const fixture = {
    name: 'postgres',
    make: async () => fresh(),
    raw: sqlRaw(
      ds,
      (store) => {
        const s = schemaOf.get(store)!;
        return {
          calls: `"${s}"."aa_calls"`,
          checkpoints: `"${s}"."aa_checkpoints"`,
          runs: `"${s}"."aa_runs"`,
        };
      },
      (i) => `$${i}`,
    ),
  };
  describeCheckpointStoreConformance(fixture);
  // Without prepared statements the writes go through TypeORM's query, which keeps an INSERT's
  // row count to itself: their texts differ (they return rows), so every behaviour runs again.
  describeCheckpointStoreConformance({
    ...fixture,
    name: 'postgres without prepared statements',
    make: async () => fresh({ preparedStatements: false }),
  });
  tamperFuzz(fixture);

  describe('Postgres specifics', () => {
    it('the hot path is one statement per write: CAS, fencing and the call count hold under concurrency', async () => {
      const store = fresh();
      const id = 'race';
      await store.save({
        runId: id,
        step: 0,
        flow: 'f',
        status: 'running',
        segment: 1,
        sealed: 's0',
      });
      // Many appenders and one claimer at once: every append either lands before the claim (and is
      // counted) or is refused after it; the head's count equals the rows in the log.
      const appends = Array.from({ length: 20 }, (_, i) =>
        store
          .recordCall(id, 1, [
            {
              runId: id,
              segment: 1,
              superstep: 0,
              seq: i + 1,
              sealed: `c${i}`,
            },
          ])
          .then(
            () => 'ok',
            (e: Error) => e.name,
          ),
      );
      const claim = store.save({
        runId: id,
        step: 1,
        flow: 'f',
        status: 'running',
        segment: 2,
        sealed: 's1',
      });
      const results = await Promise.all(appends);
      await claim;
      const head = (await store.head(id))!;
      const logged = (await store.calls(id, 0)).length;
      expect(head.calls).toBe(logged);
      expect(results.filter((r) => r === 'ok')).toHaveLength(logged);
      expect(
        results.every((r) => r === 'ok' || r === 'CheckpointConflict'),
      ).toBe(true);
    });

    it('every write finds its run by its id, on a young table too (no walk of the unfinished or running runs)', async () => {
      // A write also checks its run's status. Were that check an index condition (the unfinished
      // runs' partial index, the runs by status), Postgres could plan a young table's writes as
      // a walk of every unfinished or running run, keep the plan per connection, and each write
      // would cost more the more runs had been written (measured: a 3-step flow 8-24% slower
      // after 2,000-6,000 runs, half the flows/s at 8 in flight).
      const store = fresh();
      const pool = (
        ds.driver as unknown as {
          master: { query: (...args: unknown[]) => Promise<unknown> };
        }
      ).master;
      const sent: Array<{ text: string; values: unknown[] }> = [];
      const query = pool.query;
      pool.query = function (this: unknown, ...args: unknown[]) {
        const [q, values] = args as [
          string | { text: string; values?: unknown[] },
          unknown[]?,
        ];
        sent.push(
          typeof q === 'string'
            ? { text: q, values: values ?? [] }
            : { text: q.text, values: q.values ?? [] },
        );
        return query.apply(this, args);
      };
      const call = (superstep: number, seq: number) => ({
        runId: 'y',
        segment: 1,
        superstep,
        seq,
        sealed: `c${superstep}.${seq}`,
      });
      try {
        const at = (step: number, status: 'running' | 'done' = 'running') => ({
          runId: 'y',
          step,
          flow: 'f',
          status,
          segment: 1,
          sealed: `s${step}`,
        });
        const owner = { owner: 'w', leaseExpiresAt: Date.now() + 60_000 };
        await store.save(at(0), { ...owner, calls: [call(0, 1)] });
        await store.save(at(1), { ...owner, calls: [call(0, 2), call(1, 1)] });
        await store.recordCall('y', 1, [call(1, 2)], 'h');
        await store.appendStream(
          'y',
          1,
          [{ runId: 'y', superstep: 1, place: 'p', sealed: 'e' }],
          10,
        );
        await store.renewLeases('w', Date.now() + 60_000, ['y']);
        await store.save(at(2, 'done'), owner);
      } finally {
        pool.query = query;
      }
      const runs = `"${schemaOf.get(store)!}"."aa_runs"`;
      const writes = sent.filter(
        (s) =>
          s.text.includes(`UPDATE ${runs}`) ||
          s.text.includes(`INSERT INTO ${runs}`),
      );
      expect(writes.length).toBeGreaterThanOrEqual(6);
      for (const { text, values } of writes) {
        const plan = (
          await ds.query<Array<{ 'QUERY PLAN': string }>>(
            `EXPLAIN ${text}`,
            values,
          )
        )
          .map((row) => row['QUERY PLAN'])
          .join('\n');
        expect(plan).not.toMatch(/runs_(unfinished|status_id|flow_status_id)/);
        if (text.includes(`UPDATE ${runs}`))
          expect(plan).toMatch(/Index Cond: \(\(?\(?run_id\)?/);
      }
    });

    it('a pool whose query takes no callback (not pg-pool) still runs the prepared writes', async () => {
      // The engine uses pg-pool's callback form (one promise a write); a promise-only pool would
      // never call a callback back, so every write would hang.
      const store = fresh();
      const pool = (
        ds.driver as unknown as {
          master: { query: (...args: unknown[]) => unknown };
        }
      ).master;
      const query = pool.query;
      let asked = 0;
      pool.query = function (this: unknown, q: unknown) {
        asked++;
        return query.call(this, q);
      };
      const call = (seq: number) => ({
        runId: 'n',
        segment: 1,
        superstep: 0,
        seq,
        sealed: `c${seq}`,
      });
      try {
        await store.save(
          {
            runId: 'n',
            step: 0,
            flow: 'f',
            status: 'running',
            segment: 1,
            sealed: 's0',
          },
          { owner: 'w', calls: [call(1)] },
        );
        await store.recordCall('n', 1, [call(2)], 'h');
        expect((await store.head('n'))?.calls).toBe(2);
      } finally {
        pool.query = query;
      }
      expect(asked).toBeGreaterThanOrEqual(3);
    });

    it('tables come from the shipped TypeORM migration; the store then only checks them', async () => {
      const schema = suiteId('aa_mig');
      schemas.push(schema);
      await ds.query(`CREATE SCHEMA "${schema}"`);
      const migrated = new DataSource({
        type: 'postgres',
        url: DATABASE_URL,
        schema,
        migrations: agentAdapterMigrations({ schema }),
        migrationsTableName: `${schema}_migrations`,
      });
      await migrated.initialize();
      try {
        const ran = await migrated.runMigrations();
        expect(ran.map((m) => m.name)).toEqual([
          expect.stringMatching(/^AgentAdapterInit.*1795900000000$/),
        ]);
        const store = new SQLCheckpointStore(migrated, {
          schema,
          createTables: false,
        });
        await store.save({
          runId: 'm',
          step: 0,
          flow: 'f',
          status: 'running',
          segment: 1,
          sealed: 'x',
        });
        expect((await store.latest('m'))?.sealed).toBe('x');
        await store.close();
        expect(migrated.isInitialized).toBe(true); // a DataSource the user passed stays theirs
        await migrated.undoLastMigration();
        await expect(
          new SQLCheckpointStore(migrated, {
            schema,
            createTables: false,
          }).head('m'),
        ).rejects.toThrow(/missing or unreadable.*migrations/);
      } finally {
        await migrated.destroy();
      }
    });

    it('tables made by an incompatible version are refused with a clear error, and nothing is changed', async () => {
      const store = fresh();
      await store.save({
        runId: 'v',
        step: 0,
        flow: 'f',
        status: 'running',
        segment: 1,
        sealed: 'x',
      });
      const schema = schemaOf.get(store)!;
      await ds.query(
        `UPDATE "${schema}"."aa_meta" SET value = '99' WHERE key = 'schema_version'`,
      );
      const again = new SQLCheckpointStore(ds, { schema });
      await expect(again.latest('v')).rejects.toBeInstanceOf(
        CheckpointStoreUnavailable,
      );
      await expect(again.latest('v')).rejects.toThrow(/schema version 99/);
      const [row] = await ds.query<Array<{ n: number }>>(
        `SELECT count(*)::int AS n FROM "${schema}"."aa_checkpoints"`,
      );
      expect(row?.n).toBe(1);
    });

    it('an unreachable database is a clear error, not a hang', async () => {
      const store = new SQLCheckpointStore({
        type: 'postgres',
        url: 'postgres://postgres@127.0.0.1:1/none',
        connectTimeoutMS: 2000,
      });
      await expect(store.latest('x')).rejects.toThrow(
        /cannot connect to the postgres database/,
      );
      await store.close();
    });

    it('connection options: the store owns (and closes) the DataSource it creates', async () => {
      const schema = suiteId('aa_own');
      schemas.push(schema);
      const store = new SQLCheckpointStore(
        { type: 'postgres', url: DATABASE_URL, poolSize: 2 },
        { schema },
      );
      await store.save({
        runId: 'o',
        step: 0,
        flow: 'f',
        status: 'running',
        segment: 1,
        sealed: 'x',
      });
      await store.close();
      await expect(store.latest('o')).rejects.toThrow(/closed/);
    });

    it('a store descriptor with a url sizes its pool (poolSize) and can turn prepared statements off', async () => {
      const schema = suiteId('aa_pool');
      schemas.push(schema);
      const { store } = createCheckpointStore({
        type: 'postgres',
        url: DATABASE_URL,
        schema,
        poolSize: 3,
        preparedStatements: false,
      });
      try {
        await store.save({
          runId: 'p',
          step: 0,
          flow: 'f',
          status: 'running',
          segment: 1,
          sealed: 'x',
        });
        // The pool the store's DataSource made: pg's Pool with `max` from poolSize.
        const { dataSource } = await (
          store as unknown as {
            open(): Promise<{ dataSource: { driver: unknown } }>;
          }
        ).open();
        const pool = (
          dataSource.driver as { master: { options: { max: number } } }
        ).master;
        expect(pool.options.max).toBe(3);
        // Without prepared statements the writes still work (a pooler in transaction mode).
        await store.recordCall('p', 1, [
          { runId: 'p', segment: 1, superstep: 0, seq: 1, sealed: 'c' },
        ]);
        expect((await store.head('p'))?.calls).toBe(1);
      } finally {
        await store.close();
      }
    });

    it('names a missing driver package with the npm command', () => {
      expect(
        new DriverNotInstalledError('SQLCheckpointStore', 'pg').message,
      ).toMatch(/npm install pg/);
    });
  });
});
