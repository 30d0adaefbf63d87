'use strict';
/**
 * The peers benchmark's rounds (npm run bench:peers runs prepare.cjs, then this): round 1 of every
 * system, then round 2 of every system, ..., each system in a fresh child process per round, its
 * Postgres database (peers_ours, peers_dbos, peers_lg, peers_floor: only these) dropped and made
 * again before it starts. Prints the summary and writes it, with the raw JSON lines, to
 * bench/out/peers/<timestamp>/.
 *
 * Environment: N (500), WARMUP (50), STEADY (1500), CONC (8), ROUNDS (3), STEPS ("1,3,10"),
 * SYSTEMS ("ours,dbos,langgraph,floor"), STORES ("postgres,sqlite,redis,memory": ours' stores,
 * the floors, LangGraph on Postgres and on MemorySaver), DURABILITY ("sync,async,exit": LangGraph
 * on Postgres), DATABASE_URL (postgres://postgres@127.0.0.1:5432/postgres), REDIS_URL, PEERS_NODE
 * (the node binary every child runs on; default: the one running this, so a newer Node can be
 * measured beside the project's own; its native modules, better-sqlite3, must be built for it).
 */
const { execFileSync, spawn } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { createInterface } = require('node:readline');
const lib = require('./lib.cjs');
const { render } = require('./summary.cjs');

const list = (name, fallback) =>
  (process.env[name] || fallback)
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
const ROUNDS = Number(process.env.ROUNDS || 3);
const SYSTEMS = list('SYSTEMS', 'ours,dbos,langgraph,floor');
const STORES = list('STORES', 'postgres,sqlite,redis,memory');
const DURABILITY = list('DURABILITY', 'sync,async,exit');
const NODE = process.env.PEERS_NODE || process.execPath;

/** Every child of one round: [script, argument, database or null]. */
function jobs() {
  const all = [];
  const has = (store) => STORES.includes(store);
  if (SYSTEMS.includes('floor')) {
    for (const store of ['postgres', 'redis', 'sqlite'].filter(has))
      all.push([
        'floors.cjs',
        store,
        store === 'postgres' ? 'peers_floor' : null,
      ]);
  }
  if (SYSTEMS.includes('ours')) {
    for (const store of STORES)
      all.push(['ours.cjs', store, store === 'postgres' ? 'peers_ours' : null]);
  }
  if (SYSTEMS.includes('dbos') && has('postgres'))
    all.push(['dbos.cjs', '', 'peers_dbos']);
  if (SYSTEMS.includes('langgraph')) {
    if (has('postgres'))
      for (const d of DURABILITY) all.push(['langgraph.cjs', d, 'peers_lg']);
    if (has('memory')) all.push(['langgraph.cjs', 'memory', null]);
  }
  return all;
}

function child(script, arg) {
  return new Promise((resolve, reject) => {
    const p = spawn(
      NODE,
      [path.join(__dirname, script), ...(arg ? [arg] : [])],
      {
        cwd: __dirname,
        stdio: ['ignore', 'pipe', 'inherit'],
      },
    );
    const lines = [];
    createInterface({ input: p.stdout }).on('line', (line) => {
      if (line.startsWith('{')) lines.push(JSON.parse(line));
      else process.stderr.write(`${line}\n`);
    });
    p.on('error', reject);
    p.on('close', (code) =>
      code === 0
        ? resolve(lines)
        : reject(new Error(`${script} ${arg} exited with ${code}`)),
    );
  });
}

async function meta() {
  const Redis = require('ioredis');
  const redis = new Redis(lib.settings.redisUrl);
  const info = await redis.info('server');
  await redis.quit();
  const pgInfo = await lib.admin(async (c) => {
    const version = (await c.query('show server_version')).rows[0]
      .server_version;
    const preload = (await c.query('show shared_preload_libraries')).rows[0]
      .shared_preload_libraries;
    return { version, pss: preload.includes('pg_stat_statements') };
  });
  const versions = {};
  for (const name of [
    'agent-adapter',
    '@dbos-inc/dbos-sdk',
    '@langchain/langgraph',
    '@langchain/langgraph-checkpoint-postgres',
    'typeorm',
    'pg',
    'ioredis',
    'better-sqlite3',
  ]) {
    versions[name] = lib.version(name);
  }
  return {
    started: new Date().toISOString(),
    n: lib.settings.n,
    warmup: lib.settings.warmup,
    steady: lib.settings.steady,
    conc: lib.settings.conc,
    node: execFileSync(NODE, ['--version'], { encoding: 'utf8' }).trim(),
    cpus: os.cpus().length,
    loadStart: os
      .loadavg()
      .map((x) => x.toFixed(1))
      .join(' '),
    postgres: pgInfo.version,
    redis: /redis_version:(\S+)/.exec(info)?.[1],
    pgStatStatements: pgInfo.pss
      ? 'loaded (statements per flow counted)'
      : 'not loaded by this server (shared_preload_libraries): no statement counts; the server config is left as it is',
    versions,
    failures: [],
  };
}

lib.main(async () => {
  const stamp = new Date().toISOString().replace(/[:.]/g, '-');
  const dir = path.resolve(__dirname, '..', 'out', 'peers', stamp);
  fs.mkdirSync(dir, { recursive: true });
  const raw = path.join(dir, 'raw.jsonl');
  const info = await meta();
  const lines = [];
  const all = jobs();
  for (let round = 1; round <= ROUNDS; round++) {
    // Each round starts one child further along, so that no system always runs first or last.
    const order = all.map((_, i) => all[(i + round - 1) % all.length]);
    for (const [script, arg, database] of order) {
      process.stderr.write(
        `[peers] round ${round}/${ROUNDS}: ${script} ${arg}\n`,
      );
      try {
        if (database) await lib.recreate(database);
        for (const line of await child(script, arg)) {
          lines.push({ round, ...line });
          fs.appendFileSync(raw, `${JSON.stringify({ round, ...line })}\n`);
        }
      } catch (error) {
        process.stderr.write(`[peers] ${error.message}\n`);
        info.failures.push(
          `round ${round}: ${script} ${arg}: ${error.message}`,
        );
      }
    }
  }
  for (const name of ['peers_ours', 'peers_dbos', 'peers_lg', 'peers_floor'])
    await lib.dropDatabase(name);
  info.finished = new Date().toISOString();
  info.loadEnd = os
    .loadavg()
    .map((x) => x.toFixed(1))
    .join(' ');
  fs.appendFileSync(raw, `${JSON.stringify({ meta: info })}\n`);
  const summary = render(lines, info);
  fs.writeFileSync(path.join(dir, 'summary.md'), `${summary}\n`);
  process.stdout.write(
    `${summary}\n\n(written to ${path.relative(process.cwd(), dir)}/summary.md and raw.jsonl)\n`,
  );
});
