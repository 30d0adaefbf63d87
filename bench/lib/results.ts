/**
 * The one format every benchmark suite writes its figures in, for `npm run bench:compare`:
 * `bench/out/<suite>.json` (not committed; bench/RESULTS.md is the record). A suite keeps its own
 * console table; this is only what is compared against the targets of issues 3 and 7.
 */
import {
  existsSync,
  mkdirSync,
  readFileSync,
  readdirSync,
  writeFileSync,
} from 'node:fs';
import { loadavg } from 'node:os';
import { join } from 'node:path';

/** One measured figure; `target` (with `better`) makes it a checked one. */
export interface Measure {
  /** What was measured, e.g. `superstep / floor (end to end)`. */
  measure: string;
  /** The backend or configuration, e.g. `postgres`, `redis, 2 processes`. */
  store: string;
  value: number;
  /** `x` for a ratio, `ms`, `MB`, `runs/s`… */
  unit: string;
  /** The limit the value must stay under (`better: 'lower'`) or reach (`better: 'higher'`). */
  target?: number;
  better?: 'lower' | 'higher';
  /** A short remark printed beside the verdict (e.g. a reason a target is not met). */
  note?: string;
}

export interface SuiteResults {
  suite: string;
  at: string;
  command: string;
  load: number[];
  measures: Measure[];
}

const OUT = join(__dirname, '..', 'out');

export function met(m: Measure): boolean | undefined {
  if (m.target === undefined) return undefined;
  return (m.better ?? 'lower') === 'lower'
    ? m.value <= m.target
    : m.value >= m.target;
}

/** Writes the suite's figures to bench/out/<suite>.json (replacing the last run's). */
export function writeResults(suite: string, measures: Measure[]): void {
  mkdirSync(OUT, { recursive: true });
  const results: SuiteResults = {
    suite,
    at: new Date().toISOString(),
    command: `npm run bench -- ${process.argv.slice(2).join(' ')}`.trim(),
    load: loadavg(),
    measures,
  };
  writeFileSync(
    join(OUT, `${suite}.json`),
    `${JSON.stringify(results, null, 2)}\n`,
  );
}

/** Every suite's last results, oldest first. */
export function readResults(): SuiteResults[] {
  if (!existsSync(OUT)) return [];
  return readdirSync(OUT)
    .filter((f) => f.endsWith('.json'))
    .map((f) => JSON.parse(readFileSync(join(OUT, f), 'utf8')) as SuiteResults)
    .filter((r) => Array.isArray(r.measures))
    .sort((a, b) => a.at.localeCompare(b.at));
}
