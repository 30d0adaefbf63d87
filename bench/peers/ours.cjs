'use strict';
/**
 * agent-adapter (the packed tarball installed into bench/peers/node_modules, as a user installs
 * it): a flow of S nodes in a chain, each ONE call of a non-idempotent tool (a trivial async
 * function returning a small object), on one store.
 *
 *   node bench/peers/ours.cjs <postgres|sqlite|redis|memory>
 *
 * Postgres: SQLCheckpointStore on a TypeORM DataSource on the database `peers_ours`, in a schema of
 * its own, dropped afterwards. SQLite: SQLiteCheckpointStore on a temporary file (WAL, synchronous
 * FULL). Redis: RedisCheckpointStore with a prefix of its own, its keys deleted afterwards.
 */
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const lib = require('./lib.cjs');

const KEY = 'peers-bench-checkpoint-key-0123456789abcdef';

/** The flow of `steps` nodes: node i calls `step` on the previous node's result. */
function makeFlow(aa, steps) {
  const { Flow, Call } = aa;
  let flow = new Flow(`peers${steps}`);
  for (let i = 0; i < steps; i++) {
    const args =
      i === 0 ? (s) => ({ x: s.x }) : (s) => ({ x: s[`r${i - 1}`].v });
    flow = flow.node(`n${i}`, Call('step', { args, into: `r${i}` }));
    if (i > 0) flow = flow.edge(`n${i - 1}`, `n${i}`);
  }
  return flow.end(`n${steps - 1}`);
}

async function openStore(aa, store) {
  if (store === 'memory')
    return {
      store: new aa.MemoryCheckpointStore(),
      counters: [],
      close: async () => {},
    };
  if (store === 'sqlite') {
    const counter = lib.countSqliteCommits();
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'peers-ours-'));
    const s = new aa.SQLiteCheckpointStore(path.join(dir, 'runs.db'));
    const close = async () => {
      await s.close();
      fs.rmSync(dir, { recursive: true, force: true });
    };
    return { store: s, counters: [new lib.SqliteCounter(counter)], close };
  }
  if (store === 'redis') {
    const roundTrips = lib.countRedisRoundTrips();
    const Redis = require('ioredis');
    const prefix = `peers-ours-${process.pid}`;
    const s = new aa.RedisCheckpointStore(
      () => new Redis(lib.settings.redisUrl),
      { prefix },
    );
    const counter = await new lib.RedisCounter(Redis, roundTrips).open();
    const close = async () => {
      await s.close();
      let cursor = '0';
      do {
        const [next, keys] = await counter.client.scan(
          cursor,
          'MATCH',
          `*${prefix}*`,
          'COUNT',
          1000,
        );
        cursor = next;
        if (keys.length) await counter.client.del(...keys);
      } while (cursor !== '0');
      await counter.close();
    };
    return { store: s, counters: [counter], close };
  }
  if (store === 'postgres') {
    require('reflect-metadata');
    const pg = require('pg');
    const { DataSource } = require('typeorm');
    const ds = await new DataSource({
      type: 'postgres',
      url: lib.dbUrl('peers_ours'),
    }).initialize();
    const schema = `peers_ours_${process.pid}`;
    const s = new aa.SQLCheckpointStore(ds, { schema });
    const counter = await new lib.PgCounter(pg, 'peers_ours', () => [
      ds.driver.master,
    ]).open();
    const close = async () => {
      await s.close();
      await ds.query(`drop schema if exists ${schema} cascade`);
      await ds.destroy();
      await counter.close();
    };
    return { store: s, counters: [counter], close };
  }
  throw new Error(`unknown store ${store}`);
}

/** The flows' runner (the `step` tool, the bench's key) on a checkpoint store already open. */
function runnerOn(aa, checkpoints) {
  const tools = new aa.ToolRegistry().register('step', async (a) => ({
    v: a.x + 1,
  }));
  return new aa.FlowRunner(new aa.Executor(tools), {
    checkpoints,
    checkpointKey: KEY,
  });
}

/** A runner of the flows on `store`, as the phases below and warmup.cjs use it. */
async function openRunner(aa, store) {
  const opened = await openStore(aa, store);
  return { ...opened, runner: runnerOn(aa, opened.store) };
}

/** `once(i)`: runs flow i of `flow` (of `steps` nodes) under run ids tagged `tag`, checks its result. */
function flowOnce(runner, flow, steps, tag) {
  return async (i) => {
    const r = await runner.run(
      flow,
      { x: i },
      { runId: `${tag}-${steps}-${i}` },
    );
    if (r.status !== 'done' || r.state[`r${steps - 1}`].v !== i + steps) {
      throw new Error(`unexpected result ${JSON.stringify(r)}`);
    }
  };
}

module.exports = { makeFlow, runnerOn, openRunner, flowOnce };

if (require.main === module)
  lib.main(async () => {
    const store = process.argv[2];
    const aa = require('agent-adapter');
    const version = lib.version('agent-adapter');
    const opened = await openRunner(aa, store);
    const { runner } = opened;
    const tag = `${process.pid}-${Date.now().toString(36)}`;
    await lib.runPhases(
      { system: 'ours', store, variant: `ours-${store}`, version },
      (steps) => flowOnce(runner, makeFlow(aa, steps), steps, tag),
      opened.counters,
    );
    runner.close();
    await opened.close();
  });
