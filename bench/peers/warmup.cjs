'use strict';
/**
 * How a fresh process warms up: our library (the packed tarball, as bench:peers installs it) on
 * each store, one child process per store and kind, each from its first flow.
 *
 *   npm run bench:warmup        # from the repository root; STORES, FLOWS (2000), BLOCK (100), STEPS (3)
 *
 * The judged phase of bench:peers (50 warm-up flows, then 500) runs while V8 still runs most of a
 * flow unoptimized; this shows how long that lasts and what it costs, with figures that do not
 * depend on a quiet machine as much as latency does:
 *
 * - `curve`: default flags; per block of BLOCK flows from the first, the median latency and the
 *   process's CPU per flow (main thread, compiler and GC threads).
 * - `unoptimized`: `--no-opt` (no optimizing compiler); the process's CPU per flow over the second
 *   half of FLOWS: what running the flow's code unoptimized costs, which the judged phase mostly
 *   pays. Less code per flow lowers it; it moves little with the machine's load.
 * - `counts`: promises, timers and immediates made per flow (an async hook counting inits over 200
 *   flows after 50): exact, the same on every run of the same tree.
 *
 * Postgres uses the database `peers_ours` (dropped and made again first, dropped after).
 */
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const { createInterface } = require('node:readline');
const lib = require('./lib.cjs');

const STORES = (process.env.STORES || 'postgres,sqlite,redis,memory')
  .split(',')
  .map((s) => s.trim())
  .filter(Boolean);
const FLOWS = Number(process.env.FLOWS || 2000);
const BLOCK = Number(process.env.BLOCK || 100);
const STEPS = Number(process.env.STEPS || 3);
const KINDS = ['curve', 'unoptimized', 'counts'];

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const cpuMs = (since) => {
  const d = process.cpuUsage(since);
  return (d.user + d.system) / 1000;
};

/** One child: runs its kind on one store and prints one JSON line. */
async function measure(store, kind) {
  const aa = require('agent-adapter');
  const ours = require('./ours.cjs');
  const counts = new Map();
  let counting = false;
  if (kind === 'counts')
    require('node:async_hooks')
      .createHook({
        init(_, type) {
          if (counting) counts.set(type, (counts.get(type) ?? 0) + 1);
        },
      })
      .enable();
  const opened = await ours.openRunner(aa, store);
  const flow = ours.makeFlow(aa, STEPS);
  const run = ours.flowOnce(
    opened.runner,
    flow,
    STEPS,
    `${process.pid}-${Date.now().toString(36)}`,
  );
  let next = 0;
  const once = () => run(next++);
  const out = { store, kind, steps: STEPS };
  if (kind === 'counts') {
    for (let i = 0; i < 50; i++) await once();
    counting = true;
    for (let i = 0; i < 200; i++) await once();
    counting = false;
    out.per_flow = Object.fromEntries(
      [...counts].map(([type, n]) => [type, n / 200]),
    );
  } else {
    out.blocks = [];
    for (let b = 0; b < FLOWS / BLOCK; b++) {
      const cpu = process.cpuUsage();
      const { median_ms } = await lib.timeRuns(BLOCK, 1, once);
      out.blocks.push({
        from: b * BLOCK,
        median_ms,
        cpu_ms_per_flow: lib.round3(cpuMs(cpu) / BLOCK),
      });
    }
  }
  opened.runner.close();
  await opened.close();
  lib.emit(out);
}

function child(store, kind) {
  const flags = kind === 'unoptimized' ? ['--no-opt'] : [];
  return new Promise((resolve, reject) => {
    const p = spawn(
      process.execPath,
      [...flags, __filename, '--child', store, kind],
      { cwd: __dirname, stdio: ['ignore', 'pipe', 'inherit'] },
    );
    let line;
    createInterface({ input: p.stdout }).on('line', (l) => {
      if (l.startsWith('{')) line = JSON.parse(l);
      else process.stderr.write(`${l}\n`);
    });
    p.on('error', reject);
    p.on('close', (code) =>
      code === 0 && line
        ? resolve(line)
        : reject(new Error(`${store} ${kind} exited with ${code}`)),
    );
  });
}

/** The markdown of a run's lines. */
function render(lines) {
  const out = [];
  const at = (store, kind) =>
    lines.find((l) => l.store === store && l.kind === kind);
  const curves = lines.filter((l) => l.kind === 'curve');
  if (curves.length) {
    const froms = curves[0].blocks.map((b) => b.from);
    const head = ['store', ...froms.map((f) => `${f}`)];
    const rows = curves.flatMap((c) => [
      [`${c.store} ms`, ...c.blocks.map((b) => b.median_ms.toFixed(2))],
      [
        `${c.store} CPU ms/flow`,
        ...c.blocks.map((b) => b.cpu_ms_per_flow.toFixed(2)),
      ],
    ]);
    out.push(
      `Latency median and process CPU per flow, by block of ${BLOCK} flows from the first (default flags):\n`,
      `| ${head.join(' | ')} |`,
      `|${head.map(() => '---').join('|')}|`,
      ...rows.map((r) => `| ${r.join(' | ')} |`),
      '',
    );
  }
  const tail = (l) =>
    l
      ? median(
          l.blocks.slice(l.blocks.length / 2).map((b) => b.cpu_ms_per_flow),
        )
      : NaN;
  out.push(
    'CPU per flow over the second half, warm (default flags) and unoptimized (`--no-opt`), and what a flow makes (per flow):\n',
    '| store | warm CPU ms | unoptimized CPU ms | promises | timers | immediates | other |',
    '|---|---|---|---|---|---|---|',
  );
  for (const store of STORES) {
    const c = at(store, 'counts')?.per_flow ?? {};
    const { PROMISE, Timeout, Immediate, ...other } = c;
    out.push(
      `| ${store} | ${tail(at(store, 'curve')).toFixed(3)} | ${tail(at(store, 'unoptimized')).toFixed(3)} | ` +
        `${PROMISE ?? 0} | ${Timeout ?? 0} | ${Immediate ?? 0} | ` +
        `${
          Object.entries(other)
            .map(([k, v]) => `${k} ${v}`)
            .join(', ') || '-'
        } |`,
    );
  }
  return out.join('\n');
}

async function main() {
  const started = new Date().toISOString();
  const lines = [];
  for (const store of STORES) {
    for (const kind of KINDS) {
      if (store === 'postgres') await lib.recreate('peers_ours');
      console.error(`[warmup] ${store} ${kind}`);
      lines.push(await child(store, kind));
    }
  }
  if (STORES.includes('postgres')) await lib.dropDatabase('peers_ours');
  const text =
    `# Warm-up of a fresh process: ${STEPS}-step flows, ${started}\n\n` +
    `${render(lines)}\n`;
  const dir = path.join(__dirname, '..', 'out', 'peers');
  fs.mkdirSync(dir, { recursive: true });
  const file = path.join(dir, `warmup-${started.replace(/[:.]/g, '-')}`);
  fs.writeFileSync(`${file}.md`, text);
  fs.writeFileSync(
    `${file}.jsonl`,
    lines.map((l) => JSON.stringify(l)).join('\n'),
  );
  process.stdout.write(
    `${text}\n(written to ${path.relative(process.cwd(), file)}.md and .jsonl)\n`,
  );
}

if (process.argv[2] === '--child')
  lib.main(() => measure(process.argv[3], process.argv[4]));
else lib.main(main);
