/**
 * Recovery at scale (issue 7, item 8): `recoverEach` (what `recoverAll` and the bootstrap sweep
 * run) over N unfinished runs per store: its wall time against a floor of the same reads and
 * writes done raw, and its memory against N.
 *
 *   npm run bench -- --suite recover [--stores postgres,redis,sqlite] [--runs 500,5000]
 *                                    [--concurrency 4] [--api each|all]
 *
 * The issue's size is `--runs 1000,10000` (about 5 minutes on the 2-core VM: every write of
 * Postgres and SQLite waits for an fsync); the default keeps the suite near 2 minutes. `--api all`
 * measures `recoverAll` (which also keeps every outcome in its map) instead of `recoverEach`.
 *
 * For each store and each N, three fresh child processes in turn, on one unique Postgres schema /
 * Redis key prefix / SQLite file (removed afterwards, also after a failure):
 *
 * 1. seed: N real runs of a three-superstep flow (one tool call per superstep) through FlowRunner,
 *    32 at a time, each cut short after its first superstep: the call is logged `started` and
 *    `done`, and the checkpoint that would close the superstep fails to save (the worker "dies").
 *    Leases of 100 ms, so they have expired when recovery starts (no `force`). On Postgres the
 *    seeding session commits asynchronously and on SQLite it writes with `synchronous = OFF`, for
 *    speed; recovery and the floor use the stores' normal settings.
 * 2. floor: the same reads and writes as the recovery, raw, through the same client library on the
 *    same server, with the same concurrency: `concurrency` workers take run ids from a listing
 *    read one page of 100 at a time when the last is used up (as `recoverEach` does), and for each
 *    run read its head, its latest checkpoint and the cut superstep's call records, then make one
 *    single-row write per record recovery writes, of the same sizes, each its own commit:
 *    - Postgres (the DataSource's pg pool, prepared statements, `synchronous_commit` as the server
 *      has it): the store's own listing, head, latest and calls SELECTs on its tables; INSERTs of
 *      (run_id, payload) into a table of the same schema.
 *    - Redis (ioredis, one connection): ZRANGEBYLEX on the flow's unfinished index and HGETALL of
 *      each listed head; HGETALL of the head, HGET of the latest checkpoint, HVALS of the call
 *      records; a SET per record.
 *    - SQLite (better-sqlite3 on the same file, WAL, `synchronous = FULL`, as the store): the
 *      store's SELECTs on its tables; INSERTs into a table of the same file.
 *    What "the same" is comes from counting: a calibration run in this process (memory store)
 *    counts the store reads and the records (checkpoints and call records) one recovery writes,
 *    with their sizes; the recovery child counts them again on the real store (the table shows
 *    them per run). Recovery writes 8 records per run in 6 round trips (a `done` record rides with
 *    its checkpoint); the floor makes 8 single-row writes, as in the superstep suite.
 * 3. recover: `runner.recoverEach(flow, { concurrency })` (or `recoverAll`) over every run: wall
 *    and CPU time, RSS just before it starts, peak RSS (`process.resourceUsage().maxRSS`), the heap
 *    sampled every 100 runs, and the live heap: after a forced full GC once 90% of the runs are
 *    done (its pause is taken out of the times). Every run must end `done`: each outcome is
 *    checked, and the store must list no unfinished run afterwards.
 *
 * Checked figures (bench/out/recover.json):
 * - `recover time / floor` per store and N, target <= 2x (the issue's).
 * - `peak RSS, N=largest / N=smallest` per store, target <= 1.25x: flat in N. V8 collects its old
 *   generation lazily (the first mark-compact of a sweep comes once the heap has grown to about
 *   four times what was live when the process went idle), so the peak also holds garbage that
 *   grows with the runs done until that collection; the note gives the peaks and the heap.
 * - `live heap growth per run` from the smallest N to the largest, target <= 200 bytes a run: what
 *   the sweep really keeps. Keeping each run's outcome, as `recoverAll`'s map does, costs about
 *   400 bytes a run for this flow (`--api all` fails the target); the one-off growth of a warming
 *   process (compiled code, caches) shows as up to about 100 bytes a run between 500 and 5000.
 */
import { join } from 'node:path';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import Redis from 'ioredis';
import pLimit from 'p-limit';
import {
  Executor,
  Flow,
  FlowRunner,
  MemoryCheckpointStore,
  SQLCheckpointStore,
  SQLiteCheckpointStore,
  ToolRegistry,
  type CallRecord,
  type CheckpointRecord,
  type CheckpointStore,
  type ListUnfinishedOptions,
  type RunResult,
  type SaveOptions,
} from 'agent-adapter';
import { ForwardingStore } from 'agent-adapter/testing';
import {
  HEAD_FIELDS,
  RedisKeys,
  checkpointField,
} from 'agent-adapter/exec/checkpoints/redis/redis.layout';
import { runTs } from '../test/utils/ts-child';
import { writeResults, type Measure } from './lib/results';
import {
  benchId,
  dropRedisPrefix,
  dropSchema,
  pgFloorTable,
  pgPool,
  postgresDataSource,
  redisStore,
  sqliteFloor,
  tempDir,
} from './lib/stores';
import { KEY, REDIS_URL, arg } from './lib/util';

const FLOW = 'bench-recover';
const PAGE = 100;
const SEED_CONCURRENCY = 32;
const CHILD_TIMEOUT_MS = 15 * 60_000;
/** What the sweep may keep per run, in live heap (see the file comment). */
const LIVE_BYTES_PER_RUN = 200;

type StoreKind = 'postgres' | 'redis' | 'sqlite';
const KINDS: readonly StoreKind[] = ['postgres', 'redis', 'sqlite'];

interface Steps {
  a?: string;
  b?: string;
  c?: string;
}

// ---------------------------------------------------------------------------------------------
// The flow, its tool, and the store wrappers (seeding cuts runs short; recovery counts)

function recoverFlow(): Flow<Steps> {
  return new Flow<Steps>(FLOW)
    .node('a', async (_s, ctx) => {
      const a = await ctx.call<string>('step', { node: 'a', run: ctx.runId });
      // One tick: the `done` record is flushed on its own (recordCall) before the checkpoint, so
      // the seeded run has its call `done` and no checkpoint for it. Replayed, it waits a tick.
      await new Promise((resolve) => setImmediate(resolve));
      return { a };
    })
    .node('b', async (_s, ctx) => ({
      b: await ctx.call<string>('step', { node: 'b', run: ctx.runId }),
    }))
    .node('c', async (_s, ctx) => ({
      c: await ctx.call<string>('step', { node: 'c', run: ctx.runId }),
    }))
    .edge('a', 'b')
    .edge('b', 'c')
    .end('c');
}

function registry(): ToolRegistry {
  return new ToolRegistry().register(
    'step',
    (a: { node: string; run: string }) => `step ${a.node} of ${a.run} done`,
  );
}

const runId = (i: number) => `run-${String(i).padStart(6, '0')}`;

class Interrupted extends Error {}

/** The worker "dies" instead of saving the checkpoint that closes a run's first superstep. */
class InterruptingStore extends ForwardingStore {
  override save(checkpoint: CheckpointRecord, options?: SaveOptions) {
    if (checkpoint.step === 1)
      return Promise.reject(new Interrupted(checkpoint.runId));
    return super.save(checkpoint, options);
  }
}

interface OpCounts {
  listUnfinished: number;
  head: number;
  latest: number;
  calls: number;
  save: number;
  recordCall: number;
  renewLeases: number;
  /** Checkpoints and call records written. */
  records: number;
  bytes: number;
}

/** Counts the store calls and the records written; keeps the record sizes of one run. */
class CountingStore extends ForwardingStore {
  readonly ops: OpCounts = {
    listUnfinished: 0,
    head: 0,
    latest: 0,
    calls: 0,
    save: 0,
    recordCall: 0,
    renewLeases: 0,
    records: 0,
    bytes: 0,
  };
  /** The sizes of the records written for the first run seen writing, in order. */
  readonly sample: number[] = [];
  private sampled?: string;

  private wrote(id: string, sealed: string[]) {
    this.ops.records += sealed.length;
    for (const s of sealed) this.ops.bytes += s.length;
    this.sampled ??= id;
    if (id === this.sampled) this.sample.push(...sealed.map((s) => s.length));
  }
  override save(checkpoint: CheckpointRecord, options?: SaveOptions) {
    this.ops.save++;
    // The call records ride with the checkpoint; the floor writes them first, as separate rows.
    this.wrote(checkpoint.runId, [
      ...(options?.calls ?? []).map((c) => c.sealed),
      checkpoint.sealed,
    ]);
    return super.save(checkpoint, options);
  }
  override recordCall(id: string, segment: number, records: CallRecord[]) {
    this.ops.recordCall++;
    this.wrote(
      id,
      records.map((r) => r.sealed),
    );
    return super.recordCall(id, segment, records);
  }
  override listUnfinished(flow: string, options?: ListUnfinishedOptions) {
    this.ops.listUnfinished++;
    return super.listUnfinished(flow, options);
  }
  override head(id: string) {
    this.ops.head++;
    return super.head(id);
  }
  override latest(id: string) {
    this.ops.latest++;
    return super.latest(id);
  }
  override calls(id: string, superstep: number) {
    this.ops.calls++;
    return super.calls(id, superstep);
  }
  override renewLeases(owner: string, until: number, ids: readonly string[]) {
    this.ops.renewLeases++;
    return super.renewLeases(owner, until, ids);
  }
}

/** CPU milliseconds (user + system) of this process since `start`. */
function cpuSince(start: NodeJS.CpuUsage): number {
  const d = process.cpuUsage(start);
  return (d.user + d.system) / 1000;
}

/** The V8 `gc()` function, without starting Node with `--expose-gc`. */
function gcFunction(): () => void {
  setFlagsFromString('--expose-gc');
  return runInNewContext('gc') as () => void;
}

/** Seeds runs [from, to) on `store`, SEED_CONCURRENCY at a time; each is cut short. */
async function seedRuns(
  store: CheckpointStore,
  from: number,
  to: number,
): Promise<void> {
  const runner = new FlowRunner(new Executor(registry()), {
    checkpoints: new InterruptingStore(store),
    checkpointKey: KEY,
    workerId: 'seeder',
    leaseMs: 100,
  });
  const flow = recoverFlow();
  const limit = pLimit(SEED_CONCURRENCY);
  const seeded: Array<Promise<void>> = [];
  for (let i = from; i < to; i++) {
    seeded.push(
      limit(() =>
        runner.run(flow, {}, { runId: runId(i) }).then(
          () => {
            throw new Error(`run ${runId(i)} was not interrupted`);
          },
          (error: unknown) => {
            if (!(error instanceof Interrupted)) throw error;
          },
        ),
      ),
    );
  }
  await Promise.all(seeded);
  runner.close();
}

// ---------------------------------------------------------------------------------------------
// Stores as the children open them

interface Opened {
  store: CheckpointStore;
  close(): Promise<void>;
}

async function openStore(
  kind: StoreKind,
  ns: string,
  options: { seeding?: boolean; pool: number },
): Promise<Opened> {
  if (kind === 'postgres') {
    const ds = await postgresDataSource({
      poolSize: options.pool,
      // Seeding only: commits need not wait for the WAL flush.
      ...(options.seeding && {
        extra: { options: '-c synchronous_commit=off' },
      }),
    });
    const store = new SQLCheckpointStore(ds, { schema: ns });
    return {
      store,
      close: async () => {
        await store.close();
        await ds.destroy();
      },
    };
  }
  if (kind === 'redis') {
    const store = redisStore(ns);
    return { store, close: () => store.close() };
  }
  const store = options.seeding
    ? new SQLCheckpointStore({
        type: 'better-sqlite3',
        database: ns,
        enableWAL: true,
        timeout: 10_000,
        prepareDatabase: (db: { pragma(s: string): unknown }) => {
          db.pragma('synchronous = OFF');
        },
      })
    : new SQLiteCheckpointStore(ns);
  return { store, close: () => store.close() };
}

// ---------------------------------------------------------------------------------------------
// Children: seed, floor, recover. Each prints one `RESULT <json>` line.

function report(result: object): void {
  process.stdout.write(`RESULT ${JSON.stringify(result)}\n`);
}

async function seedChild(kind: StoreKind, ns: string, n: number) {
  const opened = await openStore(kind, ns, {
    seeding: true,
    pool: SEED_CONCURRENCY + 2,
  });
  const t0 = performance.now();
  await seedRuns(opened.store, 0, n);
  const ms = performance.now() - t0;
  // Every run is listed unfinished, cut short with its call `done`.
  let listed = 0;
  for (let after: string | undefined; ;) {
    const page = await opened.store.listUnfinished(FLOW, {
      limit: 1000,
      ...(after !== undefined && { after }),
    });
    listed += page.length;
    if (page.length < 1000) break;
    after = page[page.length - 1]!.runId;
  }
  const calls = await opened.store.calls(runId(n - 1), 0);
  const head = await opened.store.head(runId(n - 1));
  await opened.close();
  if (listed !== n || calls.length !== 2 || head?.step !== 0)
    throw new Error(
      `seeding: ${listed} of ${n} runs listed; last run at step ${head?.step} with ${calls.length} call records (expected 0 and 2)`,
    );
  report({ ms });
}

interface FloorOps {
  /** Next page of run ids after `after` (the listing read). */
  list(after: string | undefined): Promise<string[]>;
  /** The per-run reads: head, latest checkpoint, the cut superstep's calls. */
  read(id: string): Promise<void>;
  /** One single-row write of `payload`. */
  write(id: string, k: number, payload: string): Promise<void>;
  close(): Promise<void>;
}

async function floorOps(
  kind: StoreKind,
  ns: string,
  pool: number,
): Promise<FloorOps> {
  const listSql = (t: (name: string) => string, p: (i: number) => string) =>
    `SELECT run_id, flow, step, status, segment, calls, owner, lease_expires_at, updated_at FROM ${t('runs')} WHERE flow = ${p(1)} AND status IN ('running', 'paused') AND run_id > ${p(2)} ORDER BY run_id LIMIT ${p(3)}`;
  const headSql = (t: (name: string) => string, p: (i: number) => string) =>
    `SELECT run_id, flow, step, status, segment, calls, owner, lease_expires_at, updated_at FROM ${t('runs')} WHERE run_id = ${p(1)}`;
  const latestSql = (t: (name: string) => string, p: (i: number) => string) =>
    `SELECT run_id, step, flow, status, segment, sealed FROM ${t('checkpoints')} WHERE run_id = ${p(1)} ORDER BY step DESC LIMIT 1`;
  const callsSql = (t: (name: string) => string, p: (i: number) => string) =>
    `SELECT run_id, superstep, segment, seq, sealed FROM ${t('calls')} WHERE run_id = ${p(1)} AND superstep = ${p(2)} ORDER BY segment, seq`;
  const insertSql = (t: (name: string) => string, p: (i: number) => string) =>
    `INSERT INTO ${t('floor')} (run_id, payload) VALUES (${p(1)}, ${p(2)})`;

  if (kind === 'postgres') {
    const ds = await postgresDataSource({ poolSize: pool });
    const t = (name: string) =>
      `"${ns}"."${name === 'floor' ? '' : 'aa_'}${name}"`;
    const p = (i: number) => `$${i}`;
    await ds.query(pgFloorTable(ns));
    const pg = pgPool(ds);
    const q = (name: string, text: string, values: unknown[]) =>
      pg.query({ name: `floor_${name}`, text, values });
    return {
      list: async (after) =>
        (await q('list', listSql(t, p), [FLOW, after ?? '', PAGE])).rows.map(
          (r: { run_id: string }) => r.run_id,
        ),
      read: async (id) => {
        await q('head', headSql(t, p), [id]);
        await q('latest', latestSql(t, p), [id]);
        await q('calls', callsSql(t, p), [id, 0]);
      },
      write: async (id, _k, payload) => {
        await q('insert', insertSql(t, p), [id, payload]);
      },
      close: () => ds.destroy(),
    };
  }
  if (kind === 'redis') {
    const redis = new Redis(REDIS_URL);
    // The store's own layout: the same keys and head fields its reads touch.
    const keys = new RedisKeys(ns);
    const index = keys.unfinished(FLOW);
    return {
      list: async (after) => {
        const ids = await redis.zrangebylex(
          index,
          after === undefined ? '-' : `(${after}`,
          '+',
          'LIMIT',
          0,
          PAGE,
        );
        await Promise.all(
          ids.map((id) => redis.hmget(keys.runHash(id), ...HEAD_FIELDS)),
        );
        return ids;
      },
      // Three reads of the run hash: the head, the latest checkpoint, and every value (the call
      // records among them; a raw read cannot pick one superstep's without the index script).
      read: async (id) => {
        const run = keys.runHash(id);
        const [step] = await redis.hmget(run, ...HEAD_FIELDS);
        await redis.hget(run, checkpointField(step ?? 0));
        await redis.hvals(run);
      },
      write: async (id, k, payload) => {
        await redis.set(`${ns}:floor:${id}:${k}`, payload);
      },
      close: async () => void redis.disconnect(),
    };
  }
  const db = sqliteFloor(ns, { timeout: 10_000 });
  const t = (name: string) => `"${name === 'floor' ? '' : 'aa_'}${name}"`;
  const p = () => '?';
  const list = db.prepare(listSql(t, p));
  const head = db.prepare(headSql(t, p));
  const latest = db.prepare(latestSql(t, p));
  const calls = db.prepare(callsSql(t, p));
  const insert = db.prepare(insertSql(t, p));
  return {
    list: async (after) =>
      (list.all(FLOW, after ?? '', PAGE) as Array<{ run_id: string }>).map(
        (r) => r.run_id,
      ),
    read: async (id) => {
      head.get(id);
      latest.get(id);
      calls.all(id, 0);
    },
    write: async (id, _k, payload) => void insert.run(id, payload),
    close: async () => void db.close(),
  };
}

async function floorChild(
  kind: StoreKind,
  ns: string,
  n: number,
  concurrency: number,
  sizes: number[],
) {
  const ops = await floorOps(kind, ns, concurrency + 1);
  const payloads = sizes.map((s) => 'x'.repeat(s));
  let buffer: string[] = [];
  let at = 0;
  let after: string | undefined;
  let last = false;
  let fetching: Promise<void> | undefined;
  // Run ids as recoverEach takes them: the next page is read when the last one is used up.
  const next = async (): Promise<string | undefined> => {
    for (;;) {
      if (at < buffer.length) return buffer[at++];
      if (last) return undefined;
      fetching ??= ops.list(after).then((ids) => {
        buffer = ids;
        at = 0;
        last = ids.length < PAGE;
        after = ids[ids.length - 1] ?? after;
        fetching = undefined;
      });
      await fetching;
    }
  };
  let runs = 0;
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      for (let id = await next(); id !== undefined; id = await next()) {
        await ops.read(id);
        for (const [k, payload] of payloads.entries())
          await ops.write(id, k, payload);
        runs++;
      }
    }),
  );
  const ms = performance.now() - t0;
  const cpuMs = cpuSince(c0);
  await ops.close();
  if (runs !== n) throw new Error(`floor: ${runs} runs listed, ${n} seeded`);
  report({ ms, cpuMs });
}

async function recoverChild(
  kind: StoreKind,
  ns: string,
  n: number,
  concurrency: number,
  api: string,
) {
  const opened = await openStore(kind, ns, { pool: concurrency + 1 });
  const store = new CountingStore(opened.store);
  const runner = new FlowRunner(new Executor(registry()), {
    checkpoints: store,
    checkpointKey: KEY,
    workerId: 'recoverer',
  });
  const flow = recoverFlow();
  flow.compile();
  await opened.store.head('no-such-run'); // connects (and checks the tables) before timing
  let done = 0;
  const errors: string[] = [];
  const tally = (outcome: RunResult<Steps> | Error) => {
    if (!(outcome instanceof Error) && outcome.status === 'done') done++;
    else if (errors.length < 5)
      errors.push(
        outcome instanceof Error
          ? `${outcome.name}: ${outcome.message}`
          : `ended ${outcome.status}`,
      );
  };
  // Heap: sampled every 100 runs finished; the live heap (after a forced full GC) once 90% of
  // the runs have finished, i.e. what the sweep really holds then, garbage aside. That GC's time
  // is taken out of the sweep's.
  const gc = gcFunction();
  let finished = 0;
  let heapPeak = 0;
  let liveAt90 = 0;
  let gcMs = 0;
  const mark = Math.ceil(n * 0.9);
  runner.events.on('checkpoint.saved', (e) => {
    if (e.status !== 'done') return;
    finished++;
    if (finished % 100 === 0)
      heapPeak = Math.max(heapPeak, process.memoryUsage().heapUsed);
    if (finished === mark) {
      const g0 = performance.now();
      gc();
      liveAt90 = process.memoryUsage().heapUsed;
      gcMs = performance.now() - g0;
    }
  });
  const rssBefore = process.memoryUsage.rss();
  const heapBefore = process.memoryUsage().heapUsed;
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  let all: Map<string, RunResult<Steps> | Error> | undefined;
  if (api === 'all') {
    all = await runner.recoverAll(flow, { concurrency });
    for (const outcome of all.values()) tally(outcome);
  } else {
    for await (const [, outcome] of runner.recoverEach(flow, { concurrency }))
      tally(outcome);
  }
  const ms = performance.now() - t0 - gcMs;
  const cpuMs = cpuSince(c0) - gcMs;
  heapPeak = Math.max(heapPeak, process.memoryUsage().heapUsed);
  const peakRss = process.resourceUsage().maxRSS * 1024;
  const outcomes = all?.size;
  all = undefined;
  runner.close();
  const left = await opened.store.listUnfinished(FLOW, { limit: 1 });
  await opened.close();
  report({
    ms,
    cpuMs,
    rssBefore,
    peakRss,
    heapBefore,
    heapPeak,
    liveAt90,
    done,
    errors,
    left: left.length,
    ops: store.ops,
    sample: store.sample,
    ...(outcomes !== undefined && { outcomes }),
  });
}

// ---------------------------------------------------------------------------------------------
// The suite (parent): calibration, then per store and N: seed, floor, recover; then the table

interface Calibration {
  ops: OpCounts;
  sizes: number[];
}

/** One run seeded and recovered on a memory store: the store calls and records one recovery makes. */
async function calibrate(): Promise<Calibration> {
  const memory = new MemoryCheckpointStore();
  await seedRuns(memory, 0, 1);
  const store = new CountingStore(memory);
  const runner = new FlowRunner(new Executor(registry()), {
    checkpoints: store,
    checkpointKey: KEY,
    workerId: 'recoverer',
  });
  const all = await runner.recoverAll(recoverFlow(), { force: true });
  runner.close();
  const outcome = all.get(runId(0));
  if (outcome instanceof Error || outcome?.status !== 'done')
    throw new Error(
      `calibration: the run was not recovered (${outcome instanceof Error ? outcome.message : (outcome?.status ?? 'no outcome')})`,
    );
  return { ops: store.ops, sizes: store.sample };
}

interface RecoverResult {
  ms: number;
  cpuMs: number;
  rssBefore: number;
  peakRss: number;
  heapBefore: number;
  heapPeak: number;
  liveAt90: number;
  done: number;
  errors: string[];
  left: number;
  ops: OpCounts;
  sample: number[];
}

interface Row {
  store: StoreKind;
  runs: number;
  seedMs: number;
  floorMs: number;
  floorCpuMs: number;
  recover: RecoverResult;
}

const MB = 1024 * 1024;

async function child<T>(args: string[]): Promise<T> {
  const r = await runTs(__filename, args, process.env, {
    extra: [__filename],
    timeoutMs: CHILD_TIMEOUT_MS,
  });
  const line = r.stdout.split('\n').find((l) => l.startsWith('RESULT '));
  if (r.code !== 0 || !line) {
    throw new Error(
      `child ${args.join(' ')} failed (exit ${r.code}):\n${r.stderr || r.stdout}`,
    );
  }
  return JSON.parse(line.slice('RESULT '.length)) as T;
}

/** A fresh namespace for one (store, N): made here, removed by `drop` whatever happens. */
async function namespace(
  kind: StoreKind,
): Promise<{ ns: string; drop(): Promise<void> }> {
  const id = Date.now().toString(36);
  if (kind === 'postgres') {
    const ns = benchId(`aa_bench_recover_${id}`);
    return { ns, drop: () => dropSchema(ns) };
  }
  if (kind === 'redis') {
    const ns = benchId(`aabenchrecover${id}`);
    return { ns, drop: () => dropRedisPrefix(ns) };
  }
  const { dir, remove } = tempDir('aa-bench-recover-');
  return { ns: join(dir, 'runs.db'), drop: async () => remove() };
}

async function measure(
  kind: StoreKind,
  n: number,
  concurrency: number,
  api: string,
  sizes: number[],
): Promise<Row> {
  const { ns, drop } = await namespace(kind);
  try {
    const common = ['--store', kind, '--ns', ns, '--runs', String(n)];
    const seed = await child<{ ms: number }>(['--child', 'seed', ...common]);
    const floor = await child<{ ms: number; cpuMs: number }>([
      '--child',
      'floor',
      ...common,
      '--concurrency',
      String(concurrency),
      '--sizes',
      sizes.join(','),
    ]);
    const recover = await child<RecoverResult>([
      '--child',
      'recover',
      ...common,
      '--concurrency',
      String(concurrency),
      '--api',
      api,
    ]);
    if (recover.done !== n || recover.errors.length || recover.left) {
      throw new Error(
        `${kind}, ${n} runs: ${recover.done} recovered to done, ${recover.left ? 'some' : 'none'} left unfinished; ${recover.errors.join('; ')}`,
      );
    }
    return {
      store: kind,
      runs: n,
      seedMs: seed.ms,
      floorMs: floor.ms,
      floorCpuMs: floor.cpuMs,
      recover,
    };
  } finally {
    await drop();
  }
}

function perRun(ops: OpCounts, n: number): string {
  const f = (x: number) => (Number.isInteger(x) ? String(x) : x.toFixed(2));
  return `${f(ops.head / n)}h ${f(ops.latest / n)}l ${f(ops.calls / n)}c ${f(ops.listUnfinished / n)}p / ${f(ops.records / n)} rec in ${f((ops.save + ops.recordCall) / n)} writes`;
}

async function main(): Promise<void> {
  const asked = arg('stores', KINDS.join(',')).split(',').filter(Boolean);
  // Other suites take `memory` too: an in-process store has nothing to recover at scale.
  const skipped = asked.filter((s) => !(KINDS as string[]).includes(s));
  if (skipped.length)
    console.log(
      `(not measured here: ${skipped.join(', ')}; stores: ${KINDS.join(', ')})`,
    );
  const stores = asked.filter((s): s is StoreKind =>
    (KINDS as string[]).includes(s),
  );
  const sizesN = arg('runs', '500,5000')
    .split(',')
    .map(Number)
    .sort((a, b) => a - b);
  if (sizesN.some((n) => !Number.isSafeInteger(n) || n < 1))
    throw new Error('--runs takes run counts, e.g. --runs 1000,10000');
  const concurrency = Number(arg('concurrency', '4'));
  if (!Number.isSafeInteger(concurrency) || concurrency < 1)
    throw new Error('--concurrency takes a positive integer');
  const api = arg('api', 'each');
  if (api !== 'each' && api !== 'all')
    throw new Error('--api is "each" (recoverEach) or "all" (recoverAll)');

  const cal = await calibrate();
  console.log(
    `recover${api === 'all' ? 'All' : 'Each'} over N unfinished runs (3 supersteps, one tool call each, cut short after the first), concurrency ${concurrency}`,
  );
  console.log(
    `one recovery (calibrated on the memory store): ${perRun(cal.ops, 1)}; records of ${cal.sizes.join(', ')} bytes\n`,
  );
  console.log(
    'store        runs   seed s   floor s   recover s   recover/floor   cpu ms/run: floor, recover   rss before MB   peak rss MB   heap MB: before / peak / live at 90%   per run: reads (head, latest, calls, pages) / records',
  );
  const rows: Row[] = [];
  for (const kind of stores) {
    for (const n of sizesN) {
      const r = await measure(kind, n, concurrency, api, cal.sizes);
      rows.push(r);
      const rec = r.recover;
      if (rec.ops.records !== cal.ops.records * n)
        console.log(
          `  (${kind}: ${rec.ops.records} records written for ${n} runs; the floor assumed ${cal.ops.records} a run)`,
        );
      console.log(
        `${kind.padEnd(8)} ${String(n).padStart(8)} ${(r.seedMs / 1000).toFixed(1).padStart(8)} ${(r.floorMs / 1000).toFixed(2).padStart(9)} ${(rec.ms / 1000).toFixed(2).padStart(11)} ${(rec.ms / r.floorMs).toFixed(2).padStart(14)}x ${`${(r.floorCpuMs / n).toFixed(2)}, ${(rec.cpuMs / n).toFixed(2)}`.padStart(28)} ${(rec.rssBefore / MB).toFixed(1).padStart(15)} ${(rec.peakRss / MB).toFixed(1).padStart(13)} ${`${(rec.heapBefore / MB).toFixed(1)} / ${(rec.heapPeak / MB).toFixed(1)} / ${(rec.liveAt90 / MB).toFixed(1)}`.padStart(35)}   ${perRun(rec.ops, n)}`,
      );
    }
  }
  const measures: Measure[] = rows.map((r) => ({
    measure: `recover${api === 'all' ? 'All' : 'Each'} time / floor`,
    store: `${r.store}, ${r.runs} runs`,
    value: r.recover.ms / r.floorMs,
    unit: 'x',
    target: 2,
    better: 'lower',
  }));
  const smallest = sizesN[0]!;
  const largest = sizesN[sizesN.length - 1]!;
  if (largest > smallest) {
    for (const kind of stores) {
      const lo = rows.find((r) => r.store === kind && r.runs === smallest)!;
      const hi = rows.find((r) => r.store === kind && r.runs === largest)!;
      measures.push({
        measure: `peak RSS, N=${largest} / N=${smallest}`,
        store: kind,
        value: hi.recover.peakRss / lo.recover.peakRss,
        unit: 'x',
        target: 1.25,
        better: 'lower',
        note: `peak RSS ${(lo.recover.peakRss / MB).toFixed(0)} -> ${(hi.recover.peakRss / MB).toFixed(0)} MB (over the RSS before the sweep: ${((lo.recover.peakRss - lo.recover.rssBefore) / MB).toFixed(0)} -> ${((hi.recover.peakRss - hi.recover.rssBefore) / MB).toFixed(0)} MB), heap peak ${(lo.recover.heapPeak / MB).toFixed(0)} -> ${(hi.recover.heapPeak / MB).toFixed(0)} MB: garbage V8 keeps until its next mark-compact; what the sweep holds is the live heap (next line)`,
      });
      measures.push({
        measure: `live heap growth per run, N=${smallest}..${largest}`,
        store: kind,
        value:
          (hi.recover.liveAt90 - lo.recover.liveAt90) /
          (Math.ceil(largest * 0.9) - Math.ceil(smallest * 0.9)),
        unit: 'B/run',
        target: LIVE_BYTES_PER_RUN,
        better: 'lower',
        note: `V8 heap after a forced full GC once 90% of the runs are done: ${(lo.recover.liveAt90 / MB).toFixed(1)} MB at ${smallest} runs, ${(hi.recover.liveAt90 / MB).toFixed(1)} MB at ${largest}`,
      });
    }
  }
  writeResults('recover', measures);
}

async function childMain(mode: string): Promise<void> {
  const kind = arg('store', '') as StoreKind;
  const ns = arg('ns', '');
  const n = Number(arg('runs', '0'));
  const concurrency = Number(arg('concurrency', '4'));
  if (mode === 'seed') return seedChild(kind, ns, n);
  if (mode === 'floor')
    return floorChild(
      kind,
      ns,
      n,
      concurrency,
      arg('sizes', '').split(',').map(Number),
    );
  if (mode === 'recover')
    return recoverChild(kind, ns, n, concurrency, arg('api', 'each'));
  throw new Error(`unknown child mode "${mode}"`);
}

const mode = arg('child', '');
(mode ? childMain(mode) : main()).then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
