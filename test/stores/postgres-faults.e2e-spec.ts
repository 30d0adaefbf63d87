/**
 * Postgres failing under a running worker: its backend terminated mid-write
 * (`pg_terminate_backend`) on every attempt until the writer gives up, and its connection pool
 * exhausted. The run errors cleanly, nothing is half-written (the `done` record and the checkpoint
 * commit together or not at all), and it is recoverable afterwards with no finished call run twice.
 * A termination the retry absorbs is in store-faults.e2e-spec.ts.
 */
import {
  CheckpointStoreUnavailable,
  Executor,
  Flow,
  FlowRunner,
  RecoveryNeedsDecision,
  SQLCheckpointStore,
  ToolRegistry,
} from 'agent-adapter';
import { DataSource } from 'typeorm';
import { KEY } from 'agent-adapter/testing/fixtures';
import { STORE_RETRY } from 'agent-adapter/exec/durable/confirmed-write';
import { DATABASE_URL, describeWithService, suiteId } from '../utils/services';

describeWithService(
  'postgres',
  'Postgres faults under a running worker',
  () => {
    const schemas: string[] = [];
    const sources: DataSource[] = [];
    const admin = new DataSource({ type: 'postgres', url: DATABASE_URL });

    beforeAll(() => admin.initialize());
    afterAll(async () => {
      for (const ds of sources) if (ds.isInitialized) await ds.destroy();
      for (const s of schemas)
        await admin.query(`DROP SCHEMA IF EXISTS "${s}" CASCADE`);
      await admin.destroy();
    });

    async function storeOn(extra: Record<string, unknown> = {}, poolSize = 4) {
      const app = suiteId('aa_fault');
      const ds = new DataSource({
        type: 'postgres',
        url: DATABASE_URL,
        applicationName: app,
        poolSize,
        extra,
      });
      await ds.initialize();
      sources.push(ds);
      schemas.push(app);
      return { ds, app, store: new SQLCheckpointStore(ds, { schema: app }) };
    }

    /** charge (not idempotent) then mail (not idempotent), one superstep each; the fault once. */
    function setup(during: { mail?: () => Promise<void> } = {}) {
      let fault = during.mail;
      const ran: string[] = [];
      const registry = new ToolRegistry()
        .register('charge', () => {
          ran.push('charge');
          return 'charged';
        })
        .register('mail', async () => {
          ran.push('mail');
          const once = fault;
          fault = undefined;
          await once?.();
          return 'mailed';
        });
      const flow = new Flow<{ note: string }>('faults')
        .node('pay', async (_s, ctx) => ({
          note: String(await ctx.call('charge', {})),
        }))
        .node('send', async (_s, ctx) => ({
          note: String(await ctx.call('mail', {})),
        }))
        .edge('pay', 'send')
        .end('send');
      return { ran, flow, executor: new Executor(registry) };
    }

    it('backend terminated on every attempt at the done record and the checkpoint: CheckpointStoreUnavailable, nothing half-written, recoverable', async () => {
      const { store, app } = await storeOn();
      const runId = 'terminated-mid-write';
      // While mail runs, an admin transaction locks the run's head row, so the worker's next write
      // (mail's done + the checkpoint, one statement) blocks; then its backend is terminated, each
      // time it is written again, until the writer's retry budget is spent.
      const locker = admin.createQueryRunner();
      let killed = 0;
      let killer: Promise<void> = Promise.resolve();
      const { ran, flow, executor } = setup({
        mail: async () => {
          await locker.connect();
          await locker.startTransaction();
          await locker.query(
            `SELECT 1 FROM "${app}"."aa_runs" WHERE run_id = $1 FOR UPDATE`,
            [runId],
          );
          killer = (async () => {
            // Wait until the worker's write is blocked on the lock, then cut its connection.
            for (let i = 0; i < 1000 && killed < STORE_RETRY.attempts; i++) {
              const rows: Array<{ pid: number }> = await admin.query(
                `SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'`,
                [app],
              );
              for (const { pid } of rows) {
                await admin.query('SELECT pg_terminate_backend($1)', [pid]);
                killed++;
              }
              await new Promise((r) => setTimeout(r, 20));
            }
            await locker.rollbackTransaction();
            await locker.release();
          })();
        },
      });
      const worker = new FlowRunner(executor, {
        checkpoints: store,
        checkpointKey: KEY,
      });
      const failed = await worker.run(flow, {}, { runId }).then(
        () => undefined,
        (e: unknown) => e as Error,
      );
      worker.close();
      await killer;
      expect(killed).toBe(STORE_RETRY.attempts);
      expect(failed).toBeInstanceOf(CheckpointStoreUnavailable);
      expect(failed?.message).toMatch(/stayed unavailable.*terminat/s);

      // Nothing half-written: the head is still at step 1 (after pay), mail's record is `started`
      // only, so mail is in doubt — exactly as if the worker had died there.
      await expect(store.head(runId)).resolves.toMatchObject({
        step: 1,
        status: 'running',
      });
      const recoverer = new FlowRunner(executor, {
        checkpoints: store,
        checkpointKey: KEY,
      });
      const doubt = await recoverer
        .recover(flow, runId)
        .catch((e: unknown) => e);
      expect(doubt).toBeInstanceOf(RecoveryNeedsDecision);
      expect((doubt as RecoveryNeedsDecision).calls).toEqual([
        ['mail', 'started, no result recorded'],
      ]);
      const r = await recoverer.recover(flow, runId, { rerunInDoubt: true });
      recoverer.close();
      expect(r.error).toBeUndefined();
      expect(r).toMatchObject({ status: 'done', state: { note: 'mailed' } });
      expect(ran).toEqual(['charge', 'mail', 'mail']); // charge replayed, never rerun
    }, 20_000);

    it('connection pool exhausted: the write times out cleanly, and the run recovers once connections are back', async () => {
      const { ds, store } = await storeOn({ connectionTimeoutMillis: 300 }, 1);
      const runId = 'pool-exhausted';
      let holder: ReturnType<DataSource['createQueryRunner']> | undefined;
      const { ran, flow, executor } = setup({
        mail: async () => {
          // Someone else takes the pool's only connection while mail runs.
          holder = ds.createQueryRunner();
          await holder.connect();
          await holder.query('SELECT 1');
        },
      });
      const worker = new FlowRunner(executor, {
        checkpoints: store,
        checkpointKey: KEY,
      });
      const failed = await worker.run(flow, {}, { runId }).then(
        () => undefined,
        (e: unknown) => e as Error,
      );
      worker.close();
      expect(failed?.message).toMatch(/timeout|timed out/i);
      await holder!.release();

      await expect(store.head(runId)).resolves.toMatchObject({
        step: 1,
        status: 'running',
      });
      const recoverer = new FlowRunner(executor, {
        checkpoints: store,
        checkpointKey: KEY,
      });
      const r = await recoverer.recover(flow, runId, { rerunInDoubt: true });
      recoverer.close();
      expect(r).toMatchObject({ status: 'done' });
      expect(ran).toEqual(['charge', 'mail', 'mail']);
    });

    it('workerId: 200 characters fit the owner column (as Postgres counts them); 201 are refused at construction, not by Postgres', async () => {
      const { store } = await storeOn();
      const { flow, executor } = setup();
      const max = '😀'.repeat(200); // 200 characters, 400 UTF-16 units
      const fits = new FlowRunner(executor, {
        checkpoints: store,
        checkpointKey: KEY,
        workerId: max,
      });
      const r = await fits.run(flow, { note: '' }, { runId: 'w200' });
      fits.close();
      expect(r.status).toBe('done');

      const outcome = await (async () =>
        new FlowRunner(executor, {
          checkpoints: store,
          checkpointKey: KEY,
          workerId: `${max}x`,
        }).run(flow, { note: '' }, { runId: 'w201' }))().catch(
        (e: unknown) => e,
      );
      // Today: the runner is made, and its first save fails with Postgres's own error.
      expect(String(outcome)).toMatch(
        /^DurableSetupError: FlowRunner: workerId must be a non-empty string of at most 200 characters/,
      );
      expect(await store.head('w201')).toBeUndefined();
    });
  },
);
