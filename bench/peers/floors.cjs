'use strict';
/**
 * The raw floors, on the same servers: the cheapest durable write each store can make.
 *
 *   node bench/peers/floors.cjs <postgres|redis|sqlite>
 *
 * postgres: a single-row INSERT of a ~500 B row, autocommit, synchronous_commit on, through pg on
 *   a prepared statement, in the database `peers_floor` (CONC connections when CONC in flight).
 * redis: EVALSHA of a small version compare-and-set script writing a ~500 B value (CONC
 *   connections when CONC in flight).
 * sqlite: a single-row INSERT (~500 B) on a temporary file, WAL, synchronous FULL, prepared.
 * Prints one JSON line per mode, like the flows (steps 0: one operation).
 */
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const lib = require('./lib.cjs');

const CAS = `local v = redis.call('HGET', KEYS[1], 'v') or '0'
if v ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'v', ARGV[2], 'd', ARGV[3])
return 1`;

async function postgres() {
  const pg = require('pg');
  const clients = [];
  for (let i = 0; i < lib.settings.conc; i++) {
    const c = new pg.Client({ connectionString: lib.dbUrl('peers_floor') });
    await c.connect();
    await c.query('set synchronous_commit = on');
    clients.push(c);
  }
  await clients[0].query(
    'create table if not exists floor (id bigint primary key, body text not null)',
  );
  await clients[0].query('truncate floor');
  const counter = await new lib.PgCounter(
    pg,
    'peers_floor',
    () => clients,
  ).open();
  let id = 0;
  const insert = 'insert into floor (id, body) values ($1, $2)';
  const op = (_, lane) => {
    const i = id++;
    return clients[lane].query({
      name: 'floor_insert',
      text: insert,
      values: [i, lib.payload(i)],
    });
  };
  return {
    op,
    counters: [counter],
    close: async () => {
      await clients[0].query('drop table floor');
      for (const c of clients) await c.end();
      await counter.close();
    },
  };
}

async function redis() {
  const Redis = require('ioredis');
  const clients = [];
  for (let i = 0; i < lib.settings.conc; i++)
    clients.push(new Redis(lib.settings.redisUrl));
  const sha = await clients[0].script('LOAD', CAS);
  const counter = await new lib.RedisCounter(Redis).open();
  const prefix = `peers-floor-${process.pid}`;
  let id = 0;
  const op = async (_, lane) => {
    const i = id++;
    const ok = await clients[lane].evalsha(
      sha,
      1,
      `${prefix}:${i}`,
      '0',
      '1',
      lib.payload(i),
    );
    if (ok !== 1) throw new Error('compare-and-set refused');
  };
  return {
    op,
    counters: [counter],
    close: async () => {
      for (let cursor = '0'; ;) {
        const [next, keys] = await counter.client.scan(
          cursor,
          'MATCH',
          `${prefix}:*`,
          'COUNT',
          1000,
        );
        if (keys.length) await counter.client.del(...keys);
        if ((cursor = next) === '0') break;
      }
      for (const c of clients) await c.quit();
      await counter.close();
    },
  };
}

async function sqlite() {
  const counter = lib.countSqliteCommits();
  const Database = require('better-sqlite3');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'peers-floor-'));
  const db = new Database(path.join(dir, 'floor.db'));
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = FULL');
  db.exec('create table floor (id integer primary key, body text not null)');
  const insert = db.prepare('insert into floor (id, body) values (?, ?)');
  let id = 0;
  const op = async () => {
    insert.run(id, lib.payload(id++));
  };
  return {
    op,
    counters: [new lib.SqliteCounter(counter)],
    close: async () => {
      db.close();
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

lib.main(async () => {
  const store = process.argv[2];
  const floor = await { postgres, redis, sqlite }[store]();
  await lib.runPhases(
    { system: 'floor', store, variant: `floor-${store}` },
    () => floor.op,
    floor.counters,
    [0],
  );
  await floor.close();
});
