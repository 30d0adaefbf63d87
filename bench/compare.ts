/**
 * `npm run bench:compare`: the last results of every bench suite (bench/out/<suite>.json, written
 * by `npm run bench`) against the targets of issues 3 and 7, one line per figure. Exit code 1 when
 * a target is not met, 2 when there are no results yet.
 */
import { met, readResults } from './lib/results';

const suites = readResults();
if (!suites.length) {
  console.error('No results yet (bench/out/): run npm run bench first.');
  process.exit(2);
}
let missed = 0;
for (const s of suites) {
  console.log(
    `\n${s.suite}: ${s.at}  (${s.command}); load average then ${s.load.map((l) => l.toFixed(2)).join(' ')}\n`,
  );
  console.log(
    `${'measure'.padEnd(44)} ${'store'.padEnd(22)} ${'measured'.padStart(12)}   ${'target'.padStart(12)}   verdict`,
  );
  for (const m of s.measures) {
    const verdict = met(m);
    if (verdict === false) missed++;
    const value = `${m.value.toFixed(m.unit === 'x' ? 2 : 3)}${m.unit === 'x' ? 'x' : ` ${m.unit}`}`;
    const target =
      m.target === undefined
        ? ''
        : `${(m.better ?? 'lower') === 'lower' ? '<=' : '>='} ${m.target}${m.unit === 'x' ? 'x' : ` ${m.unit}`}`;
    console.log(
      `${m.measure.padEnd(44)} ${m.store.padEnd(22)} ${value.padStart(12)}   ${target.padStart(12)}   ${verdict === undefined ? '' : verdict ? 'met' : 'NOT MET'}${m.note ? `  (${m.note})` : ''}`,
    );
  }
}
process.exit(missed ? 1 : 0);
