/**
 * Cost of one durable superstep with one tool call (a `started` record, a `done` record and a
 * checkpoint) per backend, as a ratio to the floor measured in the same run on the same server:
 * three raw single-row writes of the same size, each its own commit, with the same durability
 * settings and through the same client library.
 *
 *   npm run bench -- [--stores postgres,redis,sqlite,memory] [--supersteps 300] [--rounds 3]
 *
 * The `cpu ms` columns are the process's CPU time (user + system, `process.cpuUsage`) per
 * superstep, of the whole run through FlowRunner and of the store's two writes alone: on a shared
 * machine steadier figures than wall time, and on a real backend they include the client library's
 * own work (and the kernel's, for the socket). Their difference is the runner's own CPU.
 *
 *   npm run bench -- --cpu [--supersteps 2000] [--rounds 5]
 *
 * only measures the runner's own CPU per superstep on the memory store (no I/O): a full warm-up
 * run, then ROUNDS runs, each reporting CPU µs per superstep and the garbage collections in it.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PerformanceObserver } from 'node:perf_hooks';
import Database from 'better-sqlite3';
import Redis from 'ioredis';
import type { Pool } from 'pg';
import { DataSource } from 'typeorm';
import {
  Executor,
  Flow,
  FlowRunner,
  MemoryCheckpointStore,
  RedisCheckpointStore,
  SQLCheckpointStore,
  SQLiteCheckpointStore,
  ToolRegistry,
  type CheckpointStore,
} from 'agent-adapter';
import { dropPrefix } from '../test/utils/redis-keys';
import { writeResults } from './results';
import { arg, median, suffix } from './util';

const KEY = 'bench-key-bench-key-bench-key-32b';
const DATABASE_URL =
  process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const SUPERSTEPS = Number(arg('supersteps', '300'));
const ROUNDS = Number(arg('rounds', '3'));
const STORES = arg('stores', 'postgres,redis,sqlite,memory').split(',');
const CPU_ONLY = process.argv.includes('--cpu');

/** A flow that loops one node, one tool call per superstep, SUPERSTEPS times. */
function loopFlow(): Flow<{ i: number; note: string }> {
  return new Flow<{ i: number; note: string }>('bench-loop', {
    maxVisits: SUPERSTEPS + 1,
  })
    .node('work', async (s, ctx) => ({
      i: s.i + 1,
      note: await ctx.call<string>('touch', { i: s.i, who: 'bench' }),
    }))
    .route('work', (s) => (s.i < SUPERSTEPS ? 'work' : 'done'), [
      'work',
      'done',
    ])
    .node('done', () => ({}))
    .end('done');
}

/** CPU milliseconds (user + system) since `start`. */
function cpuMs(start: NodeJS.CpuUsage): number {
  const d = process.cpuUsage(start);
  return (d.user + d.system) / 1000;
}

/**
 * Milliseconds (wall and CPU) per superstep of the durable flow on `store` (medians of ROUNDS
 * runs).
 */
async function durable(
  store: CheckpointStore,
): Promise<{ ms: number; cpu: number; sizes: number[] }> {
  const registry = new ToolRegistry().register(
    'touch',
    (a: { i: number }) => `touched ${a.i}`,
  );
  const runner = new FlowRunner(new Executor(registry), {
    checkpoints: store,
    checkpointKey: KEY,
  });
  const flow = loopFlow();
  await runner.run(
    flow,
    { i: SUPERSTEPS - 3, note: '' },
    { runId: `warm-${suffix()}` },
  );
  const times: number[] = [];
  const cpu: number[] = [];
  let sizes: number[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    const runId = `bench-${suffix()}`;
    const c0 = process.cpuUsage();
    const t0 = process.hrtime.bigint();
    await runner.run(flow, { i: 0, note: '' }, { runId });
    times.push(Number(process.hrtime.bigint() - t0) / 1e6 / (SUPERSTEPS + 1));
    cpu.push(cpuMs(c0) / (SUPERSTEPS + 1));
    if (r === 0) {
      const h = await store.history(runId);
      sizes = [
        h.calls[0]!.sealed.length,
        h.calls[1]!.sealed.length,
        h.checkpoints[1]!.sealed.length,
      ];
    }
  }
  runner.close();
  return { ms: median(times), cpu: median(cpu), sizes };
}

/**
 * The runner's own CPU per superstep: the memory store (no I/O), a full warm-up run first, then
 * ROUNDS runs, each with its CPU µs per superstep and its garbage collections (count and pause).
 */
async function cpuOnly(): Promise<void> {
  const registry = new ToolRegistry().register(
    'touch',
    (a: { i: number }) => `touched ${a.i}`,
  );
  const runner = new FlowRunner(new Executor(registry), {
    checkpoints: new MemoryCheckpointStore(),
    checkpointKey: KEY,
  });
  const flow = loopFlow();
  let gcs = 0;
  let gcMs = 0;
  const observer = new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) {
      gcs++;
      gcMs += entry.duration;
    }
  });
  observer.observe({ entryTypes: ['gc'] });
  await runner.run(flow, { i: 0, note: '' }, { runId: `warm-${suffix()}` });
  const n = SUPERSTEPS + 1;
  console.log(
    `runner CPU per superstep, memory store: ${SUPERSTEPS} supersteps x ${ROUNDS} rounds after a warm-up run\n`,
  );
  console.log(
    'round   cpu µs/superstep   wall µs/superstep   GCs   GC µs/superstep',
  );
  const cpu: number[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    // GC entries arrive asynchronously: let the previous round's land before counting.
    await new Promise((resolve) => setTimeout(resolve, 20));
    const [g0, gm0] = [gcs, gcMs];
    const c0 = process.cpuUsage();
    const t0 = process.hrtime.bigint();
    await runner.run(flow, { i: 0, note: '' }, { runId: `cpu-${suffix()}` });
    const wall = Number(process.hrtime.bigint() - t0) / 1e3 / n;
    const used = (cpuMs(c0) * 1000) / n;
    await new Promise((resolve) => setTimeout(resolve, 20));
    cpu.push(used);
    console.log(
      `${String(r + 1).padStart(5)} ${used.toFixed(1).padStart(18)} ${wall.toFixed(1).padStart(19)} ${String(gcs - g0).padStart(5)} ${(((gcMs - gm0) * 1000) / n).toFixed(1).padStart(17)}`,
    );
  }
  observer.disconnect();
  runner.close();
  console.log(
    `\nmedian ${median(cpu).toFixed(1)} µs, min ${Math.min(...cpu).toFixed(1)} µs CPU per superstep`,
  );
}

/**
 * Milliseconds for the store's own part of a superstep, without the runner: the `started` record,
 * then the checkpoint carrying the `done` record (the two writes the runner makes), with sealed
 * texts of the sizes the flow produced.
 */
async function storeOnly(
  store: CheckpointStore,
  sizes: number[],
): Promise<{ ms: number; cpu: number }> {
  const [started, done, checkpoint] = sizes.map((n) => 'x'.repeat(n)) as [
    string,
    string,
    string,
  ];
  const runId = `ops-${suffix()}`;
  const segment = 1;
  await store.save(
    {
      runId,
      step: 0,
      flow: 'ops',
      status: 'running',
      segment,
      sealed: checkpoint,
    },
    { owner: 'bench' },
  );
  const times: number[] = [];
  const cpu: number[] = [];
  let step = 0;
  for (let r = 0; r < ROUNDS; r++) {
    const c0 = process.cpuUsage();
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < SUPERSTEPS; i++) {
      step++;
      await store.recordCall(runId, segment, [
        { runId, segment, superstep: step, seq: 1, sealed: started },
      ]);
      await store.save(
        {
          runId,
          step,
          flow: 'ops',
          status: 'running',
          segment,
          sealed: checkpoint,
        },
        {
          calls: [{ runId, segment, superstep: step, seq: 2, sealed: done }],
          owner: 'bench',
          leaseExpiresAt: Date.now() + 15_000,
        },
      );
    }
    times.push(Number(process.hrtime.bigint() - t0) / 1e6 / SUPERSTEPS);
    cpu.push(cpuMs(c0) / SUPERSTEPS);
  }
  return { ms: median(times), cpu: median(cpu) };
}

/** Milliseconds for three raw single-row writes of the given sizes (median of ROUNDS rounds). */
async function floor(
  write: (payload: string, i: number) => Promise<void>,
  sizes: number[],
): Promise<number> {
  const payloads = sizes.map((n) => 'x'.repeat(n));
  for (let i = 0; i < 20; i++) await write(payloads[i % 3]!, i);
  const times: number[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < SUPERSTEPS; i++)
      for (const p of payloads) await write(p, i);
    times.push(Number(process.hrtime.bigint() - t0) / 1e6 / SUPERSTEPS);
  }
  return median(times);
}

interface Row {
  store: string;
  superstepMs: number;
  cpuMs: number;
  storeMs: number;
  storeCpuMs: number;
  floorMs: number;
  target?: number;
}

async function postgres(): Promise<Row> {
  const schema = `aa_bench_${suffix()}`;
  const ds = new DataSource({
    type: 'postgres',
    url: DATABASE_URL,
    poolSize: 4,
  });
  await ds.initialize();
  try {
    const store = new SQLCheckpointStore(ds, { schema });
    const { ms, cpu, sizes } = await durable(store);
    const { ms: storeMs, cpu: storeCpuMs } = await storeOnly(store, sizes);
    // Same server, same client path (the DataSource's pg pool, a prepared statement), and the
    // server's synchronous commit setting.
    await ds.query(
      `CREATE TABLE "${schema}".floor (id BIGSERIAL PRIMARY KEY, run_id VARCHAR(200), payload TEXT)`,
    );
    const pool = (ds.driver as unknown as { master: Pool }).master;
    const text = `INSERT INTO "${schema}".floor (run_id, payload) VALUES ($1, $2)`;
    const floorMs = await floor(
      (p, i) =>
        pool
          .query({ name: `floor_${schema}`, text, values: [`r${i}`, p] })
          .then(() => undefined),
      sizes,
    );
    return {
      store: 'postgres',
      superstepMs: ms,
      cpuMs: cpu,
      storeMs,
      storeCpuMs,
      floorMs,
      target: 1.0,
    };
  } finally {
    await ds.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await ds.destroy();
  }
}

async function redis(): Promise<Row> {
  const prefix = `aabench${suffix()}`;
  const store = new RedisCheckpointStore(() => new Redis(REDIS_URL), {
    prefix,
  });
  const raw = new Redis(REDIS_URL);
  try {
    const { ms, cpu, sizes } = await durable(store);
    const { ms: storeMs, cpu: storeCpuMs } = await storeOnly(store, sizes);
    const floorMs = await floor(
      (p, i) =>
        raw.set(`${prefix}:floor:${i}:${p.length}`, p).then(() => undefined),
      sizes,
    );
    return {
      store: 'redis',
      superstepMs: ms,
      cpuMs: cpu,
      storeMs,
      storeCpuMs,
      floorMs,
      target: 1.2,
    };
  } finally {
    await dropPrefix(raw, prefix);
    await store.close();
    raw.disconnect();
  }
}

async function sqlite(): Promise<Row> {
  const dir = mkdtempSync(join(tmpdir(), 'aa-bench-'));
  try {
    const store = new SQLiteCheckpointStore(join(dir, 'runs.db'));
    const { ms, cpu, sizes } = await durable(store);
    const { ms: storeMs, cpu: storeCpuMs } = await storeOnly(store, sizes);
    await store.close();
    // The same settings the store uses: WAL, synchronous = FULL, one transaction per write.
    const db = new Database(join(dir, 'floor.db'));
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = FULL');
    db.exec(
      'CREATE TABLE floor (id INTEGER PRIMARY KEY, run_id TEXT, payload TEXT)',
    );
    const insert = db.prepare(
      'INSERT INTO floor (run_id, payload) VALUES (?, ?)',
    );
    const floorMs = await floor(
      async (p, i) => void insert.run(`r${i}`, p),
      sizes,
    );
    db.close();
    return {
      store: 'sqlite',
      superstepMs: ms,
      cpuMs: cpu,
      storeMs,
      storeCpuMs,
      floorMs,
      target: 1.2,
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function memory(): Promise<Row> {
  const store = new MemoryCheckpointStore();
  const { ms, cpu, sizes } = await durable(store);
  const only = await storeOnly(store, sizes);
  return {
    store: 'memory',
    superstepMs: ms,
    cpuMs: cpu,
    storeMs: only.ms,
    storeCpuMs: only.cpu,
    floorMs: Number.NaN,
  };
}

async function main(): Promise<void> {
  if (CPU_ONLY) return cpuOnly();
  const benches: Record<string, () => Promise<Row>> = {
    postgres,
    redis,
    sqlite,
    memory,
  };
  console.log(
    `superstep with one tool call: ${SUPERSTEPS} supersteps x ${ROUNDS} rounds (median)\n`,
  );
  console.log(
    'superstep = the whole durable superstep through FlowRunner; store = its two store writes alone\n',
  );
  console.log(
    'store      superstep ms   cpu ms   store ms   cpu ms   floor ms   superstep/floor   store/floor   target',
  );
  const f = (x: number, w: number, d = 3) =>
    (Number.isNaN(x) ? '-' : x.toFixed(d)).padStart(w);
  const rows: Row[] = [];
  for (const name of STORES) {
    const bench = benches[name];
    if (!bench)
      throw new Error(
        `unknown store "${name}" (postgres, redis, sqlite, memory)`,
      );
    const r = await bench();
    rows.push(r);
    const ratio = r.superstepMs / r.floorMs;
    const verdict =
      r.target === undefined
        ? ''
        : `<= ${r.target}x ${ratio <= r.target ? 'met' : 'NOT MET'}`;
    console.log(
      `${r.store.padEnd(10)} ${f(r.superstepMs, 12)} ${f(r.cpuMs, 8)} ${f(r.storeMs, 10)} ${f(r.storeCpuMs, 8)} ${f(r.floorMs, 10)} ${f(ratio, 16, 2)}x ${f(r.storeMs / r.floorMs, 12, 2)}x   ${verdict}`,
    );
  }
  writeResults(
    'superstep',
    rows.flatMap((r) =>
      r.target === undefined
        ? []
        : [
            {
              measure: 'superstep / floor (end to end)',
              store: r.store,
              value: r.superstepMs / r.floorMs,
              unit: 'x',
              target: r.target,
            },
            {
              measure: 'store writes / floor',
              store: r.store,
              value: r.storeMs / r.floorMs,
              unit: 'x',
              target: r.target,
            },
          ],
    ),
  );
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
