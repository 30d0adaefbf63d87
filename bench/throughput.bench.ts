/**
 * Throughput of whole durable runs (issue 7, item 7): runs/s and p50/p99 run latency with 1, 4,
 * 16 and 64 runs in flight, spread over 1, 2 and 4 worker processes that share one store.
 * Target: 16 runs in flight give at least 3x the throughput of one run at a time.
 *
 *   npm run bench -- --suite throughput [--stores postgres,redis[,sqlite]] [--runs 160]
 *       [--concurrency 1,4,16,64] [--processes 1,2,4] [--steps 4] [--tool-ms 0]
 *       [--no-floor] [--pool N] [--profile DIR] [--timeout 600] [--calls-first]
 *
 * A run is a small support-ticket flow through `FlowRunner.run`, from start to its end: `intake`
 * (one tool call), `kb` + `orders` in parallel (two calls in one superstep), `steps - 3` supersteps
 * of `draft` (one call each) and `send` (one call, not idempotent): `--steps 4` is 4 supersteps, 5
 * tool calls, 9 store writes (the start checkpoint, then per superstep the `started` record(s) and
 * the checkpoint carrying the `done` records). Tools answer at once unless `--tool-ms` gives them
 * a latency, so the default measures what the library and the store cost, nothing else.
 * `--calls-first` marks the nodes `callsFirst` (they only make their calls): each checkpoint then
 * goes out with the next superstep's `started` records, and a run makes 6 store writes, not 9.
 *
 * A cell is (store, p processes, c runs in flight), skipped when p > c. Its `--runs` runs (at least
 * c) are split over the p worker processes, each of which keeps its share of the c runs in flight
 * until its share is done. Every worker is a real child process with its own store client (its
 * own TypeORM DataSource with a pool of its runs in flight + 1, or `--pool`; its own Redis
 * connection), its own FlowRunner and worker id. Before each cell every worker runs one round of
 * its runs in flight as a warm-up (JIT, pool connections, prepared statements); then the parent
 * starts all of them at once: runs/s = the cell's runs over the wall time from that common start
 * to the last worker's last finish; p50/p99 over every run's own latency (start to result).
 *
 * Columns: `speedup` is runs/s over the same store's (and mode's) c=1, p=1 cell, which is measured
 * first and again after the other p=1 cells (the faster of the two counts); `calls/run` the
 * store calls per run (writes, lease renewals, any read); `cpu ms/run` the worker processes' own
 * CPU (user + system, their GC threads included) per run; `server ms/run` the server's CPU per
 * run (Postgres: this suite's backends, read from /proc when the server is local; Redis: the
 * whole server, INFO cpu); `busy` the whole machine's CPU use during the cell (every core, other
 * processes included: a figure taken at 100% busy with other work running is not the library's).
 *
 * Two comparison modes beside the flow, at c=1 and c=16 (`--no-floor` skips them): `store` makes
 * the store writes of one real run again (the same sealed records under a new run id) straight on
 * the store, without the runner: the store's and its driver's part; `floor` makes, per "run", the
 * same 9 writes of the same sizes as raw single-row writes (Postgres: INSERT through the same pg
 * pool, a prepared statement; Redis: SET on a connection of its own; SQLite: INSERT with WAL,
 * synchronous = FULL), one after the other: what the server and the machine allow with no library
 * at all. The summary also gives the CPU ceiling: the cores over the CPU one run costs at c=16
 * (worker + server).
 *
 * The stores run with their normal settings and the servers' own durability settings, which are
 * printed (Postgres `synchronous_commit` as every worker's session sees it; Redis `appendonly` /
 * `appendfsync`). Postgres gets a fresh schema, Redis a fresh key prefix, SQLite (if asked for)
 * a temporary directory; all are removed at the end, also on failure or Ctrl-C, and no worker
 * outlives the suite. `--profile DIR` runs the workers with `--cpu-prof` (profiles in DIR).
 *
 * The defaults take about 1-2 minutes on a 2-core machine. A steadier measurement, on a quiet
 * machine (about 10 minutes on 2 cores):
 *
 *   npm run bench -- --suite throughput --runs 1000
 */
import { readFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import Database from 'better-sqlite3';
import Redis from 'ioredis';
import {
  Executor,
  Flow,
  FlowRunner,
  SQLCheckpointStore,
  SQLiteCheckpointStore,
  ToolRegistry,
  type CallRecord,
  type CheckpointRecord,
  type CheckpointStore,
  type SaveOptions,
} from 'agent-adapter';
import { ChildHarness, killAllNow } from '../test/utils/child-process';
import { spawnTs } from '../test/utils/ts-child';
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
import { KEY, REDIS_URL, arg, suffix } from './lib/util';

const ROOT = join(__dirname, '..');
/** How long the parent waits for a worker's next message (a cell's runs included). */
const TIMEOUT_S = Number(arg('timeout', '600'));
/** Set in a worker process's environment (JSON of `WorkerConfig`). */
const WORKER_ENV = 'AA_THROUGHPUT_WORKER';

const STORE_KINDS = ['postgres', 'redis', 'sqlite'] as const;
type StoreKind = (typeof STORE_KINDS)[number];

// ---------------------------------------------------------------------------------------------
// The flow and its tools (the same in every worker)

interface Ticket {
  ticket: string;
  customer: string;
  kb: string;
  orders: string;
  drafts: number;
  reply: string;
  sent: string;
}

/** intake → kb + orders (parallel) → draft × (steps - 3) → send. */
function supportFlow(steps: number, callsFirst = false): Flow<Ticket> {
  const drafts = steps - 3;
  const options = { callsFirst };
  const flow = new Flow<Ticket>('bench-support', { maxVisits: steps + 1 })
    .node('intake', async (t, ctx) => ({
      customer: await ctx.call<string>('lookup_customer', {
        ticket: t.ticket,
      }),
    }))
    .node(
      'kb',
      async (t, ctx) => ({
        kb: await ctx.call<string>('search_kb', { q: t.ticket, top: 3 }),
      }),
      options,
    )
    .node(
      'orders',
      async (t, ctx) => ({
        orders: await ctx.call<string>('recent_orders', {
          customer: t.customer,
        }),
      }),
      options,
    )
    .node(
      'send',
      async (t, ctx) => ({
        sent: await ctx.call<string>('send_reply', {
          customer: t.customer,
          body: t.reply,
        }),
      }),
      options,
    )
    .edge('intake', 'kb')
    .edge('intake', 'orders')
    .end('send');
  if (drafts === 0) return flow.edge('kb', 'send').edge('orders', 'send');
  return flow
    .node(
      'draft',
      async (t, ctx) => ({
        drafts: t.drafts + 1,
        reply: await ctx.call<string>('draft_reply', {
          ticket: t.ticket,
          kb: t.kb,
          orders: t.orders,
          revision: t.drafts + 1,
        }),
      }),
      options,
    )
    .edge('kb', 'draft')
    .edge('orders', 'draft')
    .route('draft', (t) => (t.drafts < drafts ? 'draft' : 'send'), [
      'draft',
      'send',
    ]);
}

function supportTools(toolMs: number): ToolRegistry {
  const wait = toolMs > 0 ? () => sleep(toolMs) : () => undefined;
  const text = (s: string) =>
    `${s} — ${'Lorem ipsum dolor sit amet, consectetur adipiscing elit. '.repeat(3)}`;
  return new ToolRegistry()
    .register(
      'lookup_customer',
      async (a: { ticket: string }) => {
        await wait();
        return `customer of ${a.ticket.slice(0, 12)}`;
      },
      { idempotent: true },
    )
    .register(
      'search_kb',
      async (a: { q: string }) => {
        await wait();
        return text(`3 articles for ${a.q.slice(0, 12)}`);
      },
      { idempotent: true },
    )
    .register(
      'recent_orders',
      async (a: { customer: string }) => {
        await wait();
        return text(`2 orders of ${a.customer}`);
      },
      { idempotent: true },
    )
    .register(
      'draft_reply',
      async (a: { revision: number }) => {
        await wait();
        return text(`draft ${a.revision}`);
      },
      { idempotent: true },
    )
    .register('send_reply', async (a: { customer: string }) => {
      await wait();
      return `sent to ${a.customer}`;
    });
}

function ticketInput(i: number): Partial<Ticket> {
  return {
    ticket: `Ticket ${i}: my order arrived damaged, the box was open and one item is missing.`,
    customer: '',
    kb: '',
    orders: '',
    drafts: 0,
    reply: '',
    sent: '',
  };
}

// ---------------------------------------------------------------------------------------------
// Parent ↔ worker messages

interface WorkerConfig {
  store: StoreKind;
  /** Postgres schema, Redis prefix or SQLite directory. */
  location: string;
  pool: number;
  workerId: string;
  steps: number;
  toolMs: number;
  callsFirst: boolean;
}

/**
 * `flow` runs the flow; `store` makes one run's store writes again (recorded from a real run: the
 * same records, a new run id) straight on the store, without the runner; `floor` makes, per
 * "run", the same number of raw single-row writes of the same sizes, through the same client.
 */
type Mode = 'flow' | 'store' | 'floor';

type ToWorker =
  | { type: 'cell'; mode: Mode; inFlight: number; runs: number }
  | { type: 'go' }
  | { type: 'exit' };

type FromWorker =
  | { type: 'ready'; durability: string; writes: number[] }
  | { type: 'armed' }
  | {
      type: 'done';
      latencies: number[];
      cpuMs: number;
      /** Store calls (every method, lease renewals included) made during the cell. */
      storeCalls: number;
    }
  | { type: 'error'; message: string };

// ---------------------------------------------------------------------------------------------
// Worker process

interface WorkerStore {
  store: CheckpointStore;
  durability: string;
  /** One raw single-row write of `payload` (the floor), with the store's durability settings. */
  rawWrite(key: string, payload: string): Promise<void>;
  close(): Promise<void>;
}

async function openWorkerStore(config: WorkerConfig): Promise<WorkerStore> {
  switch (config.store) {
    case 'postgres': {
      const ds = await postgresDataSource({
        poolSize: config.pool,
        // The parent finds this suite's backends by it (their CPU: see serverCpu).
        applicationName: config.location,
      });
      const store = new SQLCheckpointStore(ds, { schema: config.location });
      const [row] = await ds.query<Array<{ synchronous_commit: string }>>(
        'SHOW synchronous_commit',
      );
      // The floor as the superstep suite makes it: the DataSource's pg pool, a prepared statement.
      const pool = pgPool(ds);
      const text = `INSERT INTO "${config.location}".floor (run_id, payload) VALUES ($1, $2)`;
      return {
        store,
        durability: `synchronous_commit=${row?.synchronous_commit ?? '?'}`,
        rawWrite: (key, payload) =>
          pool
            .query({ name: 'aa_floor', text, values: [key, payload] })
            .then(() => undefined),
        close: () => ds.destroy(),
      };
    }
    case 'redis': {
      const store = redisStore(config.location);
      const raw = new Redis(REDIS_URL);
      return {
        store,
        durability: '',
        rawWrite: (key, payload) =>
          raw
            .set(`${config.location}:floor:${key}`, payload)
            .then(() => undefined),
        close: async () => {
          await store.close();
          await raw.quit();
        },
      };
    }
    case 'sqlite': {
      const store = new SQLiteCheckpointStore(join(config.location, 'runs.db'));
      // The store's settings: WAL, synchronous = FULL, one transaction per write.
      const db = new Database(join(config.location, 'floor.db'), {
        timeout: 10_000,
      });
      db.pragma('synchronous = FULL');
      const insert = db.prepare(
        'INSERT INTO floor (run_id, payload) VALUES (?, ?)',
      );
      return {
        store,
        durability: '',
        rawWrite: (key, payload) => {
          insert.run(key, payload);
          return Promise.resolve();
        },
        close: async () => {
          db.close();
          await store.close();
        },
      };
    }
  }
}

/** One store write of a run, as the runner made it (replayed by the `store` mode). */
type Write =
  | { method: 'save'; cp: CheckpointRecord; options: SaveOptions }
  | { method: 'recordCall'; segment: number; records: CallRecord[] };

/** Bytes of sealed text a write carries: the checkpoint and/or the call records. */
function writeSize(w: Write): number {
  const records = w.method === 'save' ? (w.options.calls ?? []) : w.records;
  return (
    (w.method === 'save' ? w.cp.sealed.length : 0) +
    records.reduce((n, r) => n + r.sealed.length, 0)
  );
}

/** The store, with its calls counted and (while `trace` is set) its writes noted. */
function countedStore(store: CheckpointStore): {
  store: CheckpointStore;
  calls(): number;
  trace(on: boolean): Write[];
} {
  let calls = 0;
  let writes: Write[] | undefined;
  const proxy = new Proxy(store, {
    get(target, prop) {
      const value: unknown = Reflect.get(target, prop, target);
      if (typeof value !== 'function') return value;
      const method = value as (...args: unknown[]) => unknown;
      return (...args: unknown[]) => {
        calls++;
        if (writes && prop === 'save') {
          const [cp, options = {}] = args as [CheckpointRecord, SaveOptions?];
          writes.push({ method: 'save', cp, options });
        } else if (writes && prop === 'recordCall') {
          const [, segment, records] = args as [string, number, CallRecord[]];
          writes.push({ method: 'recordCall', segment, records });
        }
        return method.apply(target, args);
      };
    },
  });
  return {
    store: proxy,
    calls: () => calls,
    trace(on) {
      const out = writes ?? [];
      writes = on ? [] : undefined;
      return out;
    },
  };
}

async function worker(config: WorkerConfig): Promise<void> {
  const send = (m: FromWorker) =>
    new Promise<void>((resolve, reject) =>
      process.send!(m, undefined, {}, (e) => (e ? reject(e) : resolve())),
    );
  // The parent gone (killed, crashed): nothing to report to, stop at once.
  process.on('disconnect', () => process.exit(0));
  const opened = await openWorkerStore(config);
  const counted = countedStore(opened.store);
  const runner = new FlowRunner(new Executor(supportTools(config.toolMs)), {
    checkpoints: counted.store,
    checkpointKey: KEY,
    workerId: config.workerId,
  });
  const flow = supportFlow(config.steps, config.callsFirst);
  let n = 0;
  const runOne = async (): Promise<number> => {
    const i = n++;
    const t0 = performance.now();
    const r = await runner.run(flow, ticketInput(i), {
      runId: `${config.workerId}-${i}`,
    });
    const ms = performance.now() - t0;
    if (r.status !== 'done')
      throw new Error(
        `run ${r.runId} ended ${r.status}: ${r.error?.message ?? ''}`,
      );
    return ms;
  };
  // The writes of one run, in order: replayed as they are (store) and as raw writes (floor).
  await runOne();
  counted.trace(true);
  await runOne();
  const traced = counted.trace(false);
  const writes = traced.map(writeSize);
  const payloads = writes.map((size) => 'x'.repeat(size));
  /** The run's store writes again, under a new run id, without the runner. */
  const storeOne = async (): Promise<number> => {
    const runId = `${config.workerId}-s${n++}`;
    const t0 = performance.now();
    for (const w of traced) {
      const records = (
        w.method === 'save' ? (w.options.calls ?? []) : w.records
      ).map((r) => ({ ...r, runId }));
      if (w.method === 'recordCall')
        await counted.store.recordCall(runId, w.segment, records);
      else
        await counted.store.save(
          { ...w.cp, runId },
          {
            ...w.options,
            ...(records.length && { calls: records }),
            leaseExpiresAt: Date.now() + 15_000,
          },
        );
    }
    return performance.now() - t0;
  };
  const floorOne = async (): Promise<number> => {
    const i = n++;
    const t0 = performance.now();
    for (const [j, payload] of payloads.entries())
      await opened.rawWrite(`${config.workerId}-${i}-${j}`, payload);
    return performance.now() - t0;
  };
  /** `runs` runs, `inFlight` at a time; their latencies. */
  const drive = async (
    mode: Mode,
    inFlight: number,
    runs: number,
  ): Promise<number[]> => {
    const one = { flow: runOne, store: storeOne, floor: floorOne }[mode];
    const latencies: number[] = [];
    let left = runs;
    await Promise.all(
      Array.from({ length: Math.min(inFlight, runs) }, async () => {
        while (left > 0) {
          left--;
          latencies.push(await one());
        }
      }),
    );
    return latencies;
  };
  // Warm-up (JIT, heap), side by side and alone: after ten runs only, the first cell cost up to
  // 1.5x the CPU per run of the same cell measured a minute later.
  for (const [mode, ms] of [
    ['flow', 1500],
    ['store', 500],
    ['floor', 500],
  ] as const) {
    for (const t0 = performance.now(); performance.now() - t0 < ms;)
      await drive(mode, 4, 20);
    for (const t0 = performance.now(); performance.now() - t0 < ms;)
      await drive(mode, 1, 10);
  }
  await send({ type: 'ready', durability: opened.durability, writes });

  let cell: { mode: Mode; inFlight: number; runs: number } | undefined;
  const handle = async (m: ToWorker): Promise<void> => {
    switch (m.type) {
      case 'cell':
        cell = m;
        // One round at this concurrency: every pool connection open and its statements prepared.
        await drive(m.mode, m.inFlight, m.inFlight);
        await send({ type: 'armed' });
        return;
      case 'go': {
        if (!cell) throw new Error('go before cell');
        const c0 = process.cpuUsage();
        const s0 = counted.calls();
        const latencies = await drive(cell.mode, cell.inFlight, cell.runs);
        const c = process.cpuUsage(c0);
        await send({
          type: 'done',
          latencies,
          cpuMs: (c.user + c.system) / 1000,
          storeCalls: counted.calls() - s0,
        });
        return;
      }
      case 'exit':
        runner.close();
        await opened.close();
        process.exit(0);
    }
  };
  // Messages come one at a time (the parent waits for each answer), but keep them in order anyway.
  let chain = Promise.resolve();
  process.on('message', (m: ToWorker) => {
    chain = chain.then(() => handle(m));
    chain.catch(async (error: unknown) => {
      await send({
        type: 'error',
        message:
          error instanceof Error
            ? (error.stack ?? error.message)
            : String(error),
      }).catch(() => undefined);
      process.exit(1);
    });
  });
}

// ---------------------------------------------------------------------------------------------
// Parent: worker processes, cells, the table and the results

/** What a worker process gets transpiled on its snapshot fd (see test/utils/ts-child.ts). */
const SNAPSHOT_FILES = [
  __filename,
  join(__dirname, 'lib', 'results.ts'),
  join(__dirname, 'lib', 'util.ts'),
  join(__dirname, 'lib', 'stores.ts'),
  join(ROOT, 'test', 'utils', 'redis-keys.ts'),
  join(ROOT, 'test', 'utils', 'services.ts'),
  join(ROOT, 'test', 'utils', 'ts-child.ts'),
  join(ROOT, 'test', 'utils', 'child-process.ts'),
];

/** Set by Ctrl-C or SIGTERM: the suite stops at the next step and cleans up. */
let interrupted = false;
process.on('exit', killAllNow);

class WorkerProcess extends ChildHarness {
  private readonly inbox: FromWorker[] = [];
  private waiting?: {
    resolve: (m: FromWorker) => void;
    reject: (e: Error) => void;
  };
  private failure?: Error;

  constructor(readonly config: WorkerConfig) {
    const profile = arg('profile', '');
    super(
      spawnTs(__filename, [], {
        env: {
          ...process.env,
          NODE_OPTIONS: '',
          [WORKER_ENV]: JSON.stringify(config),
        },
        files: SNAPSHOT_FILES,
        nodeArgs: profile ? ['--cpu-prof', `--cpu-prof-dir=${profile}`] : [],
        stdio: ['ignore', 'inherit', 'pipe'],
        ipc: true,
      }),
      { name: config.workerId },
    );
    // A failed spawn or a send to a worker that is gone: this worker has failed (never a crash).
    this.child.on('error', (error) => this.fail(error));
    this.child.on('message', (m: FromWorker) => {
      if (m.type === 'error')
        return this.fail(new Error(`${config.workerId}: ${m.message}`));
      if (this.waiting) {
        const w = this.waiting;
        this.waiting = undefined;
        w.resolve(m);
      } else this.inbox.push(m);
    });
    this.child.on('exit', (code, signal) => {
      const stderr = this.stderr.slice(-4000);
      this.fail(
        new Error(
          `${config.workerId} exited (${code ?? signal})${stderr ? `:\n${stderr}` : ''}`,
        ),
      );
    });
  }

  send(m: ToWorker): void {
    this.child.send(m);
  }

  /** The worker's next message, which must be of `type`. */
  async receive<T extends FromWorker['type']>(
    type: T,
  ): Promise<Extract<FromWorker, { type: T }>> {
    let m = this.inbox.shift();
    if (m === undefined) {
      if (this.failure) throw this.failure;
      let timer: NodeJS.Timeout | undefined;
      m = await new Promise<FromWorker>((resolve, reject) => {
        this.waiting = { resolve, reject };
        // A worker stuck on an unreachable server: give up instead of waiting for ever.
        timer = setTimeout(
          () =>
            this.fail(
              new Error(
                `${this.config.workerId}: no "${type}" within ${TIMEOUT_S} s`,
              ),
            ),
          TIMEOUT_S * 1000,
        );
      }).finally(() => clearTimeout(timer));
    }
    if (m.type !== type)
      throw new Error(
        `${this.config.workerId}: expected "${type}", got "${m.type}"`,
      );
    return m as Extract<FromWorker, { type: T }>;
  }

  private fail(error: Error): void {
    this.failure ??= error;
    const w = this.waiting;
    this.waiting = undefined;
    w?.reject(this.failure);
  }

  /** Asks it to exit; kills it if it has not within 5 s. */
  async stop(): Promise<void> {
    if (!this.running) return;
    if (this.child.connected) this.send({ type: 'exit' });
    const timer = setTimeout(() => this.child.kill('SIGKILL'), 5000);
    await this.exited;
    clearTimeout(timer);
  }
}

interface Cell {
  store: StoreKind;
  mode: Mode;
  processes: number;
  concurrency: number;
  runs: number;
  wallMs: number;
  latencies: number[];
  cpuMs: number;
  /** Store calls per run (flow), raw writes per run (floor). */
  callsPerRun: number;
  /** The server's CPU ms during the cell (NaN when not readable). */
  serverMs: number;
  /** Machine CPU use during the cell, 0-1 (every core). */
  busy: number;
}

function percentile(sorted: number[], p: number): number {
  if (!sorted.length) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil(p * sorted.length) - 1)]!;
}

/** [idle, total] CPU ms of every core since boot. */
function machineCpu(): [number, number] {
  let idle = 0;
  let total = 0;
  for (const c of cpus()) {
    idle += c.times.idle;
    total +=
      c.times.user + c.times.nice + c.times.sys + c.times.idle + c.times.irq;
  }
  return [idle, total];
}

/** Splits `n` into `parts` near-equal whole shares. */
function split(n: number, parts: number): number[] {
  return Array.from(
    { length: parts },
    (_, i) => Math.floor(n / parts) + (i < n % parts ? 1 : 0),
  );
}

interface Location {
  location: string;
  /** The server's durability settings, as text for the conditions line. */
  conditions: string;
  /**
   * CPU time (ns) so far of the server processes that work for this suite, by process; undefined
   * when it cannot be read (a remote Postgres, SQLite).
   */
  serverCpu(): Promise<Map<string, number> | undefined>;
  drop(): Promise<void>;
}

/** On-CPU nanoseconds of a local process so far (Linux /proc/<pid>/schedstat), if readable. */
function processCpuNs(pid: number): number | undefined {
  try {
    return Number(readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ')[0]);
  } catch {
    return undefined;
  }
}

/** Milliseconds of server CPU between two `serverCpu` samples (new processes count in full). */
function serverCpuMs(
  before: Map<string, number> | undefined,
  after: Map<string, number> | undefined,
): number {
  if (!before || !after || !after.size) return Number.NaN;
  let ns = 0;
  for (const [id, t] of after) ns += t - (before.get(id) ?? 0);
  return ns / 1e6;
}

async function prepare(kind: StoreKind): Promise<Location> {
  const id = benchId('aa_tput_');
  switch (kind) {
    case 'postgres': {
      const ds = await postgresDataSource({ poolSize: 1 });
      const drop = async () => {
        await dropSchema(id, ds);
        await ds.destroy();
      };
      try {
        // The tables, made once here rather than by every worker at once.
        await new SQLCheckpointStore(ds, { schema: id }).head('none');
        await ds.query(pgFloorTable(id));
        const settings = await ds.query<
          Array<{ name: string; setting: string }>
        >(
          `SELECT name, setting FROM pg_settings WHERE name IN ('synchronous_commit', 'fsync', 'wal_sync_method', 'max_connections') ORDER BY name`,
        );
        const [version] = await ds.query<Array<{ server_version: string }>>(
          'SHOW server_version',
        );
        // This suite's backends (the workers' connections carry the schema as application_name),
        // read from /proc when the server is on this host. Background processes (WAL writer,
        // checkpointer) are not counted.
        const serverCpu = async () => {
          const rows = await ds.query<Array<{ pid: number }>>(
            'SELECT pid FROM pg_stat_activity WHERE application_name = $1',
            [id],
          );
          const out = new Map<string, number>();
          for (const { pid } of rows) {
            const ns = processCpuNs(pid);
            if (ns === undefined) return undefined;
            out.set(String(pid), ns);
          }
          return out;
        };
        return {
          location: id,
          serverCpu,
          conditions: `PostgreSQL ${version?.server_version ?? '?'}: ${settings.map((s) => `${s.name}=${s.setting}`).join(', ')}`,
          drop,
        };
      } catch (error) {
        await drop();
        throw error;
      }
    }
    case 'redis': {
      const prefix = id.replace(/_/g, '');
      const admin = new Redis(REDIS_URL);
      const config = async (name: string) => {
        try {
          const reply = await admin.config('GET', name);
          return `${name}=${reply[1] ?? '?'}`;
        } catch {
          return `${name}=? (CONFIG GET refused)`;
        }
      };
      const info = await admin.info('server');
      const version = /redis_version:(\S+)/.exec(info)?.[1] ?? '?';
      const settings = [
        await config('appendonly'),
        await config('appendfsync'),
        await config('save'),
      ];
      return {
        location: prefix,
        // The whole server's CPU (INFO cpu): on a shared server it includes other clients' work.
        serverCpu: async () => {
          const cpu = await admin.info('cpu');
          const sec = (name: string) =>
            Number(
              new RegExp(`${name}:([0-9.]+)`).exec(cpu)?.[1] ?? Number.NaN,
            );
          return new Map([
            ['redis', (sec('used_cpu_sys') + sec('used_cpu_user')) * 1e9],
          ]);
        },
        conditions: `Redis ${version}: ${settings.join(', ')}`,
        drop: async () => {
          try {
            await dropRedisPrefix(prefix, admin);
          } finally {
            await admin.quit();
          }
        },
      };
    }
    case 'sqlite': {
      const { dir, remove } = tempDir('aa-tput-');
      // The tables, made once here rather than by every worker at once.
      const store = new SQLiteCheckpointStore(join(dir, 'runs.db'));
      await store.head('none');
      await store.close();
      sqliteFloor(join(dir, 'floor.db')).close();
      return {
        location: dir,
        serverCpu: () => Promise.resolve(undefined),
        conditions: 'SQLite: WAL, synchronous=FULL (the store’s settings)',
        drop: () => {
          remove();
          return Promise.resolve();
        },
      };
    }
  }
}

interface Settings {
  stores: StoreKind[];
  runs: number;
  concurrency: number[];
  processes: number[];
  steps: number;
  toolMs: number;
  callsFirst: boolean;
  /** Measure the store's writes alone and the raw-write floor too (at c=1 and c=16). */
  floor: boolean;
  /** Postgres pool size of every worker; default: its runs in flight + 1. */
  pool?: number;
}

function fmt(x: number, w: number, d = 1): string {
  return (Number.isFinite(x) ? x.toFixed(d) : '-').padStart(w);
}

async function measureStore(
  kind: StoreKind,
  s: Settings,
  print: (cell: Cell, conditions: string) => void,
): Promise<void> {
  const where = await prepare(kind);
  let workers: WorkerProcess[] = [];
  try {
    for (const p of s.processes) {
      if (interrupted) throw new Error('interrupted');
      const cs = s.concurrency.filter((c) => c >= p);
      if (!cs.length) continue;
      // Postgres: a connection per run in flight, + lease renewals (or --pool, to try a smaller one).
      const pool = s.pool ?? Math.ceil(Math.max(...cs) / p) + 1;
      workers = Array.from(
        { length: p },
        (_, i) =>
          new WorkerProcess({
            store: kind,
            location: where.location,
            pool,
            workerId: `tput-${kind}-p${p}-w${i}-${suffix()}`,
            steps: s.steps,
            toolMs: s.toolMs,
            callsFirst: s.callsFirst,
          }),
      );
      const ready = await Promise.all(workers.map((w) => w.receive('ready')));
      const writes = ready[0]!.writes;
      let conditions = `${where.conditions}`;
      const sessions = [...new Set(ready.map((r) => r.durability))].filter(
        Boolean,
      );
      if (sessions.length)
        conditions += `; worker sessions: ${sessions.join(', ')}`;
      conditions += `\none run = ${writes.length} store writes of ${writes.join(', ')} bytes (the floor makes the same raw writes)`;
      const cell = async (mode: Mode, c: number): Promise<Cell> => {
        if (interrupted) throw new Error('interrupted');
        const inFlight = split(c, p);
        const runs = split(Math.max(s.runs, c), p);
        workers.forEach((w, i) =>
          w.send({
            type: 'cell',
            mode,
            inFlight: inFlight[i]!,
            runs: runs[i]!,
          }),
        );
        await Promise.all(workers.map((w) => w.receive('armed')));
        const server0 = await where.serverCpu();
        const [idle0, total0] = machineCpu();
        const t0 = performance.now();
        for (const w of workers) w.send({ type: 'go' });
        const done = await Promise.all(workers.map((w) => w.receive('done')));
        const wallMs = performance.now() - t0;
        const [idle1, total1] = machineCpu();
        const server1 = await where.serverCpu();
        const total = runs.reduce((a, b) => a + b, 0);
        return {
          store: kind,
          mode,
          processes: p,
          concurrency: c,
          runs: total,
          wallMs,
          latencies: done.flatMap((d) => d.latencies).sort((a, b) => a - b),
          cpuMs: done.reduce((a, d) => a + d.cpuMs, 0),
          callsPerRun:
            mode === 'floor'
              ? writes.length
              : done.reduce((a, d) => a + d.storeCalls, 0) / total,
          serverMs: serverCpuMs(server0, server1),
          busy: 1 - (idle1 - idle0) / Math.max(1, total1 - total0),
        };
      };
      // The single run once more at the end of p=1: the machine may have changed meanwhile (the
      // faster of the two is the baseline, which can only make the speedups smaller).
      const order = p === 1 && cs.includes(1) ? [...cs, 1] : cs;
      for (const c of order) {
        const flow = await cell('flow', c);
        print(flow, conditions);
        // The store's writes alone and the floor beside the cells the target compares: one run
        // alone, 16 at once.
        if (s.floor && ((p === 1 && c === 1) || c === 16))
          for (const mode of ['store', 'floor'] as const)
            print(await cell(mode, c), conditions);
      }
      await Promise.all(workers.map((w) => w.stop()));
      workers = [];
    }
  } finally {
    await Promise.all(workers.map((w) => w.kill()));
    await where.drop();
  }
}

function list(name: string, fallback: string): number[] {
  const xs = arg(name, fallback).split(',').filter(Boolean).map(Number);
  for (const x of xs)
    if (!Number.isInteger(x) || x < 1)
      throw new Error(`--${name}: "${x}" is not a positive integer`);
  return xs;
}

async function main(): Promise<void> {
  const stores = arg('stores', 'postgres,redis')
    .split(',')
    .filter(Boolean)
    .filter((name) => {
      // The other suites know `memory`; it has no worker processes to share it: skipped here.
      if (name === 'memory') {
        console.log('throughput: the memory store is per process; skipped');
        return false;
      }
      return true;
    });
  for (const name of stores)
    if (!(STORE_KINDS as readonly string[]).includes(name))
      throw new Error(`unknown store "${name}" (${STORE_KINDS.join(', ')})`);
  const settings: Settings = {
    stores: stores as StoreKind[],
    runs: Number(arg('runs', '160')),
    concurrency: list('concurrency', '1,4,16,64'),
    processes: list('processes', '1,2,4'),
    steps: Number(arg('steps', '4')),
    toolMs: Number(arg('tool-ms', '0')),
    callsFirst: process.argv.includes('--calls-first'),
    floor: !process.argv.includes('--no-floor'),
    ...(arg('pool', '') && { pool: Number(arg('pool', '')) }),
  };
  if (!Number.isInteger(settings.runs) || settings.runs < 1)
    throw new Error('--runs must be a positive integer');
  if (!Number.isInteger(settings.steps) || settings.steps < 3)
    throw new Error('--steps must be an integer of at least 3');
  if (!(settings.toolMs >= 0)) throw new Error('--tool-ms must be >= 0');
  if (
    settings.pool !== undefined &&
    (!Number.isInteger(settings.pool) || settings.pool < 1)
  )
    throw new Error('--pool must be a positive integer');

  console.log(
    `throughput: ${settings.runs} runs per cell (at least c), each ${settings.steps} supersteps with ${settings.steps + 1} tool calls (tool latency ${settings.toolMs} ms${settings.callsFirst ? '; callsFirst nodes' : ''}); ${cpus().length} cores\n`,
  );
  const all: Cell[] = [];
  let shown = '';
  const rate = (c: Cell) => c.runs / (c.wallMs / 1000);
  /** The faster c=1, p=1 cell of the same store and mode (there are two: first and last). */
  const single = (c: Pick<Cell, 'store' | 'mode'>) =>
    all
      .filter(
        (b) =>
          b.store === c.store &&
          b.mode === c.mode &&
          b.processes === 1 &&
          b.concurrency === 1,
      )
      .reduce<Cell | undefined>(
        (best, b) => (!best || rate(b) > rate(best) ? b : best),
        undefined,
      );
  const print = (cell: Cell, conditions: string) => {
    all.push(cell);
    if (shown !== cell.store) {
      shown = cell.store;
      console.log(`${cell.store}: ${conditions}\n`);
      console.log(
        'store      what   procs  conc   runs   runs/s   p50 ms   p99 ms   speedup  calls/run  cpu ms/run  server ms/run   busy',
      );
    }
    const base = single(cell);
    console.log(
      `${cell.store.padEnd(10)} ${cell.mode.padEnd(5)} ${String(cell.processes).padStart(6)} ${String(cell.concurrency).padStart(5)} ${String(cell.runs).padStart(6)} ${fmt(rate(cell), 8)} ${fmt(percentile(cell.latencies, 0.5), 8)} ${fmt(percentile(cell.latencies, 0.99), 8)} ${fmt(base ? rate(cell) / rate(base) : Number.NaN, 8, 2)}x ${fmt(cell.callsPerRun, 10, 2)} ${fmt(cell.cpuMs / cell.runs, 11, 2)} ${fmt(cell.serverMs / cell.runs, 14, 2)} ${fmt(cell.busy * 100, 5, 0)}%`,
    );
  };
  for (const kind of settings.stores) {
    await measureStore(kind, settings, print);
    console.log('');
  }

  const measures: Measure[] = [];
  const processes = (p: number) => `${p} process${p > 1 ? 'es' : ''}`;
  for (const kind of settings.stores) {
    /** The best p at c=16 over c=1, p=1. */
    const speedup16 = (mode: Mode) => {
      const base = single({ store: kind, mode });
      const at16 = all.filter(
        (c) => c.store === kind && c.mode === mode && c.concurrency === 16,
      );
      if (!base || !at16.length) return undefined;
      const best = at16.reduce((a, b) => (rate(b) > rate(a) ? b : a));
      return {
        value: rate(best) / rate(base),
        best,
        note: `best at p=${best.processes} (${at16.map((c) => `p=${c.processes} ${(rate(c) / rate(base)).toFixed(2)}x`).join(', ')}); c=1: ${rate(base).toFixed(1)} runs/s, c=16: ${rate(best).toFixed(1)} runs/s`,
      };
    };
    const flow = speedup16('flow');
    const alone = speedup16('store');
    const floor = speedup16('floor');
    const others = [
      ...(alone ? [`store writes alone ${alone.value.toFixed(2)}x`] : []),
      ...(floor ? [`raw-write floor ${floor.value.toFixed(2)}x`] : []),
    ].join(', ');
    if (flow) {
      console.log(
        `${kind}: 16 concurrent / single run = ${flow.value.toFixed(2)}x (best at ${processes(flow.best.processes)}); target >= 3x ${flow.value >= 3 ? 'met' : 'NOT MET'}${others ? ` (the same at c=16 / c=1: ${others})` : ''}`,
      );
      // What the machine allows if every core did only this work: the CPU one run costs at c=16
      // (the workers' and the server's) against the cores there are.
      const perRun = (flow.best.cpuMs + flow.best.serverMs) / flow.best.runs;
      const ceiling = (cpus().length * 1000) / perRun;
      const single = rate(flow.best) / flow.value;
      if (Number.isFinite(ceiling))
        console.log(
          `  at c=16 one run costs ${(flow.best.cpuMs / flow.best.runs).toFixed(2)} ms of worker CPU + ${(flow.best.serverMs / flow.best.runs).toFixed(2)} ms of server CPU: ${cpus().length} cores can do at most ${ceiling.toFixed(0)} runs/s, ${(ceiling / single).toFixed(2)}x the single run (measured ${rate(flow.best).toFixed(0)} runs/s, machine busy ${(flow.best.busy * 100).toFixed(0)}%)`,
        );
      measures.push({
        measure: 'throughput at 16 concurrent / single run',
        store: kind,
        value: flow.value,
        unit: 'x',
        target: 3,
        better: 'higher',
        note: `${flow.note}${others ? `; ${others}` : ''}${Number.isFinite(ceiling) ? `; CPU ceiling ${(ceiling / single).toFixed(2)}x` : ''}`,
      });
    }
    for (const [what, m] of [
      ['store writes alone', alone],
      ['raw-write floor', floor],
    ] as const)
      if (m)
        measures.push({
          measure: `${what} at 16 concurrent / single`,
          store: kind,
          value: m.value,
          unit: 'x',
          note: m.note,
        });
    for (const c of all.filter((c) => c.store === kind && c.mode === 'flow'))
      measures.push({
        measure: `runs/s, ${c.concurrency} concurrent`,
        store: `${kind}, ${processes(c.processes)}`,
        value: rate(c),
        unit: 'runs/s',
        note: `p50 ${percentile(c.latencies, 0.5).toFixed(1)} ms, p99 ${percentile(c.latencies, 0.99).toFixed(1)} ms, cpu ${(c.cpuMs / c.runs).toFixed(2)} ms/run, machine busy ${(c.busy * 100).toFixed(0)}%`,
      });
  }
  writeResults('throughput', measures);
}

const workerConfig = process.env[WORKER_ENV];
if (workerConfig !== undefined) {
  worker(JSON.parse(workerConfig) as WorkerConfig).catch((error: unknown) => {
    console.error(error);
    process.exit(1);
  });
} else {
  // Ctrl-C or a kill: stop the workers; the waits on them fail and every store is cleaned up.
  for (const signal of ['SIGINT', 'SIGTERM'] as const)
    process.once(signal, () => {
      interrupted = true;
      killAllNow();
    });
  main().then(
    () => process.exit(0),
    (error: unknown) => {
      console.error(
        interrupted
          ? 'throughput: interrupted (workers stopped, the bench schema / prefix removed)'
          : error,
      );
      process.exit(1);
    },
  );
}
