/**
 * The crash fuzzer's injected store faults (issue 16 item 6): a worker's store writes fail as a
 * dropped connection makes them fail, either before the write reaches the store or after it landed
 * (its reply lost). The writer must read the head back and write again (confirmed-write.ts): a
 * fault the retry absorbs loses no record, and a store that stays down past the retry budget stops
 * the run with CheckpointStoreUnavailable and releases it. Shared by the harness (fuzz.ts, which
 * draws the plans and checks the reports) and the workers (test/crash/worker.ts, MemoryCluster).
 */
import type { CheckpointStore } from 'agent-adapter';
import { STORE_RETRY } from 'agent-adapter/exec/durable/confirmed-write';
import { InterceptingStore, type StoreWrite } from 'agent-adapter/testing';
import { bodyOf, type Rng } from './fuzz-flow';

export interface FaultPlan {
  /** The write attempt (from 1, retries counted) the faults begin at. */
  n: number;
  /** Before the write reaches the store, or after it landed (the reply lost). */
  moment: 'before' | 'after';
  /** Attempts failed in a row from `n`. Before, at least STORE_RETRY.attempts: an outage. */
  times: number;
}

/** What a worker's faults hit: each call record of a failed write, and how many faults. */
export interface FaultReport {
  injected: number;
  records: Array<{ superstep: number; phase: string; sealed: string }>;
}

/** The error a reset connection gives: transient (`transientReason`: ECONNRESET). */
export function connectionReset(): Error {
  return Object.assign(new Error('read ECONNRESET (injected)'), {
    code: 'ECONNRESET',
    syscall: 'read',
  });
}

/** Whether the plan keeps the store down past the writer's retry budget. */
export function isOutage(plan: FaultPlan | undefined): boolean {
  return plan?.moment === 'before' && plan.times >= STORE_RETRY.attempts;
}

/**
 * A plan for one worker, or none: 1-3 faults at a random write, before or after it lands; one
 * plan in eight is an outage (the whole retry budget and one more). `writes`: the uncrashed run's.
 */
export function faultPlan(
  rng: Rng,
  writes: number,
  rate: number,
): FaultPlan | undefined {
  if (!rng.bool(rate)) return undefined;
  const n = 1 + rng.int(Math.max(1, writes));
  if (rng.bool(1 / 8))
    return { n, moment: 'before', times: STORE_RETRY.attempts + 1 };
  return { n, moment: rng.bool() ? 'before' : 'after', times: 1 + rng.int(3) };
}

/** `store` with the plan's faults injected into its writes, each noted in `report`. */
export function faulty(
  store: CheckpointStore,
  plan: FaultPlan | undefined,
  report: FaultReport,
): CheckpointStore {
  if (!plan) return store;
  let attempts = 0;
  let left = plan.times;
  const fail = (w: StoreWrite): never => {
    left--;
    report.injected++;
    for (const r of w.records)
      report.records.push({
        superstep: r.superstep,
        phase: String(bodyOf(r.sealed).phase),
        sealed: r.sealed,
      });
    throw connectionReset();
  };
  return new InterceptingStore(store, {
    before: (w) => {
      if (++attempts >= plan.n && left > 0 && plan.moment === 'before') fail(w);
    },
    after: (w) => {
      if (attempts >= plan.n && left > 0 && plan.moment === 'after') fail(w);
    },
  });
}
