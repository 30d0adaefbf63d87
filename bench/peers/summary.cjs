'use strict';
/**
 * The summary of a peers run (markdown) from its JSON lines: render(lines, meta).
 * Also a command, to render a saved run again:  node bench/peers/summary.cjs <dir>/raw.jsonl
 *
 * Ratios are ours over theirs: latency < 1 and throughput > 1 mean ours is faster. A floor is
 * (our writes per flow on that store) x (the raw single write's median in the same round and mode)
 * + (our memory store's median for the same flow in the same round and mode).
 */
const fs = require('node:fs');

const PEERS = ['dbos', 'lg-sync', 'lg-async', 'lg-exit'];
const FLOORS = [
  ['postgres', 'pg_commits_per_flow'],
  ['sqlite', 'sqlite_commits_per_flow'],
  ['redis', 'redis_round_trips_per_flow'],
];
const MODES = [
  ['seq', 'sequential'],
  ['conc', 'in flight'],
  ['steady', 'sequential, warm'],
];

const median = (xs) => {
  const s = xs.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (!s.length) return NaN;
  return s.length % 2
    ? s[(s.length - 1) / 2]
    : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const fmt = (x, digits = 2) => (Number.isFinite(x) ? x.toFixed(digits) : 'n/a');
const table = (head, rows) =>
  [
    `| ${head.join(' | ')} |`,
    `|${head.map(() => '---').join('|')}|`,
    ...rows.map((r) => `| ${r.join(' | ')} |`),
  ].join('\n');

function render(lines, meta) {
  const flows = lines.filter((l) => l.system);
  const rounds = [...new Set(flows.map((l) => l.round))].sort((a, b) => a - b);
  const sizes = [
    ...new Set(flows.filter((l) => l.steps > 0).map((l) => l.steps)),
  ].sort((a, b) => a - b);
  const variants = [...new Set(flows.map((l) => l.variant))];
  const find = (round, variant, steps, mode) =>
    flows.find(
      (l) =>
        l.round === round &&
        l.variant === variant &&
        l.steps === steps &&
        l.mode === mode,
    );
  const field = (round, variant, steps, mode, key) =>
    find(round, variant, steps, mode)?.[key] ?? NaN;
  /** f(round) per round, then the median of those over rounds. */
  const perRound = (f) => [
    ...rounds.map((r) => [`round ${r}`, f(r)]),
    ['median', median(rounds.map(f))],
  ];
  const overRounds = (variant, steps, mode, key) =>
    median(rounds.map((r) => field(r, variant, steps, mode, key)));
  const conc = flows.find((l) => l.mode === 'conc')?.in_flight ?? meta.conc;
  const modeName = (mode) =>
    mode === 'seq'
      ? 'sequential'
      : mode === 'conc'
        ? `${conc} in flight`
        : `sequential, warm (after ${meta.steady ?? '?'} more flows: the JIT has compiled what runs hot)`;
  const modes = MODES.filter(([mode]) => flows.some((l) => l.mode === mode));
  const out = [];

  out.push(
    `# Peers: the same short flow on agent-adapter, DBOS Transact and LangGraph.js\n`,
  );
  out.push(
    `${meta.started} to ${meta.finished ?? '?'}; N=${meta.n}, WARMUP=${meta.warmup}, STEADY=${meta.steady ?? 0}, CONC=${conc}, ` +
      `ROUNDS=${rounds.length}, STEPS=${sizes.join(',')}; Node ${meta.node}, ${meta.cpus} CPUs, load ` +
      `${meta.loadStart} at the start and ${meta.loadEnd ?? '?'} at the end; Postgres ${meta.postgres}, ` +
      `Redis ${meta.redis}; pg_stat_statements: ${meta.pgStatStatements}.\n`,
  );
  out.push(
    `Versions: ${Object.entries(meta.versions ?? {})
      .map(([k, v]) => `${k} ${v}`)
      .join(', ')}.\n`,
  );
  if (meta.failures?.length)
    out.push(`**Failed:** ${meta.failures.join('; ')}\n`);

  out.push('## Latency and throughput (median over rounds)\n');
  for (const [mode] of modes) {
    const head = [
      'system',
      ...sizes.map(
        (s) => `${s} step${s > 1 ? 's' : ''}: median / p99 ms, flows/s`,
      ),
    ];
    const rows = variants.map((v) => [
      v,
      ...sizes.map((s, i) => {
        const at = v.startsWith('floor') ? 0 : s; // a floor is one raw write, shown once
        if (!at && i > 0) return '';
        return (
          `${fmt(overRounds(v, at, mode, 'median_ms'))} / ${fmt(overRounds(v, at, mode, 'p99_ms'))}, ` +
          `${fmt(overRounds(v, at, mode, 'per_s'), 0)}`
        );
      }),
    ]);
    out.push(
      `${modeName(mode)} (floors: one raw write):\n\n${table(head, rows)}\n`,
    );
  }

  out.push(
    '## Ours / peers on Postgres (latency: median ratio, < 1 is ours faster; throughput: > 1 is ours faster)\n',
  );
  for (const [mode] of modes) {
    const head = [
      'steps',
      'round',
      ...PEERS.flatMap((p) => [`${p} latency`, `${p} flows/s`]),
    ];
    const rows = [];
    for (const s of sizes) {
      const cols = PEERS.flatMap((peer) =>
        ['median_ms', 'per_s'].map((key) =>
          perRound(
            (r) =>
              field(r, 'ours-postgres', s, mode, key) /
              field(r, peer, s, mode, key),
          ),
        ),
      );
      for (let i = 0; i <= rounds.length; i++)
        rows.push([s, cols[0][i][0], ...cols.map((c) => fmt(c[i][1]))]);
    }
    out.push(`${modeName(mode)}:\n\n${table(head, rows)}\n`);
  }

  out.push(
    '## Ours / floor per store (floor = writes per flow x raw write median + our memory median)\n',
  );
  /** A store's floor: our writes per flow in `writesMode` x the raw write + the memory flow, in `mode`. */
  const floorMs = (r, store, key, s, writesMode, mode) =>
    field(r, `ours-${store}`, s, writesMode, key) *
      field(r, `floor-${store}`, 0, mode, 'median_ms') +
    field(r, 'ours-memory', s, mode, 'median_ms');
  /** Ours in `mode` over the floor (raw write and memory flow) measured in `floorMode`. */
  const floorTable = (mode, floorMode, title) => {
    const head = [
      'steps',
      'round',
      ...FLOORS.map(
        ([store]) => `${store}: ratio (floor ms = writes x raw + memory)`,
      ),
    ];
    const rows = [];
    for (const s of sizes) {
      const at = (r, store, key) => {
        const writes = field(r, `ours-${store}`, s, mode, key);
        const floor = floorMs(r, store, key, s, mode, floorMode);
        return {
          ratio: field(r, `ours-${store}`, s, mode, 'median_ms') / floor,
          floor,
          writes,
        };
      };
      for (const r of rounds) {
        rows.push([
          s,
          `round ${r}`,
          ...FLOORS.map(([store, key]) => {
            const x = at(r, store, key);
            return `${fmt(x.ratio)} (${fmt(x.floor)} = ${fmt(x.writes, 1)} x raw + memory)`;
          }),
        ]);
      }
      rows.push([
        s,
        'median',
        ...FLOORS.map(([store, key]) =>
          fmt(median(rounds.map((r) => at(r, store, key).ratio))),
        ),
      ]);
    }
    out.push(`${title}:\n\n${table(head, rows)}\n`);
  };
  for (const [mode] of modes) floorTable(mode, mode, modeName(mode));
  // The shared instrument (../shared/peers-bench) times its floors warm (a raw write after 200
  // more, a memory flow after every other store's) and our flows in a fresh process's first
  // ones: this is that ratio, so what this tool reports is not kinder than what judges it.
  if (modes.some(([mode]) => mode === 'steady')) {
    floorTable(
      'seq',
      'steady',
      'sequential against the warm floor (ours in a fresh process, the raw write and the memory flow warm: how the shared instrument divides)',
    );
    // The same divide applied to the floor itself: its raw writes and memory flow as timed in the
    // fresh process (sequential) over the same timed warm. What no flow of that many round trips
    // can beat there, however little it does between them.
    const rows = sizes.flatMap((s) => {
      const ratio = (r, store, key) =>
        floorMs(r, store, key, s, 'seq', 'seq') /
        floorMs(r, store, key, s, 'seq', 'steady');
      return [
        ...rounds.map((r) => [
          s,
          `round ${r}`,
          ...FLOORS.map(([store, key]) => fmt(ratio(r, store, key))),
        ]),
        [
          s,
          'median',
          ...FLOORS.map(([store, key]) =>
            fmt(median(rounds.map((r) => ratio(r, store, key)))),
          ),
        ],
      ];
    });
    out.push(
      `the floor itself under that divide (its raw writes and memory flow timed sequentially in a fresh process, over the same warm):\n\n${table(['steps', 'round', ...FLOORS.map(([store]) => store)], rows)}\n`,
    );
  }

  out.push(
    '## Writes and round trips per flow (sequential, median over rounds)\n',
  );
  out.push(
    "Postgres: pg_stat_database deltas on the system's own database (commits count every transaction, " +
      'read-only ones too; background work such as pollers or autovacuum shows as fractions). Redis: ' +
      'calls from INFO commandstats (commands inside Lua scripts included), round trips counted on the ' +
      "client's sockets. SQLite: write transactions, counted in better-sqlite3.\n",
  );
  const keys = [
    ['pg_commits_per_flow', 'pg commits'],
    ['pg_inserted_per_flow', 'rows inserted'],
    ['pg_updated_per_flow', 'rows updated'],
    ['pg_statements_per_flow', 'statements'],
    ['redis_calls_per_flow', 'redis calls'],
    ['redis_round_trips_per_flow', 'redis round trips'],
    ['sqlite_commits_per_flow', 'sqlite commits'],
  ];
  const writeRows = [];
  for (const v of variants) {
    for (const s of v.startsWith('floor') ? [0] : sizes) {
      const line = flows.find((l) => l.variant === v && l.steps === s);
      const present = keys.filter(
        ([k]) => line && k in line && line[k] !== null,
      );
      if (!present.length) continue;
      writeRows.push([
        v,
        s || 'one write',
        present
          .map(([k, name]) => `${name} ${fmt(overRounds(v, s, 'seq', k))}`)
          .join(', '),
      ]);
    }
  }
  out.push(`${table(['system', 'steps', 'per flow'], writeRows)}\n`);

  out.push('## Memory stores, 3 steps (ours: target <= 0.2 ms median)\n');
  if (sizes.includes(3)) {
    const rows = perRound((r) => r).map(([name, r]) => {
      const at = (v, mode = 'seq') =>
        name === 'median'
          ? overRounds(v, 3, mode, 'median_ms')
          : field(r, v, 3, mode, 'median_ms');
      return [
        name,
        fmt(at('ours-memory'), 3),
        fmt(at('ours-memory', 'steady'), 3),
        fmt(at('lg-memory'), 3),
      ];
    });
    const head = [
      'round',
      'ours memory median ms',
      'warm',
      'LangGraph MemorySaver median ms',
    ];
    out.push(`${table(head, rows)}\n`);
  } else out.push('(no 3-step flows in this run: STEPS does not include 3)\n');

  out.push(
    '## Fixed cost per flow and cost per step (least squares of the median over rounds: fixed + perStep x S)\n',
  );
  if (sizes.length >= 2) {
    const rows = variants
      .filter((v) => !v.startsWith('floor'))
      .map((v) => [
        v,
        ...modes.flatMap(([mode]) => {
          const fit = leastSquares(
            sizes.map((s) => [s, overRounds(v, s, mode, 'median_ms')]),
          );
          return [fmt(fit.fixed, 3), fmt(fit.perStep, 3)];
        }),
      ]);
    const short = { seq: 'seq', conc: `${conc} in flight`, steady: 'warm seq' };
    const head = [
      'system',
      ...modes.flatMap(([mode]) => [
        `${short[mode]} fixed ms`,
        `${short[mode]} per step ms`,
      ]),
    ];
    out.push(`${table(head, rows)}\n`);
  } else out.push('(one flow size only: no fit)\n');
  return out.join('\n');
}

function leastSquares(points) {
  const p = points.filter(([, y]) => Number.isFinite(y));
  if (p.length < 2) return { fixed: NaN, perStep: NaN };
  const mx = p.reduce((a, [x]) => a + x, 0) / p.length;
  const my = p.reduce((a, [, y]) => a + y, 0) / p.length;
  const sxy = p.reduce((a, [x, y]) => a + (x - mx) * (y - my), 0);
  const sxx = p.reduce((a, [x]) => a + (x - mx) ** 2, 0);
  const perStep = sxy / sxx;
  return { fixed: my - perStep * mx, perStep };
}

module.exports = { render };

if (require.main === module) {
  const lines = fs
    .readFileSync(process.argv[2], 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l));
  const meta = lines.find((l) => l.meta)?.meta ?? {};
  process.stdout.write(`${render(lines, meta)}\n`);
}
