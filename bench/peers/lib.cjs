'use strict';
/**
 * Shared helpers of the peers benchmark (bench/peers/run.cjs): settings from the environment,
 * timing (sequential and N in flight), the counters of writes per flow (Postgres, Redis, SQLite)
 * and the phases every system runs. Each measuring script prints JSON lines on stdout.
 */
const net = require('node:net');

const env = (name, fallback) =>
  process.env[name] ? process.env[name] : fallback;
const int = (name, fallback) =>
  Number.parseInt(env(name, String(fallback)), 10);
const list = (name, fallback) =>
  env(name, fallback)
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);

const settings = {
  n: int('N', 500),
  warmup: int('WARMUP', 50),
  /** Flows run (unmeasured) after the two phases before the `steady` phase; 0: no steady phase. */
  steady: int('STEADY', 1500),
  conc: int('CONC', 8),
  steps: list('STEPS', '1,3,10').map(Number),
  pgBase: env('DATABASE_URL', 'postgres://postgres@127.0.0.1:5432/postgres'),
  redisUrl: env('REDIS_URL', 'redis://127.0.0.1:6379'),
};

/**
 * Setting `name` of tool `tool` (bench:statements, bench:pages), a whole number of at least 1; a
 * clear error and exit 2 for anything else.
 */
function wholeSetting(tool, name, fallback) {
  const text = process.env[name] || String(fallback);
  if (/^[1-9]\d*$/.test(text)) return Number(text);
  console.error(
    `${tool}: ${name} must be a whole number of at least 1, got "${text}"`,
  );
  process.exit(2);
}

/** The URL of database `name` on the same server as DATABASE_URL. */
function dbUrl(name) {
  const url = new URL(settings.pgBase);
  url.pathname = `/${name}`;
  return url.toString();
}

/** Runs `fn` with a client on the server's `postgres` database (DATABASE_URL's server). */
async function admin(fn) {
  const pg = require('pg');
  const client = new pg.Client({ connectionString: dbUrl('postgres') });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

/** Drops one of this benchmark's own databases (never any other), if it exists. */
function dropDatabase(name) {
  if (!/^peers_(ours|dbos|lg|floor|stmts)$/.test(name))
    throw new Error(`not a peers database: ${name}`);
  return admin((c) => c.query(`drop database if exists ${name} with (force)`));
}

/** Drops and makes again one of this benchmark's own databases. */
async function recreate(name) {
  await dropDatabase(name);
  await admin((c) => c.query(`create database ${name}`));
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const round3 = (x) => Math.round(x * 1000) / 1000;

function stats(latencies, wallMs) {
  const s = [...latencies].sort((a, b) => a - b);
  const at = (q) =>
    s[Math.min(s.length - 1, Math.max(0, Math.ceil(q * s.length) - 1))];
  return {
    n: s.length,
    median_ms: round3(at(0.5)),
    p99_ms: round3(at(0.99)),
    per_s: Math.round((s.length * 1000) / wallMs),
  };
}

/**
 * `fn(i, lane)` for i < n, `inFlight` at a time (1: sequentially; lane < inFlight says which of
 * them runs it); latency of each, and flows/s overall.
 */
async function timeRuns(n, inFlight, fn) {
  const latencies = [];
  let next = 0;
  const t0 = performance.now();
  const lane = async (_, k) => {
    while (next < n) {
      const i = next++;
      const a = performance.now();
      await fn(i, k);
      latencies.push(performance.now() - a);
    }
  };
  await Promise.all(Array.from({ length: inFlight }, lane));
  return stats(latencies, performance.now() - t0);
}

// --- Postgres: pg_stat_database (and pg_stat_statements when the server loaded it) ------------

/**
 * Commits and rows per flow on one database, from pg_stat_database. Backends report their stats
 * lazily (at most once a second while busy, 10 s after going idle), so before each reading every
 * idle connection of the system's pools runs `pg_stat_force_next_flush()`; then the reader drops
 * its snapshot and waits for the reports to land. What a flush leaves over (a few transactions,
 * such as the flush's own, at most about one per connection) lands in the next phase: with N=500
 * that is within +-0.02 per flow.
 */
class PgCounter {
  constructor(pg, database, pools) {
    this.pg = pg;
    this.database = database;
    this.pools = pools; // () => (pg.Pool | pg.Client)[]
  }

  async open() {
    this.client = new this.pg.Client({ connectionString: dbUrl('postgres') });
    await this.client.connect();
    const { rows } = await this.client.query(
      "select current_setting('shared_preload_libraries') like '%pg_stat_statements%' as loaded",
    );
    this.statements = rows[0].loaded && (await this.tryStatements());
    return this;
  }

  async tryStatements() {
    try {
      await this.client.query('select 1 from pg_stat_statements limit 1');
      return true;
    } catch {
      return false; // loaded but the extension is not created in the database `postgres`
    }
  }

  async flushPools() {
    for (const pool of this.pools()) {
      if (typeof pool.connect === 'function' && 'idleCount' in pool) {
        const clients = await Promise.all(
          Array.from({ length: pool.idleCount }, () => pool.connect()),
        );
        await Promise.all(
          clients.map((c) => c.query('select pg_stat_force_next_flush()')),
        );
        for (const c of clients) c.release();
      } else {
        await pool.query('select pg_stat_force_next_flush()');
      }
    }
  }

  async read() {
    const statements = this.statements
      ? '(select sum(s.calls) from pg_stat_statements s where s.dbid = d.datid)::float8'
      : 'null';
    await this.client.query('select pg_stat_clear_snapshot()');
    const { rows } = await this.client.query(
      `select xact_commit::float8 as commits, tup_inserted::float8 as inserted,
              tup_updated::float8 as updated, ${statements} as statements
         from pg_stat_database d where datname = $1`,
      [this.database],
    );
    return rows[0];
  }

  /** After the flush, reads until two readings 300 ms apart agree (at most 2 s more). */
  async snap() {
    await this.flushPools();
    await sleep(600);
    let reading = await this.read();
    for (let i = 0; i < 6; i++) {
      await sleep(300);
      const again = await this.read();
      if (
        again.commits === reading.commits &&
        again.inserted === reading.inserted
      )
        break;
      reading = again;
    }
    return reading;
  }

  diff(a, b, flows) {
    const per = (x) => round3(x / flows);
    return {
      pg_commits_per_flow: per(b.commits - a.commits),
      pg_inserted_per_flow: per(b.inserted - a.inserted),
      pg_updated_per_flow: per(b.updated - a.updated),
      pg_statements_per_flow: this.statements
        ? per(b.statements - a.statements)
        : null,
    };
  }

  close() {
    return this.client.end();
  }
}

// --- Redis: INFO commandstats, and round trips counted on the client's sockets --------------

/** Counts writes on sockets to Redis's port (one per command, one per pipeline): round trips. */
function countRedisRoundTrips() {
  const port = Number(new URL(settings.redisUrl).port || 6379);
  const counter = { writes: 0 };
  const write = net.Socket.prototype.write;
  net.Socket.prototype.write = function countedWrite(...args) {
    if (this.remotePort === port && !this.peersIgnore) counter.writes++;
    return write.apply(this, args);
  };
  return counter;
}

class RedisCounter {
  constructor(Redis, roundTrips) {
    this.Redis = Redis;
    this.roundTrips = roundTrips; // from countRedisRoundTrips(), or undefined
  }

  async open() {
    this.client = new this.Redis(settings.redisUrl);
    await this.client.ping();
    this.client.stream.peersIgnore = true;
    return this;
  }

  async snap() {
    const info = await this.client.info('commandstats');
    let calls = 0;
    for (const m of info.matchAll(/calls=(\d+)/g)) calls += Number(m[1]);
    return { calls, writes: this.roundTrips ? this.roundTrips.writes : null };
  }

  diff(a, b, flows) {
    return {
      // every command the server ran, those inside Lua scripts too, less this INFO itself
      redis_calls_per_flow: round3((b.calls - a.calls - 1) / flows),
      redis_round_trips_per_flow:
        a.writes === null ? null : round3((b.writes - a.writes) / flows),
    };
  }

  close() {
    return this.client.quit();
  }
}

// --- SQLite: write transactions, counted by wrapping better-sqlite3 in this process ----------

const TX_CONTROL = /^\s*(pragma|begin|savepoint|release|rollback)/i;
const COMMIT = /^\s*(commit|end)\b/i;

/**
 * Wraps better-sqlite3 (the copy TypeORM loads: bench/peers/node_modules) before anything opens
 * a database: a write transaction is an outermost `db.transaction(...)` that returned, a COMMIT,
 * or a writing statement run outside a transaction (autocommit).
 */
function countSqliteCommits() {
  const Database = require('better-sqlite3');
  const counter = { commits: 0 };
  const proto = Database.prototype;
  const count = (db, sql, readonly, run) => {
    const before = db.inTransaction;
    const result = run();
    const after = db.inTransaction;
    if (before && !after && COMMIT.test(sql)) counter.commits++;
    else if (!before && !after && !readonly && !TX_CONTROL.test(sql))
      counter.commits++;
    return result;
  };
  const prepare = proto.prepare;
  proto.prepare = function countedPrepare(sql, ...rest) {
    const stmt = prepare.call(this, sql, ...rest);
    for (const method of ['run', 'all', 'get', 'iterate']) {
      const original = stmt[method];
      stmt[method] = (...args) =>
        count(this, sql, stmt.readonly, () => original.apply(stmt, args));
    }
    return stmt;
  };
  const exec = proto.exec;
  proto.exec = function countedExec(sql) {
    return count(this, sql, /^\s*select/i.test(sql), () =>
      exec.call(this, sql),
    );
  };
  const transaction = proto.transaction;
  proto.transaction = function countedTransaction(fn) {
    const tx = transaction.call(this, fn);
    const wrap = (variant) => {
      const wrapped = (...args) => {
        const outer = !this.inTransaction;
        const result = variant(...args);
        if (outer) counter.commits++;
        return result;
      };
      return wrapped;
    };
    const counted = wrap(tx);
    for (const kind of ['deferred', 'immediate', 'exclusive'])
      counted[kind] = wrap(tx[kind]);
    counted.default = counted;
    return counted;
  };
  return counter;
}

class SqliteCounter {
  constructor(counter) {
    this.counter = counter;
  }
  async snap() {
    return this.counter.commits;
  }
  diff(a, b, flows) {
    return { sqlite_commits_per_flow: round3((b - a) / flows) };
  }
}

// --- Phases --------------------------------------------------------------------------------

/**
 * For each flow size S: WARMUP flows (sequentially, then CONC in flight), then N flows one after
 * another (`seq`) and N with CONC in flight (`conc`), then STEADY more flows unmeasured and N one
 * after another again (`steady`): the same flow once the JIT has compiled what runs hot, where
 * `seq` is measured while a fresh process is still warming up. Each phase is measured between two
 * readings of `counters`; one JSON line per phase.
 * `make(steps)` returns `once(i, lane)`, which runs flow i and checks its result (the floors run
 * one operation: sizes [0]).
 */
async function runPhases(tags, make, counters = [], sizes = settings.steps) {
  for (const steps of sizes) {
    const once = await make(steps);
    // Warm up one after another and CONC at a time, so that pools have their connections.
    await timeRuns(settings.warmup, 1, (i, k) => once(-1 - i, k));
    await timeRuns(settings.warmup, settings.conc, (i, k) =>
      once(-1 - settings.warmup - i, k),
    );
    const phases = [
      ['seq', 1],
      ['conc', settings.conc],
    ];
    if (settings.steady > 0) phases.push(['steady', 1]);
    for (const [k, [mode, inFlight]] of phases.entries()) {
      const offset = settings.n * k;
      if (mode === 'steady')
        await timeRuns(settings.steady, 1, (i, k) =>
          once(offset + settings.n + i, k),
        );
      const before = await Promise.all(counters.map((c) => c.snap()));
      const result = await timeRuns(settings.n, inFlight, (i, k) =>
        once(offset + i, k),
      );
      const after = await Promise.all(counters.map((c) => c.snap()));
      const counts = Object.assign(
        {},
        ...counters.map((c, k) => c.diff(before[k], after[k], settings.n)),
      );
      emit({ ...tags, steps, mode, in_flight: inFlight, ...result, ...counts });
    }
  }
}

function emit(line) {
  process.stdout.write(`${JSON.stringify(line)}\n`);
}

/** Runs `main` and exits: 0 when it resolved, 1 (with the error on stderr) when it threw. */
function main(fn) {
  fn().then(
    () => process.exit(0),
    (error) => {
      console.error(error);
      process.exit(1);
    },
  );
}

/** The installed version of a package of bench/peers (some packages do not export package.json). */
function version(name) {
  const file = require('node:path').join(
    __dirname,
    'node_modules',
    name,
    'package.json',
  );
  return JSON.parse(require('node:fs').readFileSync(file, 'utf8')).version;
}

/** A ~500-byte JSON value (the size of a small checkpoint) for the raw floors. */
const payload = (i) =>
  JSON.stringify({ i, kind: 'checkpoint', data: 'x'.repeat(460) });

module.exports = {
  settings,
  wholeSetting,
  dbUrl,
  admin,
  dropDatabase,
  recreate,
  sleep,
  round3,
  timeRuns,
  PgCounter,
  RedisCounter,
  SqliteCounter,
  countRedisRoundTrips,
  countSqliteCommits,
  runPhases,
  emit,
  main,
  payload,
  version,
};
