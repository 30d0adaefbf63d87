'use strict';
/**
 * DBOS queues on the same Postgres, the same shape as bench/queue.bench.ts: a workflow of three
 * steps (each returns at once), taken from one queue by 1, 2 or 4 worker processes, each running
 * `concurrency` workflows at once and polling the queue every 50 ms (DBOS's default is 1000 ms).
 *
 *   node bench/peers/dbos-queue.cjs cell <processes> <runs> <concurrency>
 *     prints one JSON line: { runsPerS, p50, p99 }
 *   node bench/peers/dbos-queue.cjs worker <database url> <concurrency>   (started by `cell`)
 *
 * Latency per run is its workflow's end (the worker prints it as the workflow returns) minus when
 * its enqueue (DBOSClient.enqueue) was sent; runs/s is runs over the first enqueue to the last end.
 * Each cell gets a fresh system database, dropped afterwards.
 */
const { spawn } = require('node:child_process');
const { createInterface } = require('node:readline');
const { Client } = require('pg');
const { DBOS, DBOSClient } = require('@dbos-inc/dbos-sdk');

const BASE = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const QUEUE = 'qbench';
const LOOK_MS = 50;

async function worker(url, concurrency) {
  const step = DBOS.registerStep(async (n) => ({ ok: n }), { name: 'step' });
  DBOS.registerWorkflow(
    async function qbench() {
      await step(1);
      await step(2);
      await step(3);
      process.stdout.write(`D ${DBOS.workflowID} ${Date.now()}\n`);
      return true;
    },
    { name: 'qbench' },
  );
  DBOS.setConfig({ name: 'aaqbench', systemDatabaseUrl: url, logLevel: 'error' });
  await DBOS.launch();
  await DBOS.registerQueue(QUEUE, {
    workerConcurrency: concurrency,
    minPollingIntervalMs: LOOK_MS,
    onConflict: 'always_update',
  });
  process.stdout.write('READY\n');
}

function databaseUrl(name) {
  const url = new URL(BASE);
  url.pathname = `/${name}`;
  return url.toString();
}

async function admin(sql) {
  const client = new Client({ connectionString: BASE });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

async function cell(processes, runs, concurrency) {
  const name = `aaq_dbos_${Date.now().toString(36)}`;
  await admin(`CREATE DATABASE ${name}`);
  const url = databaseUrl(name);
  const ends = new Map();
  const children = [];
  try {
    // The first worker makes DBOS's tables; the others start once it has.
    for (let i = 0; i < processes; i++) {
      const child = spawn(process.execPath, [__filename, 'worker', url, String(concurrency)], {
        stdio: ['ignore', 'pipe', 'inherit'],
      });
      children.push(child);
      await new Promise((resolve, reject) => {
        child.once('exit', (code) => reject(new Error(`a DBOS worker exited (${code})`)));
        createInterface({ input: child.stdout }).on('line', (line) => {
          if (line === 'READY') resolve();
          const m = /^D (\S+) (\d+)$/.exec(line);
          if (m) ends.set(m[1], Number(m[2]));
        });
      });
    }
    const client = await DBOSClient.create({ systemDatabaseUrl: url });
    const batch = async (prefix, n) => {
      const sent = new Map();
      const ids = Array.from({ length: n }, (_, i) => `${prefix}-${i}`);
      let next = 0;
      await Promise.all(
        Array.from({ length: 16 }, async () => {
          while (next < ids.length) {
            const id = ids[next++];
            sent.set(id, Date.now());
            await client.enqueue({ queueName: QUEUE, workflowName: 'qbench', workflowID: id });
          }
        }),
      );
      while (!ids.every((id) => ends.has(id))) await new Promise((r) => setTimeout(r, 10));
      return { sent, ids };
    };
    await batch('warm', processes * concurrency);
    const { sent, ids } = await batch('run', runs);
    await client.destroy();
    const first = Math.min(...sent.values());
    const last = Math.max(...ids.map((id) => ends.get(id)));
    const latency = ids.map((id) => ends.get(id) - sent.get(id)).sort((a, b) => a - b);
    const pct = (p) => latency[Math.min(latency.length - 1, Math.ceil((p / 100) * latency.length) - 1)];
    return { runsPerS: (runs * 1000) / (last - first), p50: pct(50), p99: pct(99) };
  } finally {
    for (const child of children) child.kill('SIGKILL');
    await new Promise((r) => setTimeout(r, 200));
    await admin(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  }
}

const [role, a, b, c] = process.argv.slice(2);
if (role === 'worker') {
  worker(a, Number(b)).catch((error) => {
    console.error(error);
    process.exit(1);
  });
} else if (role === 'cell') {
  cell(Number(a), Number(b), Number(c)).then(
    (result) => {
      process.stdout.write(`${JSON.stringify(result)}\n`);
      process.exit(0);
    },
    (error) => {
      console.error(error);
      process.exit(1);
    },
  );
} else {
  console.error('usage: dbos-queue.cjs cell <processes> <runs> <concurrency>');
  process.exit(2);
}
