'use strict';
/**
 * DBOS Transact: a workflow of S steps in a chain, each a trivial async function returning a small
 * object (DBOS.registerStep / DBOS.registerWorkflow), its system database `peers_dbos` on the same
 * Postgres, through a pg pool of DBOS's default size (10) that this script owns so that it can
 * flush the pool's statistics (DBOSConfig.systemDatabasePool).
 *
 *   node bench/peers/dbos.cjs
 */
const pg = require('pg');
const { DBOS } = require('@dbos-inc/dbos-sdk');
const lib = require('./lib.cjs');

const step = DBOS.registerStep(async (x) => ({ v: x + 1 }), { name: 'step' });
const workflows = new Map(
  lib.settings.steps.map((steps) => [
    steps,
    DBOS.registerWorkflow(
      async (x) => {
        let r = { v: x };
        for (let i = 0; i < steps; i++) r = await step(r.v);
        return r;
      },
      { name: `peers${steps}` },
    ),
  ]),
);

lib.main(async () => {
  const pool = new pg.Pool({
    connectionString: lib.dbUrl('peers_dbos'),
    max: 10,
  });
  DBOS.setConfig({
    name: 'peers',
    systemDatabasePool: pool,
    logLevel: 'error',
  });
  await DBOS.launch();
  const counter = await new lib.PgCounter(pg, 'peers_dbos', () => [
    pool,
  ]).open();
  const version = lib.version('@dbos-inc/dbos-sdk');
  await lib.runPhases(
    { system: 'dbos', store: 'postgres', variant: 'dbos', version },
    (steps) => async (i) => {
      const r = await workflows.get(steps)(i);
      if (r.v !== i + steps)
        throw new Error(`unexpected result ${JSON.stringify(r)}`);
    },
    [counter],
  );
  await counter.close();
  await DBOS.shutdown();
  await pool.end();
});
