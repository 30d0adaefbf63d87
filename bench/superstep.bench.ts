/**
 * Cost of one durable superstep with one tool call (a `started` record, a `done` record and a
 * checkpoint) per backend, as a ratio to the floor measured in the same run on the same server:
 * three raw single-row writes of the same size, each its own commit, with the same durability
 * settings and through the same client library. The node only makes its call, so it is
 * `callsFirst`: the runner writes the checkpoint together with the next superstep's `started`
 * record and the `done` record before it, one round trip per superstep.
 *
 *   npm run bench -- --suite superstep [--stores postgres,redis,sqlite,memory] [--supersteps 300]
 *                    [--rounds 3] [--shapes one,plain,parallel4,state1k,state100k]
 *
 * Besides the one-call superstep (issue 3's targets), other shapes of superstep, each against its
 * own floor (one raw single-row write per record it makes, same sizes): `plain`, the same node not
 * marked `callsFirst` (two round trips: the `started` record, then the checkpoint with the `done`
 * record); `parallel4`, one node making 4 tool calls at once (4 `started` + 4 `done` + a
 * checkpoint: 9 raw writes); `state1k` and `state100k`, the one-call superstep on a run whose state
 * also holds a 1 KB / 100 KB value the node does not change (every checkpoint still carries and
 * seals it). On the memory store it also reports the share of the runner's CPU spent sealing (V8
 * profiler, inclusive time of `seal`), and the runner's CPU with a 200 µs idle wait per store
 * write, as real I/O makes (see RESULTS.md); `--profile` also prints the profile's inclusive times.
 *
 * The `cpu ms` columns are the process's CPU time (user + system, `process.cpuUsage`) per
 * superstep, of the whole run through FlowRunner and of the store's writes alone: on a shared
 * machine steadier figures than wall time, and on a real backend they include the client library's
 * own work (and the kernel's, for the socket). Their difference is the runner's own CPU.
 *
 *   npm run bench -- --cpu [--supersteps 2000] [--rounds 5]
 *
 * only measures the runner's own CPU per superstep on the memory store (no I/O): a full warm-up
 * run, then ROUNDS runs, each reporting CPU µs per superstep and the garbage collections in it.
 */
import { join } from 'node:path';
import { Session } from 'node:inspector';
import { PerformanceObserver } from 'node:perf_hooks';
import Redis from 'ioredis';
import {
  Executor,
  Flow,
  FlowRunner,
  MemoryCheckpointStore,
  SQLCheckpointStore,
  SQLiteCheckpointStore,
  ToolRegistry,
  type CheckpointStore,
} from 'agent-adapter';
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
import { KEY, REDIS_URL, arg, median, suffix } from './lib/util';

const SUPERSTEPS = Number(arg('supersteps', '300'));
const ROUNDS = Number(arg('rounds', '3'));
const STORES = arg('stores', 'postgres,redis,sqlite,memory').split(',');
const CPU_ONLY = process.argv.includes('--cpu');

type State = { i: number; note: string; blob?: string };

/** A shape of superstep: the flow that repeats it SUPERSTEPS times, and the run's first state. */
interface Shape {
  name: string;
  label: string;
  flow(): Flow<State>;
  initial(i: number): State;
}

/**
 * A flow that loops one node SUPERSTEPS times; the node makes `calls` tool calls at once. It does
 * nothing else, so it is `callsFirst` (its superstep's checkpoint goes out with the next one's
 * `started` records) unless `plain` asks for the other write pattern (checkpoint, then `started`).
 */
function loopFlow(calls: number, plain = false): Flow<State> {
  return new Flow<State>(`bench-loop-${calls}${plain ? '-plain' : ''}`, {
    maxVisits: SUPERSTEPS + 1,
  })
    .node(
      'work',
      async (s, ctx) => {
        const notes =
          calls === 1
            ? [await ctx.call<string>('touch', { i: s.i, who: 'bench' })]
            : await Promise.all(
                Array.from({ length: calls }, (_, k) =>
                  ctx.call<string>('touch', { i: s.i, k, who: 'bench' }),
                ),
              );
        return { i: s.i + 1, note: notes.join(',') };
      },
      { callsFirst: !plain },
    )
    .route('work', (s) => (s.i < SUPERSTEPS ? 'work' : 'done'), [
      'work',
      'done',
    ])
    .node('done', () => ({}))
    .end('done');
}

const SHAPES: Record<string, Shape> = {
  one: {
    name: 'one',
    label: 'one tool call',
    flow: () => loopFlow(1),
    initial: (i) => ({ i, note: '' }),
  },
  plain: {
    name: 'plain',
    label: 'one tool call, node not callsFirst',
    flow: () => loopFlow(1, true),
    initial: (i) => ({ i, note: '' }),
  },
  parallel4: {
    name: 'parallel4',
    label: '4 parallel tool calls',
    flow: () => loopFlow(4),
    initial: (i) => ({ i, note: '' }),
  },
  state1k: {
    name: 'state1k',
    label: 'one call, 1 KB state',
    flow: () => loopFlow(1),
    initial: (i) => ({ i, note: '', blob: 'b'.repeat(1024) }),
  },
  state100k: {
    name: 'state100k',
    label: 'one call, 100 KB state',
    flow: () => loopFlow(1),
    initial: (i) => ({ i, note: '', blob: 'b'.repeat(100 * 1024) }),
  },
};
const SHAPE_NAMES = arg('shapes', Object.keys(SHAPES).join(','))
  .split(',')
  .filter(Boolean);
for (const name of SHAPE_NAMES)
  if (!SHAPES[name])
    throw new Error(
      `unknown shape "${name}" (${Object.keys(SHAPES).join(', ')})`,
    );

/** `store` with `before` called ahead of each write (`save`, `recordCall`) the runner makes. */
function onWrite(store: CheckpointStore, before: () => void): CheckpointStore {
  return new Proxy(store, {
    get(target, key, receiver) {
      const value: unknown = Reflect.get(target, key, receiver);
      if (
        (key === 'save' || key === 'recordCall') &&
        typeof value === 'function'
      )
        return (...args: unknown[]) => {
          before();
          return (value as (...a: unknown[]) => unknown).apply(target, args);
        };
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

/** A runner of the bench flows (their one tool, `touch`) on `store`. */
function benchRunner(store: CheckpointStore): FlowRunner {
  const registry = new ToolRegistry().register(
    'touch',
    (a: { i: number }) => `touched ${a.i}`,
  );
  return new FlowRunner(new Executor(registry), {
    checkpoints: store,
    checkpointKey: KEY,
  });
}

/** CPU milliseconds (user + system) since `start`. */
function cpuMs(start: NodeJS.CpuUsage): number {
  const d = process.cpuUsage(start);
  return (d.user + d.system) / 1000;
}

/** Wall and CPU milliseconds per superstep of one timed pass. */
interface Timing {
  ms: number;
  cpu: number;
}

/** One timed pass of a measurement (SUPERSTEPS supersteps, or their raw writes). */
type Pass = () => Promise<Timing>;

/** Times `work`, spread over `per` supersteps. */
async function timed(per: number, work: () => Promise<void>): Promise<Timing> {
  const c0 = process.cpuUsage();
  const t0 = process.hrtime.bigint();
  await work();
  return {
    ms: Number(process.hrtime.bigint() - t0) / 1e6 / per,
    cpu: cpuMs(c0) / per,
  };
}

/**
 * The durable flow of `shape` on `store`: a whole warm-up run (which also gives the sizes of the
 * records one superstep writes, its calls' records in order and then the checkpoint, and the store
 * writes per superstep), and a pass that is one more run.
 */
async function durable(
  raw: CheckpointStore,
  shape: Shape,
): Promise<{ pass: Pass; sizes: number[]; writes: number; close(): void }> {
  let writes = 0;
  const runner = benchRunner(onWrite(raw, () => writes++));
  const flow = shape.flow();
  // A whole run first: the first shape measured in a process ran up to 2x slower after a warm-up
  // of a few supersteps (JIT and heap still settling), whichever shape it was.
  const warm = `warm-${suffix()}`;
  await runner.run(flow, shape.initial(0), { runId: warm });
  const perSuperstep = writes / (SUPERSTEPS + 1);
  // A superstep in the middle of the run: its call records, then its checkpoint.
  const h = await raw.history(warm);
  const mid = 2;
  const sizes = [
    ...h.calls.filter((c) => c.superstep === mid).map((c) => c.sealed.length),
    h.checkpoints.find((c) => c.step === mid + 1)!.sealed.length,
  ];
  return {
    pass: () =>
      timed(SUPERSTEPS + 1, async () => {
        await runner.run(flow, shape.initial(0), {
          runId: `bench-${suffix()}`,
        });
      }),
    sizes,
    writes: perSuperstep,
    close: () => runner.close(),
  };
}

/**
 * The runner's own CPU per superstep: the memory store (no I/O), a full warm-up run first, then
 * ROUNDS runs, each with its CPU µs per superstep and its garbage collections (count and pause).
 */
async function cpuOnly(): Promise<void> {
  const runner = benchRunner(new MemoryCheckpointStore());
  const flow = SHAPES.one!.flow();
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
 * The store's own part of a superstep, without the runner, with sealed texts of the sizes the flow
 * produced: the writes the runner makes. For a callsFirst node, one: the checkpoint carrying this
 * superstep's `done` record and the next superstep's `started`. For a plain node, two: the
 * `started` record, then the checkpoint carrying the `done` record. A pass is SUPERSTEPS of them.
 */
async function storeOnly(
  store: CheckpointStore,
  sizes: number[],
  plain: boolean,
): Promise<Pass> {
  const [started, done, checkpoint] = sizes.map((n) => 'x'.repeat(n)) as [
    string,
    string,
    string,
  ];
  const runId = `ops-${suffix()}`;
  const segment = 1;
  const call = (superstep: number, seq: number, sealed: string) => ({
    runId,
    segment,
    superstep,
    seq,
    sealed,
  });
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
  if (!plain) await store.recordCall(runId, segment, [call(1, 1, started)]);
  let step = 0;
  return () =>
    timed(SUPERSTEPS, async () => {
      for (let i = 0; i < SUPERSTEPS; i++) {
        step++;
        if (plain)
          await store.recordCall(runId, segment, [call(step, 1, started)]);
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
            calls: plain
              ? [call(step, 2, done)]
              : [call(step, 2, done), call(step + 1, 1, started)],
            owner: 'bench',
            leaseExpiresAt: Date.now() + 15_000,
          },
        );
      }
    });
}

/** The floor: one raw single-row write per record, of the given sizes; a pass is SUPERSTEPS of them. */
async function floor(
  write: (payload: string, i: number) => Promise<void>,
  sizes: number[],
): Promise<Pass> {
  const payloads = sizes.map((n) => 'x'.repeat(n));
  for (let i = 0; i < 20; i++) await write(payloads[i % 3]!, i);
  return () =>
    timed(SUPERSTEPS, async () => {
      for (let i = 0; i < SUPERSTEPS; i++)
        for (const p of payloads) await write(p, i);
    });
}

/** A store to measure, the raw single-row write of its floor, and its cleanup. */
interface Backend {
  store: CheckpointStore;
  /** One raw single-row write, its own commit, same server, client and durability settings. */
  rawWrite?: (payload: string, i: number) => Promise<void>;
  target?: number;
  /** The server's own busy time so far, µs (Redis: the sum of INFO commandstats). */
  serverUs?: () => Promise<number>;
  cleanup(): Promise<void>;
}

async function postgres(): Promise<Backend> {
  const schema = benchId('aa_bench_');
  const ds = await postgresDataSource({ poolSize: 4 });
  const store = new SQLCheckpointStore(ds, { schema });
  // The store creates its schema on first use; the floor's table goes beside its tables.
  await store.head('none');
  await ds.query(pgFloorTable(schema));
  // Same server, same client path (the DataSource's pg pool, a prepared statement), and the
  // server's synchronous commit setting.
  const pool = pgPool(ds);
  const text = `INSERT INTO "${schema}".floor (run_id, payload) VALUES ($1, $2)`;
  return {
    store,
    rawWrite: (p, i) =>
      pool
        .query({ name: `floor_${schema}`, text, values: [`r${i}`, p] })
        .then(() => undefined),
    target: 1.0,
    async cleanup() {
      await dropSchema(schema, ds);
      await ds.destroy();
    },
  };
}

async function redis(): Promise<Backend> {
  const prefix = benchId('aabench');
  const store = redisStore(prefix);
  const raw = new Redis(REDIS_URL);
  return {
    store,
    rawWrite: (p, i) =>
      raw.set(`${prefix}:floor:${i}:${p.length}`, p).then(() => undefined),
    target: 1.2,
    serverUs: async () => {
      const info = await raw.info('commandstats');
      let us = 0;
      for (const m of info.matchAll(/,usec=(\d+),/g)) us += Number(m[1]);
      return us;
    },
    async cleanup() {
      await dropRedisPrefix(prefix, raw);
      await store.close();
      raw.disconnect();
    },
  };
}

async function sqlite(): Promise<Backend> {
  const { dir, remove } = tempDir('aa-bench-');
  const store = new SQLiteCheckpointStore(join(dir, 'runs.db'));
  // The same settings the store uses: WAL, synchronous = FULL, one transaction per write.
  const db = sqliteFloor(join(dir, 'floor.db'));
  const insert = db.prepare(
    'INSERT INTO floor (run_id, payload) VALUES (?, ?)',
  );
  return {
    store,
    rawWrite: async (p, i) => void insert.run(`r${i}`, p),
    target: 1.2,
    async cleanup() {
      await store.close();
      db.close();
      remove();
    },
  };
}

async function memory(): Promise<Backend> {
  return { store: new MemoryCheckpointStore(), cleanup: async () => {} };
}

/** One shape of superstep measured on one backend. */
interface Row {
  store: string;
  shape: string;
  superstepMs: number;
  cpuMs: number;
  /** Store writes (round trips) per superstep. */
  writes: number;
  /** Records per superstep: raw writes in the floor. */
  records: number;
  /** The store's writes alone (the one-call shapes only). */
  storeMs?: number;
  storeCpuMs?: number;
  floorMs: number;
  /** Median over the rounds of each round's superstep / floor (and store / floor). */
  ratio: number;
  storeRatio?: number;
  /** Server busy µs per superstep and per floor (three raw writes), where the server tells. */
  serverUs?: number;
  floorServerUs?: number;
  target?: number;
}

/**
 * One shape on one backend. The rounds interleave: each makes one pass of the flow, of the
 * store's writes alone and of the floor, back to back, and the ratios are the medians of each
 * round's own ratios. On a shared VM whose speed drifts over minutes, measuring all of one side
 * before the other moved a ratio by 30% or more between runs.
 */
async function measure(name: string, backend: Backend): Promise<Row[]> {
  const rows: Row[] = [];
  for (const shapeName of SHAPE_NAMES) {
    const shape = SHAPES[shapeName]!;
    const flow = await durable(backend.store, shape);
    const { sizes } = flow;
    const only =
      shape.name === 'one' || shape.name === 'plain'
        ? await storeOnly(backend.store, sizes, shape.name === 'plain')
        : undefined;
    const raw = backend.rawWrite
      ? await floor(backend.rawWrite, sizes)
      : undefined;
    const runs: Timing[] = [];
    const alone: Timing[] = [];
    const floors: Timing[] = [];
    // The server's figure counts every client's commands: meaningful on a quiet server only.
    let [flowBusy, floorBusy] = [0, 0];
    const busy = async (pass: Pass, add: (us: number) => void) => {
      const before = await backend.serverUs?.();
      const t = await pass();
      const after = await backend.serverUs?.();
      if (before !== undefined && after !== undefined) add(after - before);
      return t;
    };
    for (let r = 0; r < ROUNDS; r++) {
      runs.push(await busy(flow.pass, (us) => (flowBusy += us)));
      if (only) alone.push(await only());
      if (raw) floors.push(await busy(raw, (us) => (floorBusy += us)));
    }
    flow.close();
    const ms = (ts: Timing[]) => median(ts.map((t) => t.ms));
    const cpu = (ts: Timing[]) => median(ts.map((t) => t.cpu));
    const ratios = (ts: Timing[]) =>
      raw ? median(ts.map((t, i) => t.ms / floors[i]!.ms)) : Number.NaN;
    rows.push({
      store: name,
      shape: shape.name,
      superstepMs: ms(runs),
      cpuMs: cpu(runs),
      writes: flow.writes,
      records: sizes.length,
      ...(only && {
        storeMs: ms(alone),
        storeCpuMs: cpu(alone),
        storeRatio: ratios(alone),
      }),
      floorMs: raw ? ms(floors) : Number.NaN,
      ratio: ratios(runs),
      ...(backend.serverUs && {
        serverUs: flowBusy / (ROUNDS * (SUPERSTEPS + 1)),
        floorServerUs: floorBusy / (ROUNDS * SUPERSTEPS),
      }),
      ...(backend.target !== undefined &&
        shape.name === 'one' && { target: backend.target }),
    });
  }
  return rows;
}

/** A V8 CPU profile (the inspector's Profiler.Profile, the fields used here). */
interface CpuProfile {
  nodes: Array<{
    id: number;
    callFrame: { functionName: string; url: string };
    children?: number[];
  }>;
  samples: number[];
  timeDeltas: number[];
}

/**
 * The share of the runner's CPU spent sealing, on the memory store: the inclusive time of the
 * sealing function (`seal`: canonical JSON of the record and its HMAC) over the time of every
 * non-idle sample, from the V8 sampling profiler during one run of the one-call flow.
 */
async function sealingShare(): Promise<number> {
  const session = new Session();
  session.connect();
  const post = <T>(method: string, params?: object): Promise<T> =>
    new Promise((resolve, reject) =>
      session.post(method, params, (error, result) =>
        error ? reject(error) : resolve(result as T),
      ),
    );
  const runner = benchRunner(new MemoryCheckpointStore());
  const flow = SHAPES.one!.flow();
  await runner.run(flow, { i: 0, note: '' }, { runId: `warm-${suffix()}` });
  await post('Profiler.enable');
  await post('Profiler.setSamplingInterval', { interval: 50 });
  await post('Profiler.start');
  // At least 3,000 supersteps: a short profile is mostly the JIT warming up.
  for (let n = 0; n < Math.max(3000, SUPERSTEPS * ROUNDS); n += SUPERSTEPS)
    await runner.run(flow, { i: 0, note: '' }, { runId: `seal-${suffix()}` });
  const { profile } = await post<{ profile: CpuProfile }>('Profiler.stop');
  session.disconnect();
  runner.close();
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes)
    for (const c of n.children ?? []) parent.set(c, n.id);
  const idle = new Set(['(idle)', '(program)']);
  let total = 0;
  // Inclusive time per function (name and file), each counted once per sample.
  const inclusive = new Map<string, number>();
  profile.samples.forEach((id, i) => {
    const dt = profile.timeDeltas[i] ?? 0;
    if (idle.has(byId.get(id)?.callFrame.functionName ?? '')) return;
    total += dt;
    const seen = new Set<string>();
    for (
      let at: number | undefined = id;
      at !== undefined;
      at = parent.get(at)
    ) {
      const { functionName, url } = byId.get(at)!.callFrame;
      const name = `${functionName || '(anonymous)'} ${url.split('/').pop() ?? ''}`;
      if (seen.has(name)) continue;
      seen.add(name);
      inclusive.set(name, (inclusive.get(name) ?? 0) + dt);
    }
  });
  if (process.argv.includes('--profile'))
    for (const [name, t] of [...inclusive]
      .sort((a, b) => b[1] - a[1])
      .slice(0, 50))
      console.log(`${((t / total) * 100).toFixed(1).padStart(6)}%  ${name}`);
  return total ? (inclusive.get('seal seal.ts') ?? 0) / total : Number.NaN;
}

/**
 * The runner's CPU per superstep on the memory store with a synchronous idle wait of `napUs` in
 * each store write (the thread sleeps, as it does while real I/O is in flight): the same code,
 * the same work; any difference is what sleeping between writes costs the CPU (caches, a halted
 * virtual CPU).
 */
async function napCpu(napUs: number): Promise<number> {
  const cell = new Int32Array(new SharedArrayBuffer(4));
  const nap = () => {
    if (napUs > 0) Atomics.wait(cell, 0, 0, napUs / 1000);
  };
  const napping = onWrite(new MemoryCheckpointStore(), nap);
  const flow = await durable(napping, SHAPES.one!);
  const cpu: number[] = [];
  for (let r = 0; r < ROUNDS; r++) cpu.push((await flow.pass()).cpu);
  flow.close();
  return median(cpu);
}

async function main(): Promise<void> {
  if (CPU_ONLY) return cpuOnly();
  const backends: Record<string, () => Promise<Backend>> = {
    postgres,
    redis,
    sqlite,
    memory,
  };
  console.log(
    `supersteps: ${SUPERSTEPS} supersteps x ${ROUNDS} rounds (median); shapes ${SHAPE_NAMES.join(', ')}\n`,
  );
  console.log(
    'superstep = the whole durable superstep through FlowRunner; store = its store writes alone (one-call shapes);\nfloor = one raw single-row write per record of the superstep; writes = store round trips per superstep\n',
  );
  console.log(
    'store      shape        superstep ms   cpu ms   store ms   cpu ms   writes   floor ms (raw)   superstep/floor   store/floor   target',
  );
  const f = (x: number | undefined, w: number, d = 3) =>
    (x === undefined || Number.isNaN(x) ? '-' : x.toFixed(d)).padStart(w);
  const rows: Row[] = [];
  for (const name of STORES) {
    const make = backends[name];
    if (!make)
      throw new Error(
        `unknown store "${name}" (postgres, redis, sqlite, memory)`,
      );
    const backend = await make();
    try {
      for (const r of await measure(name, backend)) {
        rows.push(r);
        const ratio = r.ratio;
        const verdict =
          r.target === undefined
            ? ''
            : `<= ${r.target}x ${ratio <= r.target ? 'met' : 'NOT MET'}`;
        console.log(
          `${r.store.padEnd(10)} ${r.shape.padEnd(10)} ${f(r.superstepMs, 14)} ${f(r.cpuMs, 8)} ${f(r.storeMs, 10)} ${f(r.storeCpuMs, 8)} ${f(r.writes, 8, 2)} ${f(r.floorMs, 10)} (${r.records}) ${f(ratio, 16, 2)}x ${f(r.storeRatio, 12, 2)}x   ${verdict}`,
        );
      }
    } finally {
      await backend.cleanup();
    }
  }
  for (const r of rows)
    if (r.serverUs !== undefined)
      console.log(
        `${r.store} ${r.shape}: the server was busy ${r.serverUs.toFixed(0)} µs per superstep, ${r.floorServerUs!.toFixed(0)} µs per floor (${r.records} raw writes)`,
      );
  const measures: Measure[] = [];
  for (const r of rows) {
    const label = SHAPES[r.shape]!.label;
    if (!Number.isNaN(r.floorMs))
      measures.push({
        measure:
          r.shape === 'one'
            ? 'superstep / floor (end to end)'
            : `superstep / floor: ${label}`,
        store: r.store,
        value: r.ratio,
        unit: 'x',
        ...(r.target !== undefined && { target: r.target }),
      });
    if (r.storeRatio !== undefined && !Number.isNaN(r.storeRatio))
      measures.push({
        measure:
          r.shape === 'one'
            ? 'store writes / floor'
            : `store writes / floor: ${label}`,
        store: r.store,
        value: r.storeRatio,
        unit: 'x',
        ...(r.target !== undefined && { target: r.target }),
      });
    if (r.store === 'memory')
      measures.push({
        measure: `runner CPU per superstep: ${label}`,
        store: 'memory',
        value: r.cpuMs,
        unit: 'ms',
      });
  }
  if (STORES.includes('memory')) {
    const share = await sealingShare();
    const [hot, cold] = [await napCpu(0), await napCpu(200)];
    console.log(
      `\nmemory store, one-call superstep: sealing is ${(share * 100).toFixed(1)}% of the runner's CPU (V8 profiler, inclusive time of seal)`,
    );
    console.log(
      `runner CPU per superstep: ${(hot * 1000).toFixed(0)} µs; with a 200 µs idle wait in each store write: ${(cold * 1000).toFixed(0)} µs (${(cold / hot).toFixed(2)}x)`,
    );
    measures.push(
      {
        measure: 'share of runner CPU spent sealing',
        store: 'memory',
        value: share * 100,
        unit: '%',
      },
      {
        measure: 'runner CPU, 200 µs idle per write / none',
        store: 'memory',
        value: cold / hot,
        unit: 'x',
      },
    );
  }
  writeResults('superstep', measures);
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
