'use strict';
/**
 * What our Postgres writes cost the server, statement by statement, against the raw floor's
 * single-row INSERT commit: timed by pgbench (no Node in the loop), so the server's share of a
 * flow is read apart from the client's CPU and V8's warm-up, which bench:peers' window measures
 * together with it.
 *
 *   npm run bench:statements       # from the repository root; SECONDS (2), ROUNDS (7), CONC (8)
 *
 * 1. One 3-step flow (bench:peers' flow, ours.cjs) runs on the packed library on Postgres, in a
 *    schema of its own in the database `peers_stmts`; the named statements its four writes send
 *    are captured with their values.
 * 2. pgbench scripts are made of them: the run id comes from a pgbench random variable, every
 *    other value is a literal (the server plans them as constants; the library binds them). Since
 *    schema version 12 the library keeps a flow's call records in its checkpoint rows, so its
 *    writes have no call rows and only `shipped`, `no secondary` and the floors run; the other
 *    variants price the earlier layout, for a build that writes call rows. The variants, each
 *    four statements (one flow's writes, each its own commit):
 *    - `shipped`: the writes as sent;
 *    - `no secondary`: the same on a second copy of the tables (the library's own DDL) without
 *      the runs table's secondary indexes: what they cost (they serve recovery, due work and
 *      the operators' listings, so they are not optional);
 *    - `head + checkpoint`: the writes without their call rows;
 *    - `calls in the checkpoint row`: the same, with the call records' bytes added to the
 *      checkpoint row (what keeping a write's calls in its checkpoint row would cost);
 *    - `calls in the checkpoint row, duplicates probed`: the same, its head write also checking
 *      that no call key is stored already (`probed`: what that layout would need to keep refusing
 *      a duplicate record);
 *    - `head`: the head write alone (the INSERT at step 0, the UPDATE after);
 *    - `floor`: four raw single-row INSERTs of ~500 B (bench:peers' Postgres floor);
 *    - `floor (update)`: four version-checked UPDATEs of a ~500 B row by its key: the rawest
 *      compare-and-set, which every write of ours is (on the run's head row).
 * 3. Each runs SECONDS with one client, `-M prepared` (named statements, generic plans after
 *    five executions, as the library's), in ROUNDS interleaved rounds; then `shipped` and `floor`
 *    with CONC clients (flows per second the server sustains). WAL bytes per flow are read from
 *    `pg_current_wal_lsn()` around each run.
 *
 * Needs `pgbench` on the PATH (Debian: postgresql-client). Drops `peers_stmts` at the end.
 */
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const lib = require('./lib.cjs');

const count = (name, fallback) =>
  lib.wholeSetting('bench:statements', name, fallback);
const SECONDS = count('SECONDS', 2);
const ROUNDS = count('ROUNDS', 7);
const CONC = count('CONC', 8);
const DB = 'peers_stmts';

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.floor(s.length / 2)] : NaN;
};

/** The named statements of run `runId`'s writes, in the order they were sent. */
function captureWrites(pg, runId) {
  const sent = [];
  const query = pg.Client.prototype.query;
  pg.Client.prototype.query = function (config, ...rest) {
    if (config && config.name && config.values && config.values[0] === runId)
      sent.push({ text: config.text, values: [...config.values] });
    return query.call(this, config, ...rest);
  };
  return { sent, stop: () => (pg.Client.prototype.query = query) };
}

/**
 * A value as a SQL literal pgbench leaves alone: it reads `:name` as a variable anywhere, so a
 * colon before a letter is spelled `chr(58)` (folded into a constant when the plan is made).
 */
function literal(value) {
  if (value === null || value === undefined) return 'NULL';
  if (typeof value === 'number') return String(value);
  const quoted = `'${String(value).replace(/'/g, "''")}'`;
  return quoted.replace(/:(?=[A-Za-z_])/g, "' || chr(58) || '");
}

/** One statement of a pgbench script: `$1` (the run id) from `:id`, the rest as literals. */
function scripted(text, values, schemaFrom, schemaTo) {
  return `${text
    .split(schemaFrom)
    .join(schemaTo)
    .replace(/\$(\d+)/g, (_, n) =>
      n === '1' ? "('stmt-' || :id)" : literal(values[Number(n) - 1]),
    )
    .replace(/\s+/g, ' ')};`;
}

/** The write's parts: its head CTE, the head write inside it, the call rows, the outer INSERT. */
function parts(text) {
  const m =
    /^(WITH head AS \(([\s\S]*?) RETURNING run_id\)), (calls AS \([\s\S]*?\) AS c\(superstep, segment, seq, sealed\)\))\s+(INSERT INTO [\s\S]*)$/.exec(
      text,
    );
  return m && { headCte: m[1], head: m[2], calls: m[3], outer: m[4] };
}

/**
 * The write's values with its call records' sealed texts appended to its checkpoint's: the bytes
 * one row would hold if a write's calls were kept in its checkpoint row (a layout question).
 */
function merged(write, p) {
  const values = [...write.values];
  const sealed = /, \$(\d+) FROM head/.exec(p.outer);
  if (sealed)
    values[Number(sealed[1]) - 1] += callRows(write, p)
      .map((c) => c.sealed)
      .join('');
  return values;
}

/** The write's call rows, as their parameters bind them: superstep, segment, seq and sealed each. */
function callRows(write, p) {
  const refs = [...p.calls.matchAll(/\$(\d+)/g)].map((m) => Number(m[1]));
  const rows = [];
  for (let i = 0; i + 3 < refs.length; i += 4) {
    const [superstep, segment, seq, sealed] = refs
      .slice(i, i + 4)
      .map((n) => write.values[n - 1]);
    rows.push({ superstep, segment, seq, sealed });
  }
  return rows;
}

/**
 * The head write of a write whose calls ride in its checkpoint row, with the two probes such a
 * layout needs to refuse a duplicate record (the calls table's key no longer sees those): none of
 * the write's call keys among the run's call rows, nor among the keys the previous checkpoint row
 * holds (a short text column; priced here on the row's `status`). Step 0's INSERT needs neither:
 * its run is new.
 */
function probed(write, p, schema) {
  if (!p.head.startsWith('UPDATE ')) return p.head;
  const keys = callRows(write, p).map((c) => [c.superstep, c.seq]);
  const pairs = keys.map(([superstep, seq]) => `(${superstep}, ${seq})`);
  const found = keys.map(
    ([superstep, seq]) => `position(' ${superstep}.${seq} ' IN k.status) > 0`,
  );
  return `${p.head}
      AND NOT EXISTS (SELECT 1 FROM "${schema}"."aa_calls" c WHERE c.run_id = $1 AND c.segment = $4
        AND (c.superstep, c.seq) IN (${pairs.join(', ')}))
      AND NOT EXISTS (SELECT 1 FROM "${schema}"."aa_checkpoints" k WHERE k.run_id = $1 AND k.step = $2 - 1
        AND k.segment = $4 AND (${found.join(' OR ')}))`;
}

function pgbench(script, clients, seconds) {
  const out = pgbenchOutput(script, clients, seconds);
  const tps = Number(/tps = ([\d.]+)/.exec(out)?.[1]);
  const done = Number(
    /number of transactions actually processed: (\d+)/.exec(out)?.[1],
  );
  const failed = Number(/number of failed transactions: (\d+)/.exec(out)?.[1]);
  const lines = out.split('\n');
  const at = lines.findIndex((l) => l.includes('statement latencies'));
  const ms = lines
    .slice(at + 1)
    .map((l) => /^\s+([\d.]+)\s+\d+\s+(.*)$/.exec(l))
    .filter((m) => m && !m[2].startsWith('\\set'))
    .map((m) => Number(m[1]));
  return { tps, done, failed, ms };
}

/** pgbench's report; its own error text when it fails (a statement the server refused). */
function pgbenchOutput(script, clients, seconds) {
  const args = ['-n', '-M', 'prepared', '-r', '-c', String(clients)];
  args.push('-j', String(Math.min(clients, 2)), '-T', String(seconds));
  try {
    return execFileSync('pgbench', [...args, '-f', script, lib.dbUrl(DB)], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
    });
  } catch (error) {
    throw new Error(`pgbench failed on ${script}: ${error.stderr || error}`);
  }
}

lib.main(async () => {
  try {
    execFileSync('pgbench', ['--version'], { stdio: 'ignore' });
  } catch {
    throw new Error(
      'bench:statements needs pgbench on the PATH (Debian: apt-get install postgresql-client)',
    );
  }
  const pg = require('pg');
  const aa = require('agent-adapter');
  const ours = require('./ours.cjs');
  require('reflect-metadata');
  const { DataSource } = require('typeorm');

  await lib.recreate(DB);
  const ds = await new DataSource({
    type: 'postgres',
    url: lib.dbUrl(DB),
  }).initialize();
  const schema = `stmts_${process.pid}`;
  const bare = `${schema}_bare`;
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'peers-stmts-'));
  try {
    // The library's own tables, twice: as it makes them, and without the runs' secondary indexes.
    const store = new aa.SQLCheckpointStore(ds, { schema });
    const bareStore = new aa.SQLCheckpointStore(ds, { schema: bare });
    await bareStore.list({ limit: 1 });
    const secondary = await ds.query(
      `SELECT i.indexrelid::regclass::text AS name FROM pg_index i
         JOIN pg_class c ON c.oid = i.indrelid JOIN pg_namespace n ON n.oid = c.relnamespace
       WHERE n.nspname = $1 AND c.relname = 'aa_runs'
         AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = i.indexrelid)`,
      [bare],
    );
    for (const { name } of secondary) await ds.query(`DROP INDEX ${name}`);

    const runner = ours.runnerOn(aa, store);
    const run = ours.flowOnce(runner, ours.makeFlow(aa, 3), 3, 'capture');
    const capture = captureWrites(pg, 'capture-3-0');
    await run(0);
    capture.stop();
    runner.close();
    const writes = capture.sent;
    if (writes.length !== 4)
      throw new Error(
        `expected 4 writes in a 3-step flow, captured ${writes.length}`,
      );

    const from = `"${schema}".`;
    const header = '\\set id random(1, 9000000000000000000)';
    const script = (name, statements) => {
      const file = path.join(tmp, `${name.replace(/\W+/g, '_')}.pgb`);
      fs.writeFileSync(file, [header, ...statements].join('\n') + '\n');
      return { name, file };
    };
    const each = (f) => writes.map((w) => f(w, parts(w.text)));
    const variants = [
      script(
        'floor',
        [0, 1, 2, 3].map(
          (k) =>
            `INSERT INTO public.floor (id, body) VALUES (CAST(:id AS bigint) + ${k}, ${literal(lib.payload(k))});`,
        ),
      ),
      // The rawest compare-and-set: a version-checked UPDATE of one ~500 B row by its key (HOT, on
      // a table with room for it, as the runs table has).
      script(
        'floor (update)',
        [0, 1, 2, 3].map(
          (k) =>
            `UPDATE public.floor_cas SET v = v + 1, body = ${literal(lib.payload(k))} WHERE id = CAST(:id AS bigint) % 10000 * 4 + ${k} AND v >= 0;`,
        ),
      ),
      script(
        'shipped',
        each((w) => scripted(w.text, w.values, from, from)),
      ),
      script(
        'no secondary',
        each((w) => scripted(w.text, w.values, from, `"${bare}".`)),
      ),
    ];
    if (writes.every((w) => parts(w.text))) {
      variants.push(
        script(
          'head + checkpoint',
          each((w, p) =>
            scripted(`${p.headCte} ${p.outer}`, w.values, from, from),
          ),
        ),
        script(
          'calls in the checkpoint row',
          each((w, p) =>
            scripted(`${p.headCte} ${p.outer}`, merged(w, p), from, from),
          ),
        ),
        script(
          'calls in the checkpoint row, duplicates probed',
          each((w, p) =>
            scripted(
              `WITH head AS (${probed(w, p, schema)} RETURNING run_id) ${p.outer}`,
              merged(w, p),
              from,
              from,
            ),
          ),
        ),
        script(
          'head',
          each((w, p) => scripted(p.head, w.values, from, from)),
        ),
      );
    } else {
      console.error(
        '[stmts] the writes have no call rows (schema 12 keeps them in the checkpoint row): only the shipped variants run',
      );
    }
    await ds.query(
      'CREATE TABLE public.floor (id bigint PRIMARY KEY, body text NOT NULL)',
    );
    await ds.query(
      'CREATE TABLE public.floor_cas (id bigint PRIMARY KEY, v bigint NOT NULL, body text NOT NULL) WITH (fillfactor = 70)',
    );
    await ds.query(
      'INSERT INTO public.floor_cas SELECT i, 0, $1 FROM generate_series(0, 39999) i',
      [lib.payload(0)],
    );

    const walNow = async () =>
      (await ds.query('SELECT pg_current_wal_lsn()::text AS lsn'))[0].lsn;
    const walBytes = async (a, b) =>
      Number(
        (
          await ds.query('SELECT pg_wal_lsn_diff($2, $1)::float8 AS d', [a, b])
        )[0].d,
      );
    const results = new Map(variants.map((v) => [v.name, []]));
    for (let round = 1; round <= ROUNDS; round++) {
      for (const v of variants) {
        const before = await walNow();
        const r = pgbench(v.file, 1, SECONDS);
        r.walPerFlow = (await walBytes(before, await walNow())) / r.done;
        results.get(v.name).push(r);
        console.error(
          `[stmts] round ${round} ${v.name}: ${r.ms.join(' / ')} ms, ${r.failed} failed`,
        );
      }
    }
    const concurrent = new Map();
    for (const v of variants.filter((v) =>
      ['floor', 'shipped'].includes(v.name),
    ))
      concurrent.set(v.name, pgbench(v.file, CONC, SECONDS));

    const floor = results.get('floor');
    const shipped = results.get('shipped');
    const sum = (xs) => xs.reduce((a, b) => a + b, 0);
    const floorPerInsert = floor.map((r) => median(r.ms));
    const out = [
      '# Server time per statement: our Postgres writes against a raw INSERT commit (pgbench)',
      '',
      `${new Date().toISOString()}; SECONDS=${SECONDS}, ROUNDS=${ROUNDS}, CONC=${CONC}; ${execFileSync('pgbench', ['--version'], { encoding: 'utf8' }).trim()}; load ${os
        .loadavg()
        .map((x) => x.toFixed(1))
        .join(' ')}`,
      '',
      'One client, `-M prepared`, each statement its own commit (synchronous_commit as the server has it). Statement columns: the four writes of one 3-step flow (step 0, 1, 2, the final one); the floor: four single-row INSERTs. Medians over the rounds; "/ floor" and "/ shipped" are the flow\'s sum over the floor\'s four INSERTs and over the shipped writes, per round (the VM\'s speed moves between rounds), then the median.',
      '',
      '| variant | write 1 ms | write 2 | write 3 | write 4 | flow ms | / floor | / shipped | WAL bytes a flow |',
      '| --- | --- | --- | --- | --- | --- | --- | --- | --- |',
    ];
    for (const [name, rs] of results) {
      const cols = [0, 1, 2, 3].map((k) => median(rs.map((r) => r.ms[k])));
      const sums = rs.map((r) => sum(r.ms));
      const ratios = sums.map((s, k) => s / sum(floor[k].ms));
      const toShipped = sums.map((s, k) => s / sum(shipped[k].ms));
      out.push(
        `| ${name} | ${cols.map((x) => x.toFixed(3)).join(' | ')} | ${median(sums).toFixed(3)} | ${median(ratios).toFixed(2)} | ${median(toShipped).toFixed(2)} | ${Math.round(median(rs.map((r) => r.walPerFlow)))} |`,
      );
    }
    out.push(
      '',
      `The floor's single INSERT: ${floorPerInsert.map((x) => x.toFixed(3)).join(', ')} ms by round.`,
      '',
      `${CONC} clients: ours ${concurrent.get('shipped').tps.toFixed(0)} flows/s (four writes each), the floor ${concurrent.get('floor').tps.toFixed(0)} groups of four INSERTs/s (ratio ${(concurrent.get('shipped').tps / concurrent.get('floor').tps).toFixed(2)}).`,
    );
    console.log(out.join('\n'));
    const dir = path.join(__dirname, '..', 'out', 'peers');
    fs.mkdirSync(dir, { recursive: true });
    const file = path.join(
      dir,
      `statements-${new Date().toISOString().replace(/[:.]/g, '-')}.md`,
    );
    fs.writeFileSync(file, out.join('\n') + '\n');
    console.log(`\n(written to ${path.relative(process.cwd(), file)})`);
    await store.close();
    await bareStore.close();
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
    await ds.destroy();
    await lib.dropDatabase(DB);
  }
});
