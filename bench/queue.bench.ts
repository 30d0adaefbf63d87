/**
 * Queue throughput (issue 18 item 6): runs/s and p50/p99 latency (enqueue to the run's end) of
 * queued runs taken by 1, 2 and 4 worker processes sharing one store, against a floor of raw
 * statements doing the same work, in the same run on the same server.
 *
 *   npm run bench -- --suite queue [--stores postgres,redis] [--runs 400] [--processes 1,2,4]
 *       [--concurrency 8]
 *
 * A run is a 3-node flow, one tool call per node (the tool answers at once). `ours`: the parent
 * enqueues `--runs` runs (16 enqueues in flight) with `FlowRunner.enqueue`; every worker process
 * has a `FlowRunner` whose takeover (`takeOver`, a look every 50 ms, `--concurrency` runs at once)
 * admits and drives them. `raw`: the same shape by hand, the least a durable queue of three
 * durable steps writes, with no library: Postgres, an INSERT per enqueue, then per run a claim
 * (`UPDATE ... WHERE id = (SELECT ... FOR UPDATE SKIP LOCKED LIMIT 1)`), three step INSERTs and an
 * UPDATE to done, on the same pg pool size; Redis, a MULTI (HSET + LPUSH) per enqueue, then per run
 * an LMOVE claim, three HSETs and a MULTI (HSET done + LREM). Both poll every 50 ms when the queue
 * is empty. Each cell warms up with one round of `processes × concurrency` runs first.
 *
 * `dbos` (Postgres, when bench/peers has its packages: `cd bench/peers && npm ci`): DBOS queues,
 * the same shape (bench/peers/dbos-queue.cjs): a three-step workflow, `--concurrency` per worker
 * process, a poll every 50 ms, enqueued with DBOSClient from the parent.
 *
 * Figures: runs/s = runs over the wall time from the first enqueue to the last run's end; latency
 * per run = its end (the worker's clock: the same host) minus when its enqueue was sent.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import Redis from 'ioredis';
import {
  Call,
  Executor,
  Flow,
  FlowRunner,
  SQLCheckpointStore,
  ToolRegistry,
  type CheckpointStore,
} from 'agent-adapter';
import { ChildHarness, killAllNow } from '../test/utils/child-process';
import { spawnTs } from '../test/utils/ts-child';
import { writeResults, type Measure } from './lib/results';
import {
  benchId,
  dropRedisPrefix,
  dropSchema,
  pgPool,
  postgresDataSource,
  redisStore,
} from './lib/stores';
import { KEY, REDIS_URL, arg } from './lib/util';

const WORKER_ENV = 'AA_QUEUE_WORKER';
const DBOS_SCRIPT = join(__dirname, 'peers', 'dbos-queue.cjs');
const LOOK_MS = 50;

interface WorkerConfig {
  mode: 'ours' | 'raw';
  store: 'postgres' | 'redis';
  /** Postgres schema or Redis key prefix. */
  space: string;
  concurrency: number;
  workerId: string;
}

type Store = WorkerConfig['store'];

function flow(): Flow<{ n?: number }> {
  // One call per node, the node doing nothing else (callsFirst): as the example's flow.
  return new Flow<{ n?: number }>('qbench')
    .node('a', Call('a'), { callsFirst: true })
    .node('b', Call('b'), { callsFirst: true })
    .node('c', Call('c'), { callsFirst: true })
    .edge('a', 'b')
    .edge('b', 'c')
    .end('c');
}

function registry(): ToolRegistry {
  const r = new ToolRegistry();
  for (const t of ['a', 'b', 'c']) r.register(t, () => ({ ok: true }));
  return r;
}

async function openStore(store: Store, space: string, pool: number) {
  if (store === 'redis') {
    const s = redisStore(space);
    return { store: s as CheckpointStore, close: () => s.close() };
  }
  const ds = await postgresDataSource({ poolSize: pool });
  const s = new SQLCheckpointStore(ds, { schema: space });
  return {
    store: s as CheckpointStore,
    close: async () => {
      await s.close();
      await ds.destroy();
    },
  };
}

// ---------------------------------------------------------------- worker processes

async function worker(config: WorkerConfig): Promise<void> {
  const done = (id: string) => process.stdout.write(`D ${id} ${Date.now()}\n`);
  if (config.mode === 'ours') {
    const { store } = await openStore(
      config.store,
      config.space,
      config.concurrency + 2,
    );
    const runner = new FlowRunner(new Executor(registry()), {
      checkpoints: store,
      checkpointKey: KEY,
      workerId: config.workerId,
    });
    runner.takeOver([flow()], {
      everyMs: LOOK_MS,
      concurrency: config.concurrency,
      onOutcome: (_flow, [id]) => done(id),
    });
  } else if (config.store === 'postgres') {
    const ds = await postgresDataSource({ poolSize: config.concurrency + 2 });
    const pool = pgPool(ds);
    const t = `"${config.space}"`;
    const q = (name: string, text: string, values: unknown[]) =>
      pool.query({ name, text, values });
    for (let i = 0; i < config.concurrency; i++)
      void (async () => {
        for (;;) {
          const { rows } = await q(
            'claim',
            `UPDATE ${t}.jobs SET state = 'running' WHERE id = (SELECT id FROM ${t}.jobs WHERE state = 'queued' ORDER BY id FOR UPDATE SKIP LOCKED LIMIT 1) RETURNING id, run_id`,
            [],
          );
          const job = rows[0] as { id: string; run_id: string } | undefined;
          if (!job) {
            await sleep(LOOK_MS);
            continue;
          }
          for (let n = 1; n <= 3; n++)
            await q(
              'step',
              `INSERT INTO ${t}.steps (job_id, n, payload) VALUES ($1, $2, $3)`,
              [job.id, n, '{"ok":true}'],
            );
          await q('done', `UPDATE ${t}.jobs SET state = 'done' WHERE id = $1`, [
            job.id,
          ]);
          done(job.run_id);
        }
      })();
  } else {
    const p = config.space;
    for (let i = 0; i < config.concurrency; i++)
      void (async () => {
        const redis = new Redis(REDIS_URL);
        for (;;) {
          const id = await redis.lmove(
            `{${p}}:queue`,
            `{${p}}:processing`,
            'RIGHT',
            'LEFT',
          );
          if (!id) {
            await sleep(LOOK_MS);
            continue;
          }
          for (let n = 1; n <= 3; n++)
            await redis.hset(`{${p}}:job:${id}`, `step${n}`, '{"ok":true}');
          await redis
            .multi()
            .hset(`{${p}}:job:${id}`, 'state', 'done')
            .lrem(`{${p}}:processing`, 1, id)
            .exec();
          done(id);
        }
      })();
  }
  process.stdout.write('READY\n');
}

// ---------------------------------------------------------------- the parent

interface Cell {
  mode: WorkerConfig['mode'] | 'dbos';
  store: Store;
  processes: number;
  runsPerS: number;
  p50: number;
  p99: number;
}

const pct = (sorted: number[], p: number) =>
  sorted[
    Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)
  ] ?? NaN;

async function cell(
  mode: WorkerConfig['mode'],
  store: Store,
  processes: number,
  runs: number,
  concurrency: number,
): Promise<Cell> {
  const space = benchId('aaq');
  // The namespace: the store makes its tables (ours); the raw tables by hand.
  const parent = await openStore(store, space, 18);
  const redis = new Redis(REDIS_URL);
  let enqueue: (id: string) => Promise<unknown>;
  if (mode === 'ours') {
    const runner = new FlowRunner(new Executor(registry()), {
      checkpoints: parent.store,
      checkpointKey: KEY,
    });
    await parent.store.head('warm-up'); // tables made before the workers start
    enqueue = (id) => runner.enqueue(flow(), {}, { runId: id });
  } else if (store === 'postgres') {
    const ds = await postgresDataSource({ poolSize: 18 });
    const pool = pgPool(ds);
    await ds.query(`CREATE SCHEMA "${space}"`);
    await ds.query(
      `CREATE TABLE "${space}".jobs (id BIGSERIAL PRIMARY KEY, run_id VARCHAR(200), state VARCHAR(8), payload TEXT)`,
    );
    await ds.query(
      `CREATE INDEX ON "${space}".jobs (id) WHERE state = 'queued'`,
    );
    await ds.query(
      `CREATE TABLE "${space}".steps (id BIGSERIAL PRIMARY KEY, job_id BIGINT, n INT, payload TEXT)`,
    );
    enqueue = (id) =>
      pool.query({
        name: 'enqueue',
        text: `INSERT INTO "${space}".jobs (run_id, state, payload) VALUES ($1, 'queued', $2)`,
        values: [id, '{}'],
      });
    const close = parent.close;
    parent.close = async () => {
      await ds.destroy();
      await close();
    };
  } else {
    enqueue = (id) =>
      redis
        .multi()
        .hset(`{${space}}:job:${id}`, 'payload', '{}')
        .lpush(`{${space}}:queue`, id)
        .exec();
  }
  const workers = Array.from({ length: processes }, (_, i) => {
    const config: WorkerConfig = {
      mode,
      store,
      space,
      concurrency,
      workerId: `qw${i}`,
    };
    return new ChildHarness(
      spawnTs(__filename, [], {
        env: {
          ...process.env,
          NODE_OPTIONS: '',
          [WORKER_ENV]: JSON.stringify(config),
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      }),
      { name: config.workerId, lineTimeoutMs: 60_000 },
    );
  });
  try {
    for (const w of workers) await w.waitForLine(/^READY$/);
    const ends = () => {
      const at = new Map<string, number>();
      for (const w of workers)
        for (const line of w.lines) {
          const m = /^D (\S+) (\d+)$/.exec(line);
          if (m) at.set(m[1]!, Number(m[2]));
        }
      return at;
    };
    const batch = async (prefix: string, n: number) => {
      const sent = new Map<string, number>();
      const ids = Array.from({ length: n }, (_, i) => `${prefix}-${i}`);
      let next = 0;
      await Promise.all(
        Array.from({ length: 16 }, async () => {
          while (next < ids.length) {
            const id = ids[next++]!;
            sent.set(id, Date.now());
            await enqueue(id);
          }
        }),
      );
      for (;;) {
        const at = ends();
        if (ids.every((id) => at.has(id))) return { sent, at, ids };
        await sleep(10);
      }
    };
    await batch('warm', processes * concurrency);
    const { sent, at, ids } = await batch('run', runs);
    const first = Math.min(...sent.values());
    const last = Math.max(...ids.map((id) => at.get(id)!));
    const latency = ids
      .map((id) => at.get(id)! - sent.get(id)!)
      .sort((a, b) => a - b);
    return {
      mode,
      store,
      processes,
      runsPerS: (runs * 1000) / (last - first),
      p50: pct(latency, 50),
      p99: pct(latency, 99),
    };
  } finally {
    await Promise.all(workers.map((w) => w.kill()));
    redis.disconnect();
    await parent.close().catch(() => undefined);
    if (store === 'postgres') await dropSchema(space);
    else await dropRedisPrefix(space);
  }
}

/** DBOS queues, the same shape (bench/peers/dbos-queue.cjs, with its own node_modules). */
function dbosCell(processes: number, runs: number, concurrency: number): Cell {
  const out = spawnSync(
    process.execPath,
    [DBOS_SCRIPT, 'cell', String(processes), String(runs), String(concurrency)],
    {
      encoding: 'utf8',
      timeout: 600_000,
      env: { ...process.env, NODE_NO_WARNINGS: '1' },
    },
  );
  const last = out.stdout.trim().split('\n').at(-1) ?? '';
  if (out.status !== 0 || !last.startsWith('{'))
    throw new Error(
      `DBOS cell failed (${out.status}): ${out.stderr.slice(-2000)}`,
    );
  const r = JSON.parse(last) as { runsPerS: number; p50: number; p99: number };
  return { mode: 'dbos', store: 'postgres', processes, ...r };
}

async function main(): Promise<void> {
  const stores = arg('stores', 'postgres,redis').split(',') as Store[];
  const processes = arg('processes', '1,2,4').split(',').map(Number);
  const runs = Number(arg('runs', '400'));
  const concurrency = Number(arg('concurrency', '8'));
  // DBOS beside ours on Postgres, once bench/peers has its packages (cd bench/peers && npm ci).
  const peers = existsSync(
    join(__dirname, 'peers', 'node_modules', '@dbos-inc'),
  );
  if (!peers)
    console.log(
      '(no DBOS: run `npm ci` in bench/peers to compare with DBOS queues)',
    );
  const cells: Cell[] = [];
  for (const store of stores)
    for (const p of processes)
      // Interleaved: the floor and ours back to back, so a drift of the machine hits both.
      for (const mode of ['raw', 'ours', 'dbos'] as const) {
        if (mode === 'dbos' && (store !== 'postgres' || !peers)) continue;
        const c =
          mode === 'dbos'
            ? dbosCell(p, runs, concurrency)
            : await cell(mode, store, p, runs, concurrency);
        cells.push(c);
        console.log(
          `${store.padEnd(8)} ${mode.padEnd(4)} ${p} process(es): ${c.runsPerS.toFixed(0).padStart(5)} runs/s  p50 ${c.p50} ms  p99 ${c.p99} ms`,
        );
      }
  const measures: Measure[] = [];
  console.log(
    '\nstore    processes  ours/raw runs/s   ours p99 / raw p99   DBOS runs/s, p99',
  );
  for (const store of stores)
    for (const p of processes) {
      const ours = cells.find(
        (c) => c.store === store && c.processes === p && c.mode === 'ours',
      )!;
      const raw = cells.find(
        (c) => c.store === store && c.processes === p && c.mode === 'raw',
      )!;
      const dbos = cells.find(
        (c) => c.store === store && c.processes === p && c.mode === 'dbos',
      );
      const ratio = ours.runsPerS / raw.runsPerS;
      console.log(
        `${store.padEnd(8)} ${String(p).padEnd(10)} ${ratio.toFixed(2).padStart(14)}x   ${ours.p99} / ${raw.p99} ms${dbos ? `   ${dbos.runsPerS.toFixed(0)}, ${dbos.p99} ms (ours ${(ours.runsPerS / dbos.runsPerS).toFixed(2)}x)` : ''}`,
      );
      if (dbos)
        measures.push({
          measure: 'queue runs/s / DBOS',
          store: `${store}, ${p} process(es)`,
          value: Math.round((ours.runsPerS / dbos.runsPerS) * 100) / 100,
          unit: 'x',
        });
      measures.push(
        {
          measure: 'queue runs/s',
          store: `${store}, ${p} process(es)`,
          value: Math.round(ours.runsPerS),
          unit: 'runs/s',
        },
        {
          measure: 'queue runs/s / raw',
          store: `${store}, ${p} process(es)`,
          value: Math.round(ratio * 100) / 100,
          unit: 'x',
        },
        {
          measure: 'queue p99 latency',
          store: `${store}, ${p} process(es)`,
          value: ours.p99,
          unit: 'ms',
        },
      );
    }
  writeResults('queue', measures);
}

const config = process.env[WORKER_ENV];
if (config) {
  worker(JSON.parse(config) as WorkerConfig).catch((error: unknown) => {
    console.error(error);
    process.exit(1);
  });
} else {
  main().then(
    () => process.exit(0),
    (error: unknown) => {
      console.error(error);
      killAllNow();
      process.exit(1);
    },
  );
}
