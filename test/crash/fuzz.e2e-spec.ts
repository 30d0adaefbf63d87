/**
 * The crash fuzzer's deterministic sample in `npm test` (tools/crash/fuzz.ts has the trials and invariants;
 * `npm run crash -- --store … --trials … --seed …` runs as many as asked). Fixed seeds: a failure
 * names the seed that replays it.
 *
 * Memory runs in-process (simulated crashes) and is cheap; the persistent stores run worker
 * processes killed with SIGKILL, so they get fewer trials (CRASH_FUZZ_TRIALS overrides both).
 * A quarter of the workers also get injected transient store faults (invariant I6). About a third
 * of the seeds are durable-time variants (a node sleeps, a tool's approval has a deadline only the
 * clock decides), killed around the sleep checkpoint, the wake claim and the clock's decision.
 */
import { describeWithService } from '../utils/services';
import { fuzz, type FuzzStore } from '../../tools/crash/fuzz';
import { STORE_KINDS, serviceOf } from './stores';

const override = Number(process.env.CRASH_FUZZ_TRIALS ?? 0);
const MEMORY_TRIALS = override || 30;
const PROCESS_TRIALS = override || 10;
const SEED = 1;

async function sample(store: FuzzStore, trials: number) {
  const lines: string[] = [];
  const summary = await fuzz({
    store,
    trials,
    seed: SEED,
    log: (l) => lines.push(l),
  });
  if (summary.violations.length) throw new Error(lines.join('\n'));
  expect(summary.stats.kills).toBeGreaterThan(0);
  // Transient store faults are part of every sample (tools/crash/store-faults.ts).
  expect(summary.stats['faults.injected']).toBeGreaterThan(0);
  expect(
    (summary.stats['end.done'] ?? 0) + (summary.stats['end.failed'] ?? 0),
  ).toBe(trials);
  // Durable-time variants are part of every sample, and the clock decided some approval.
  expect(summary.stats['trials.timed']).toBeGreaterThan(0);
  expect(summary.stats['rounds.clock']).toBeGreaterThan(0);
  return summary;
}

describe('crash fuzzer: memory (in-process, simulated crashes)', () => {
  it(`${MEMORY_TRIALS} trials from seed ${SEED}: no violation, deciding by rerun and by resolve`, async () => {
    const summary = await sample('memory', MEMORY_TRIALS);
    // The operator resolved calls in doubt as their systems say in some rounds, reran in others.
    expect(summary.stats['decisions.resolve']).toBeGreaterThan(0);
    expect(summary.stats['decisions.rerun']).toBeGreaterThan(0);
    // Sleeping runs woken, and workers killed at the durable-time points.
    expect(summary.stats['rounds.wake']).toBeGreaterThan(0);
    expect(
      Object.keys(summary.points).filter((p) => /^(sleep|wake|clock):/.test(p))
        .length,
    ).toBeGreaterThan(0);
  });

  it('catches a harness that reruns calls in doubt without an operator decision', async () => {
    const summary = await fuzz({
      store: 'memory',
      trials: 60,
      seed: SEED,
      sabotage: 'rerun-in-doubt',
    });
    expect(summary.violations.some((v) => v.what.startsWith('I1 '))).toBe(true);
  });

  it('catches an operator who resolves "did not run" a call that ran', async () => {
    const summary = await fuzz({
      store: 'memory',
      trials: 60,
      seed: SEED,
      sabotage: 'resolve-lies',
    });
    expect(summary.violations.some((v) => v.what.startsWith('I1 '))).toBe(true);
  });
});

for (const kind of STORE_KINDS) {
  const title = `crash fuzzer: ${kind} (worker processes, SIGKILL)`;
  const body = () => {
    it(`${PROCESS_TRIALS} trials from seed ${SEED}: no violation`, async () => {
      await sample(kind, PROCESS_TRIALS);
    }, 120_000);
  };
  const service = serviceOf(kind);
  if (service) describeWithService(service, title, body);
  else describe(title, body);
}
