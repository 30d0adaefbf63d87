/**
 * `npm run bench:compare`: the last `npm run bench` results (bench/out/superstep.json, written by
 * that run) against the targets of issue 3 / issue 7, one line per store. Exit code 1 when a
 * target is not met, 2 when there are no results yet.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

interface Row {
  store: string;
  superstepMs: number;
  storeMs: number;
  floorMs: number | null;
  target?: number;
}

interface Results {
  at: string;
  command: string;
  load: number[];
  supersteps: number;
  rounds: number;
  rows: Row[];
}

const file = join(__dirname, 'out', 'superstep.json');
if (!existsSync(file)) {
  console.error(`No results yet (${file}): run npm run bench first.`);
  process.exit(2);
}
const results = JSON.parse(readFileSync(file, 'utf8')) as Results;
console.log(`last run: ${results.at}  (${results.command})`);
console.log(
  `load average then: ${results.load.map((l) => l.toFixed(2)).join(' ')}\n`,
);
console.log(
  'measure                              store      measured   target   verdict',
);
let missed = 0;
for (const r of results.rows) {
  if (r.floorMs === null || r.target === undefined) continue;
  for (const [what, value] of [
    ['superstep / floor (end to end)', r.superstepMs / r.floorMs],
    ['store writes / floor', r.storeMs / r.floorMs],
  ] as const) {
    const met = value <= r.target;
    if (!met && what.startsWith('superstep')) missed++;
    console.log(
      `${what.padEnd(36)} ${r.store.padEnd(10)} ${`${value.toFixed(2)}x`.padStart(8)}   ${`<= ${r.target}x`.padStart(7)}   ${met ? 'met' : 'NOT MET'}`,
    );
  }
}
process.exit(missed ? 1 : 0);
