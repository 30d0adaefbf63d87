/**
 * The crash fuzzer (issue 7):
 *
 *   npm run crash -- --store <memory|sqlite|postgres|redis|all> --trials N --seed S
 *     [--concurrency C] [--mode random|named|both] [--faults RATE]
 *     [--decide rerun|resolve|mixed] [--sabotage rerun-in-doubt|resolve-lies] [--time] [--quiet]
 *
 * Durable time: about a third of the seeds (every seed with `--time`) are a variant whose flow has a
 * node that sleeps (15-45 ms) and mostly a tool whose approval has a 15-45 ms deadline only the clock
 * decides (deny, approve or fail). The harness (and the reference run) wait for a sleeping run's
 * wake time or a deadline, then send one to three recoverers at once (they race for the wake claim,
 * or as clocks for the decision); a named-mode time trial is killed at a durable-time point
 * (fuzz-flow.ts TIME_POINTS: the sleep checkpoint, the wake claim, the clock's decision). The
 * invariants are the same; the clock's failure names its deadline, so I4 compares errors with
 * their ISO times taken out (a node that catches a denial keeps its message the same way).
 *
 * Trial `S+i` (i < N) is fully named by its seed: `--seed S+i --trials 1` replays it (the kill
 * points and the races are the same; a timer kill lands where the scheduler puts it).
 *
 * One trial:
 *  1. A random flow from the seed (fuzz-flow.ts) runs once without crashes, in this process on a
 *     memory store, with the operator's approval decisions: the expected outcome (status, state,
 *     error), and how many store writes and tool calls a run makes (for kill plans).
 *  2. A worker runs it and is killed. Persistent stores: worker processes (worker.ts fuzz-serve)
 *     take jobs (run / recover / resume, each with a fresh runner, tools and kill plan) from a pool
 *     and serve until a kill plan SIGKILLs them; spares boot in the background, since a process
 *     start costs far more than a trial's work. Memory: in-process workers on CrashingStores over
 *     one shared memory store (a simulated crash; a dead worker's tools append nothing). Kills:
 *     in `random` mode before or after a random store write, inside a random tool call, or after
 *     a random delay (which may land while a store write is in flight); in `named` mode at the
 *     trial's named protocol point (fuzz-flow.ts POINTS, cycled by seed: before/after the start,
 *     a `started` write, a `done`-only write, a superstep checkpoint, a pause, a claim, a resume;
 *     inside a tool after its side effect). A point a run worker never reaches (claim, resume) is
 *     carried by the recoverers and resumers until one dies there. Processes SIGKILL themselves;
 *     the hook is in the test worker's store wrapper, not in the library.
 *  3. Rounds until the run ends: the harness finds the run among the flow's unfinished runs (as a
 *     worker's `recoverAll` would) and starts one to three recoverers at once (released together
 *     from a barrier before their first save, so they race for the claim), each possibly killed
 *     too; a paused run gets one or two racing resumers with the operator's decision. A round in
 *     which some recoverer stopped with `RecoveryNeedsDecision` and nothing was written (the run's
 *     head is unchanged: the answer is current) is a decision: the harness checks it names exactly
 *     the calls in doubt, then decides like an operator: rerun them (the next round's first
 *     recoverer passes `rerunInDoubt`; that grant is counted per call), or (`--decide`, by round
 *     when mixed) resolve each with what its system says — the ledger: a call whose side effect is
 *     there ran, with the result or error the tool gives for its arguments; one with none did not
 *     run — stored as `runs resolve` stores it, with no grant: a call resolved "ran" must never
 *     run again, and the final state must still equal the uncrashed run's.
 *
 * Invariants (each violation prints the seed and the command replaying it). A call's identity is
 * (superstep, node, index, tool) — its arguments carry the first three, so every ledger line names
 * its call; the store's call records name it too.
 *  I1 no non-idempotent call executed twice: per identity of a tool that is neither idempotent nor
 *     readOnly (approval tools included), ledger `begin` lines ≤ 1 + the operator's rerun grants
 *     that named that identity.
 *  I2 every call that was `done` before a crash replayed, not rerun: in the store's call log of
 *     each superstep (ordered by segment, seq) no `started` of an identity follows its `done`; and
 *     every ledger `begin` has a `started` record before it (per identity, begins ≤ started
 *     records): a call never runs unlogged, so a rerun cannot hide.
 *  I3 every run ends `done` or `failed` (with a reason), after the harness's decisions; every
 *     worker ends killed, with a result, or with CheckpointConflict / RecoveryNeedsDecision —
 *     nothing else (no CheckpointStoreCorrupt, FlowError, crash). Every `RecoveryNeedsDecision`
 *     that is current names exactly the calls really in doubt: the non-idempotent identities whose
 *     last record in the cut superstep's log is `started`, `unrecordable` or `approving` (as tool
 *     names, a multiset); and every call of that superstep the ledger saw begin without a stored
 *     `done` is among the calls in doubt (of any tool).
 *  I4 the final status, state and error equal the uncrashed run's (step 1).
 *  I5 no run lost: a run with a checkpoint is listed unfinished until it ends, and not after; a
 *     run with no checkpoint ran no tool; one idempotency key per identity, distinct identities
 *     distinct keys.
 *  I6 transient store faults (store-faults.ts; `--faults RATE` of the workers, 0.25 by default,
 *     get some: a write failing with ECONNRESET before it reaches the store or after it landed,
 *     1-3 times, or an outage past the writer's retry budget): a worker that went on after its
 *     faults (not killed, not fenced) lost none of the call records of its failed writes — each
 *     is stored, so no call it recorded `done` is in doubt; only an outage may stop a worker with
 *     CheckpointStoreUnavailable, and a worker alone in its round leaves the run released.
 *
 * `test/crash/fuzz.e2e-spec.ts` runs a short sample in `npm test` through `fuzz()`.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import {
  type CallFinding,
  CheckpointConflict,
  type CheckpointStore,
  DurableError,
  Executor,
  FlowRunner,
  MemoryCheckpointStore,
  RecoveryNeedsDecision,
  type RunResult,
} from 'agent-adapter';
import { CrashingStore, SimulatedCrash, settle } from 'agent-adapter/testing';
import { KEY } from 'agent-adapter/testing/fixtures';
import { storeResolution } from 'agent-adapter/flow/runner/resolve';
import { suiteId } from '../../test/utils/services';
import {
  KillSwitch,
  POINTS,
  Rng,
  TIME_POINTS,
  bodyOf,
  decisionFor,
  fuzzFlow,
  fuzzRegistry,
  generate,
  hash,
  isIdempotent,
  isTimed,
  resultOf,
  timeless,
  writeKinds,
  type CallArgs,
  type Effect,
  type FuzzSpec,
  type FuzzState,
  type KillPlan,
  type Point,
} from './fuzz-flow';
import { killAll } from '../../test/utils/child-process';
import { Worker, readLedger } from '../../test/crash/harness';
import {
  STORE_KINDS,
  dropStore,
  isStoreKind,
  openStore,
  storeLocation,
  type StoreEnv,
  type StoreKind,
} from '../../test/crash/stores';
import type { FuzzJob, FuzzOutcome } from '../../test/crash/worker';
import {
  faultPlan,
  faulty,
  isOutage,
  type FaultPlan,
  type FaultReport,
} from './store-faults';

export type FuzzStore = StoreKind | 'memory';
export type FuzzMode = 'random' | 'named' | 'both';

export interface FuzzOptions {
  store: FuzzStore;
  trials: number;
  seed: number;
  /** Trials at once. @default 3 for processes, 4 in memory */
  concurrency?: number;
  mode?: FuzzMode;
  /** Worker processes kept booted and idle. @default 4 */
  spares?: number;
  /**
   * How the operator decides calls in doubt: rerun them, resolve each with what the ledger says
   * really happened (`FlowRunner.resolve`'s store: ran with its result or error / did not run), or
   * either, by round. @default 'mixed'
   */
  decide?: 'rerun' | 'resolve' | 'mixed';
  /**
   * Break the harness on purpose (to see the invariants catch it): rerun in doubt, ungranted; or
   * resolve every call in doubt "did not run", even one that ran.
   */
  sabotage?: 'rerun-in-doubt' | 'resolve-lies';
  /** Every trial the seed's durable-time variant (a sleep, mostly a deadline), not a third. */
  time?: boolean;
  /** How often a worker gets injected transient store faults (store-faults.ts). @default 0.25 */
  faults?: number;
  log?: (line: string) => void;
}

export interface Violation {
  store: FuzzStore;
  seed: number;
  what: string;
}

export interface FuzzSummary {
  store: FuzzStore;
  trials: number;
  seed: number;
  ms: number;
  violations: Violation[];
  stats: Record<string, number>;
  /** Named points: how many trials' workers died there. */
  points: Record<string, number>;
}

const MAX_ROUNDS = 30;
const WORKER_TIMEOUT_MS = 45_000;

// ------------------------------------------------------------------------------------------------
// Clusters: where workers run (processes on a persistent store, or in this process on memory).

interface Launch {
  mode: 'fuzz-run' | 'fuzz-recover' | 'fuzz-resume';
  /** The seed's durable-time variant, whatever the seed (`--time`). */
  timed?: boolean;
  plan?: KillPlan;
  fault?: FaultPlan;
  rerun?: boolean;
  decision?: { approved: boolean; reason?: string };
}

interface Ended {
  killed: boolean;
  outcome?: FuzzOutcome;
  /** Anything but a kill or a report: the worker's stderr. */
  failure?: string;
}

interface LedgerLine extends Effect {
  pid: number | string;
}

interface Cluster {
  readonly kind: FuzzStore;
  /** The harness's own view of the store (it reads; it never drives a run). */
  readonly store: CheckpointStore;
  ledger(seed: number): LedgerLine[];
  race(seed: number, runId: string, launches: Launch[]): Promise<Ended[]>;
  close(): Promise<void>;
}

/**
 * Worker processes (worker.ts fuzz-serve) on a persistent store. A worker serves jobs until one
 * kills it; spares boot in the background, so a trial rarely waits for a process to start.
 */
class ProcessCluster implements Cluster {
  private readonly dir = mkdtempSync(join(tmpdir(), 'aa-fuzz-'));
  private readonly idle: Worker[] = [];
  private readonly waiting: Array<(w: Worker) => void> = [];
  private booting = 0;
  private jobs = 0;
  private closing = false;

  private constructor(
    readonly kind: StoreKind,
    readonly store: CheckpointStore,
    private readonly env: StoreEnv,
    private readonly spares: number,
    private readonly closeStore: () => Promise<void>,
  ) {
    for (let i = 0; i < spares; i++) this.spawn();
  }

  static async open(kind: StoreKind, spares: number): Promise<ProcessCluster> {
    const dir = mkdtempSync(join(tmpdir(), 'aa-fuzz-store-'));
    const env = storeLocation(kind, suiteId('fuzz'), dir);
    const opened = await openStore(kind, env);
    return new ProcessCluster(kind, opened.store, env, spares, async () => {
      await opened.close();
      await dropStore(kind, env);
      rmSync(dir, { recursive: true, force: true });
    });
  }

  private spawn(): void {
    this.booting++;
    const w = new Worker(['fuzz-serve', '--store', this.kind], this.env);
    w.waitForLine(/^IDLE 0$/, 60_000).then(
      () => {
        this.booting--;
        this.release(w);
      },
      (error: unknown) => {
        this.booting--;
        if (this.closing) return;
        console.error(`a fuzz worker did not boot: ${String(error)}`);
        this.spawn();
      },
    );
  }

  private release(w: Worker): void {
    const next = this.waiting.shift();
    if (next) next(w);
    else this.idle.push(w);
  }

  private take(): Promise<Worker> {
    const w = this.idle.shift();
    if (this.idle.length + this.booting < this.spares) this.spawn();
    if (w) return Promise.resolve(w);
    if (this.booting <= this.waiting.length) this.spawn();
    return new Promise((resolve) => this.waiting.push(resolve));
  }

  private ledgerFile(seed: number): string {
    return join(this.dir, `ledger-${seed}.jsonl`);
  }

  ledger(seed: number): LedgerLine[] {
    return readLedger(this.ledgerFile(seed)).map((l) => ({
      tool: l.tool,
      key: l.key,
      phase: l.phase,
      pid: l.pid,
      args: l.args as CallArgs,
    }));
  }

  async race(
    seed: number,
    runId: string,
    launches: Launch[],
  ): Promise<Ended[]> {
    const barrier = launches.length > 1;
    const workers = await Promise.all(launches.map(() => this.take()));
    const jobs = launches.map((l): FuzzJob => ({
      id: `j${++this.jobs}`,
      mode: l.mode,
      seed,
      runId,
      ledger: this.ledgerFile(seed),
      ...(l.plan && { plan: l.plan }),
      ...(l.fault && { fault: l.fault }),
      ...(l.rerun && { rerun: true }),
      ...(l.decision && { decision: l.decision }),
      ...(l.timed && { timed: true }),
      ...(barrier && { barrier: true }),
    }));
    jobs.forEach((job, i) =>
      workers[i]!.child.stdin!.write(`${JSON.stringify(job)}\n`),
    );
    if (barrier) {
      // Every racer either holds its first save at the barrier or has ended (a decision, a kill).
      await Promise.all(
        workers.map((w, i) =>
          w
            .waitForLine(
              new RegExp(`^(ARMED|RESULT) ${jobs[i]!.id}\\b`),
              WORKER_TIMEOUT_MS,
            )
            .catch(() => undefined),
        ),
      );
      workers.forEach((w, i) => {
        if (w.child.exitCode === null && !w.child.signalCode)
          w.child.stdin!.write(`go ${jobs[i]!.id}\n`);
      });
    }
    return Promise.all(workers.map((w, i) => this.result(w, jobs[i]!.id)));
  }

  private async result(w: Worker, id: string): Promise<Ended> {
    let line: string;
    try {
      line = await w.waitForLine(
        new RegExp(`^RESULT ${id} `),
        WORKER_TIMEOUT_MS,
      );
    } catch (error) {
      if (w.child.exitCode === null && !w.child.signalCode) {
        await w.kill();
        return { killed: false, failure: String(error) };
      }
      const exit = await w.exited;
      if (exit.signal === 'SIGKILL') return { killed: true };
      return { killed: false, failure: String(error) };
    }
    this.release(w);
    return {
      killed: false,
      outcome: JSON.parse(line.slice(`RESULT ${id} `.length)) as FuzzOutcome,
    };
  }

  async close(): Promise<void> {
    this.closing = true;
    await killAll();
    rmSync(this.dir, { recursive: true, force: true });
    await this.closeStore();
  }
}

/** Workers in this process on one memory store; a kill is simulated (CrashingStore). */
class MemoryCluster implements Cluster {
  readonly kind = 'memory' as const;
  readonly store = new MemoryCheckpointStore();
  private readonly ledgers = new Map<number, LedgerLine[]>();
  private nextWorker = 1;

  ledger(seed: number): LedgerLine[] {
    return [...(this.ledgers.get(seed) ?? [])];
  }

  race(seed: number, runId: string, launches: Launch[]): Promise<Ended[]> {
    const spec = generate(
      seed,
      launches.some((l) => l.timed),
    );
    const flow = fuzzFlow(spec);
    const lines = this.ledgers.get(seed) ?? [];
    this.ledgers.set(seed, lines);
    return Promise.all(
      launches.map(async (l): Promise<Ended> => {
        const pid = `w${this.nextWorker++}`;
        const kill = new KillSwitch(l.plan);
        const crashing = new CrashingStore(this.store, (w, moment) =>
          kill.atWrite(
            writeKinds({ ...w, calls: w.calls.map((c) => c.record) }),
            moment,
          ),
        );
        const registry = fuzzRegistry(spec, {
          effect: (e) => {
            if (!crashing.dead) lines.push({ ...e, pid });
          },
          after: (where) => {
            if (!crashing.dead && kill.atTool(where))
              crashing.kill(`in a tool (${where})`);
          },
        });
        const report: FaultReport = { injected: 0, records: [] };
        const faults = l.fault && { faults: report };
        const runner = new FlowRunner(new Executor(registry), {
          checkpoints: faulty(crashing, l.fault, report),
          checkpointKey: KEY,
        });
        let timer: NodeJS.Timeout | undefined;
        if (l.plan?.kind === 'timer')
          timer = setTimeout(() => (crashing.dead = true), l.plan.ms);
        try {
          const out = await drive(runner, flow, spec, runId, l);
          return crashing.dead
            ? { killed: true }
            : { killed: false, outcome: { ...outcomeOf(out), ...faults } };
        } catch (error) {
          if (crashing.dead || error instanceof SimulatedCrash)
            return { killed: true };
          if (error instanceof DurableError)
            return {
              killed: false,
              outcome: { ...outcomeOf(error), ...faults },
            };
          return {
            killed: false,
            failure: String((error as Error)?.stack ?? error),
          };
        } finally {
          clearTimeout(timer);
          runner.close();
          crashing.dead = true;
          await settle();
        }
      }),
    );
  }

  async close(): Promise<void> {}
}

function drive(
  runner: FlowRunner,
  flow: ReturnType<typeof fuzzFlow>,
  spec: FuzzSpec,
  runId: string,
  l: Launch,
): Promise<RunResult<FuzzState>> {
  if (l.mode === 'fuzz-run')
    return runner.run(flow, { n: 0, log: [] }, { runId });
  if (l.mode === 'fuzz-recover')
    return runner.recover(flow, runId, { rerunInDoubt: Boolean(l.rerun) });
  return runner.resume(
    flow,
    runId,
    {
      approved: Boolean(l.decision?.approved),
      by: 'operator',
      ...(l.decision?.reason !== undefined && { reason: l.decision.reason }),
    },
    { rerunInDoubt: Boolean(l.rerun) },
  );
}

function outcomeOf(out: RunResult<FuzzState> | Error): FuzzOutcome {
  if (out instanceof Error)
    return {
      error: out.name,
      message: out.message,
      ...(out instanceof RecoveryNeedsDecision && { calls: out.calls }),
    };
  return {
    status: out.status,
    step: out.step,
    ...(out.error && {
      error: { name: out.error.name, message: out.error.message },
    }),
    ...(out.pending && { pending: out.pending.tool }),
  };
}

// ------------------------------------------------------------------------------------------------
// The reference run

/** Resolves a little after `at` (epoch ms). */
function waitUntil(at: number): Promise<void> {
  return new Promise((r) => setTimeout(r, Math.max(0, at - Date.now() + 2)));
}

interface Reference {
  status: string;
  state: FuzzState;
  error?: { name: string; message: string };
  writes: number;
  tools: number;
  pauses: number;
}

async function reference(spec: FuzzSpec, runId: string): Promise<Reference> {
  let writes = 0;
  let tools = 0;
  const counting = new CrashingStore(
    new MemoryCheckpointStore(),
    (_w, moment) => {
      if (moment === 'before') writes++;
      return false;
    },
  );
  const runner = new FlowRunner(
    new Executor(
      fuzzRegistry(spec, {
        effect: (e) => {
          if (e.phase === 'begin') tools++;
        },
      }),
    ),
    { checkpoints: counting, checkpointKey: KEY },
  );
  const flow = fuzzFlow(spec);
  let pauses = 0;
  let r = await runner.run(flow, { n: 0, log: [] }, { runId });
  while ((r.status === 'paused' || r.status === 'sleeping') && pauses < 100) {
    pauses++;
    // A sleep, or an approval only the clock decides: wait for its time, then recover.
    const due = r.status === 'sleeping' ? r.wakeAt : r.pending?.deadline;
    if (due !== undefined) {
      await waitUntil(due);
      r = await runner.recover(flow, runId);
    } else r = await runner.resume(flow, runId, decisionFor(spec, r.pending!));
  }
  runner.close();
  return {
    status: r.status,
    state: r.state,
    ...(r.error && { error: { name: r.error.name, message: r.error.message } }),
    writes,
    tools,
    pauses,
  };
}

// ------------------------------------------------------------------------------------------------
// One trial

function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value && typeof value === 'object')
    return `{${Object.keys(value)
      .sort()
      .map(
        (k) =>
          `${JSON.stringify(k)}:${canonical((value as Record<string, unknown>)[k])}`,
      )
      .join(',')}}`;
  return JSON.stringify(value) ?? 'undefined';
}

type Id = string;
const idOf = (
  superstep: number,
  node: string,
  index: number,
  tool: string,
): Id => JSON.stringify([superstep, node, index, tool]);

interface Decoded {
  id: Id;
  node: string;
  index: number;
  tool: string;
  phase: string;
  segment: number;
  seq: number;
}

async function callLog(
  store: CheckpointStore,
  runId: string,
  superstep: number,
): Promise<Decoded[]> {
  return (await store.calls(runId, superstep)).map((r) => {
    const b = bodyOf(r.sealed);
    return {
      id: idOf(r.superstep, String(b.node), Number(b.index), String(b.tool)),
      node: String(b.node),
      index: Number(b.index),
      tool: String(b.tool),
      phase: String(b.phase),
      segment: r.segment,
      seq: r.seq,
    };
  });
}

/** The calls in doubt, by the spec: the last record of the identity is started/unrecordable/approving. */
function inDoubt(
  log: Decoded[],
  resolved: readonly Resolved[] = [],
): Map<Id, string> {
  const last = new Map<Id, Decoded>();
  for (const r of log) last.set(r.id, r);
  const out = new Map<Id, string>();
  for (const [id, r] of last)
    if (
      r.phase === 'started' ||
      r.phase === 'unrecordable' ||
      r.phase === 'approving' ||
      r.phase === 'restored'
    )
      out.set(id, r.tool);
  for (const id of settledBy(log, resolved)) out.delete(id);
  return out;
}

/**
 * The calls the operator's resolutions settle: a resolution holds while the record it resolved is
 * still its call's last (a call that ran again since is back to its own records).
 */
function settledBy(log: Decoded[], resolved: readonly Resolved[]): Set<Id> {
  const last = new Map<Id, Decoded>();
  for (const r of log) last.set(r.id, r);
  const out = new Set<Id>();
  for (const r of resolved)
    for (const [id, d] of last)
      if (
        d.node === r.node &&
        d.index === r.index &&
        d.tool === r.tool &&
        d.segment === r.segment &&
        d.seq === r.seq
      )
        out.add(id);
  return out;
}

/** What a resolution names (records.ts `Resolution`), read from the sealed checkpoint's body. */
interface Resolved {
  node: string;
  index: number;
  tool: string;
  segment: number;
  seq: number;
}

function resolutionsOf(body: Record<string, unknown>): Resolved[] {
  return Array.isArray(body.resolutions)
    ? (body.resolutions as Resolved[])
    : [];
}

const ledgerId = (l: LedgerLine) =>
  idOf(l.args.superstep, l.args.node, l.args.index, l.tool);

/**
 * What an operator who checked each system finds, for the calls in doubt (their last records): a
 * call whose side effect is in the ledger ran, with the result (or error) the tool gives for those
 * arguments; one with no ledger line did not run. `lies`: every call "did not run".
 */
function resolveFromLedger(
  spec: FuzzSpec,
  calls: readonly Decoded[],
  ledger: readonly LedgerLine[],
  lies: boolean,
): CallFinding[] {
  const latest = new Map<Id, Decoded>();
  for (const c of calls) latest.set(c.id, c);
  return [...latest.values()].map((c): CallFinding => {
    const call = `${c.node}#${c.index}`;
    const began = ledger.find(
      (l) => l.phase === 'begin' && ledgerId(l) === c.id,
    );
    if (!began || lies) return { call, ran: false };
    const tool = spec.tools.find((t) => t.name === c.tool)!;
    if (tool.fails && hash(JSON.stringify(began.args)) % 4 === 0)
      return {
        call,
        ran: true,
        error: {
          name: 'Error',
          message: `${tool.name} refused x=${began.args.x}`,
        },
      };
    return { call, ran: true, result: resultOf(tool, began.args) };
  });
}

function randomPlan(rng: Rng, ref: Reference, memory: boolean): KillPlan {
  const r = rng.int(memory ? 2 : 3);
  if (r === 0)
    return {
      kind: 'write',
      n: 1 + rng.int(ref.writes),
      moment: rng.bool() ? 'before' : 'after',
    };
  if (r === 1)
    return {
      kind: 'tool',
      n: 1 + rng.int(Math.max(1, ref.tools)),
      where: rng.bool() ? 'begin' : 'end',
    };
  return { kind: 'timer', ms: rng.int(40) };
}

const RUN_POINTS = new Set([
  'sleep',
  'start',
  'started',
  'done',
  'superstep',
  'pause',
  'tool',
]);

interface TrialContext {
  cluster: Cluster;
  options: FuzzOptions;
  stats: Record<string, number>;
  points: Record<string, number>;
}

async function trial(ctx: TrialContext, seed: number): Promise<string[]> {
  const { cluster, stats } = ctx;
  const memory = cluster.kind === 'memory';
  const sabotage = ctx.options.sabotage === 'rerun-in-doubt';
  const lies = ctx.options.sabotage === 'resolve-lies';
  const bad: string[] = [];
  const count = (k: string, by = 1) => (stats[k] = (stats[k] ?? 0) + by);
  const timed = Boolean(ctx.options.time);
  const spec = generate(seed, timed);
  const flow = fuzzFlow(spec);
  const runId = `fz-${seed}-${randomBytes(3).toString('hex')}`;
  const ref = await reference(spec, runId);
  count(`ref.${ref.status}`);
  if (ref.pauses) count('ref.paused');
  const rng = new Rng(seed ^ 0x5bd1e995);
  // A stream of its own: the kill plans of a seed stay what they were before faults existed.
  const faultRng = new Rng(seed ^ 0x2545f491);
  const faultRate = ctx.options.faults ?? 0.25;
  const faulting = <L extends Launch>(l: L): L => {
    const fault = faultPlan(faultRng, ref.writes, faultRate);
    return fault ? { ...l, fault } : l;
  };
  /** Faults of workers that went on (not killed, not fenced, not stopped by an outage). */
  const absorbed: Array<{ report: FaultReport; who: string }> = [];
  const mode = ctx.options.mode ?? 'both';
  const named = mode === 'named' || (mode === 'both' && seed % 2 === 1);
  // A time variant's named point is one of the durable-time points.
  const points: readonly Point[] = isTimed(spec) ? TIME_POINTS : POINTS;
  let namedPlan: { kind: 'point'; point: Point; n: number } | undefined = named
    ? {
        kind: 'point',
        point: points[Math.floor(seed / 2) % points.length]!,
        n: 1 + rng.int(2),
      }
    : undefined;
  if (isTimed(spec)) count('trials.timed');
  count(named ? 'trials.named' : 'trials.random');
  const store = cluster.store;
  const grants = new Map<Id, number>();
  const reader = new FlowRunner(
    new Executor(
      fuzzRegistry(spec, {
        effect: () => {
          throw new Error('the harness never runs a tool');
        },
      }),
    ),
    { checkpoints: store, checkpointKey: KEY },
  );

  /** Runs a round; notes kills; returns the outcomes. */
  const round = async (planned: Launch[]): Promise<FuzzOutcome[]> => {
    count('workers', planned.length);
    const launches = planned.map((l) => faulting(timed ? { ...l, timed } : l));
    const ends = await cluster.race(seed, runId, launches);
    const outcomes: FuzzOutcome[] = [];
    let outage = false;
    ends.forEach((e, i) => {
      const faults = e.outcome?.faults;
      if (faults) {
        count('faults.injected', faults.injected);
        const error = 'error' in e.outcome! ? e.outcome.error : undefined;
        if (error === 'CheckpointStoreUnavailable') outage = true;
        else if (error !== 'CheckpointConflict')
          absorbed.push({
            report: faults,
            who: `a ${launches[i]!.mode} worker (faults ${JSON.stringify(launches[i]!.fault)}, ended ${JSON.stringify({ ...e.outcome, faults: undefined })})`,
          });
      }
      const plan = launches[i]!.plan;
      if (e.killed) {
        count('kills');
        if (plan?.kind === 'point') {
          ctx.points[plan.point] = (ctx.points[plan.point] ?? 0) + 1;
          namedPlan = undefined;
        }
        if (!plan)
          bad.push(`I3 a worker with no kill plan died (${launches[i]!.mode})`);
      } else if (e.failure !== undefined) {
        bad.push(
          `I3 a ${launches[i]!.mode} worker failed: ${e.failure.slice(0, 2000)}`,
        );
      } else if (e.outcome) {
        outcomes.push(e.outcome);
        if ('error' in e.outcome && typeof e.outcome.error === 'string') {
          count(`outcome.${e.outcome.error}`);
          if (
            e.outcome.error !== 'CheckpointConflict' &&
            e.outcome.error !== 'RecoveryNeedsDecision' &&
            !(
              e.outcome.error === 'CheckpointStoreUnavailable' &&
              isOutage(launches[i]!.fault)
            )
          )
            bad.push(
              `I3 ${launches[i]!.mode} ended with ${e.outcome.error}: ${'message' in e.outcome ? e.outcome.message : ''}`,
            );
        }
      }
    });
    // I6: a worker the store stopped released the run (alone in its round: nobody else renews) —
    // if it ever held it: an outage from its first write (the claim, the start) leaves the run as
    // it was, under the lease of whoever held it before.
    if (outage && launches.length === 1 && (launches[0]!.fault?.n ?? 1) > 1) {
      const head = await store.head(runId);
      if (head?.status === 'running' && (head.leaseExpiresAt ?? 0) > Date.now())
        bad.push(
          'I6 a worker stopped by a store outage did not release the run (its lease is live)',
        );
    }
    return outcomes;
  };

  const maybePlan = (
    r: number,
    first: boolean,
    point: Set<string> | 'any',
  ): KillPlan | undefined => {
    if (
      first &&
      namedPlan &&
      (point === 'any' || point.has(namedPlan.point.split(':')[0]!))
    )
      return namedPlan;
    return rng.bool(r <= 3 ? 0.35 : r <= 8 ? 0.1 : 0)
      ? randomPlan(rng, ref, memory)
      : undefined;
  };

  try {
    // The run, killed.
    const firstNamed =
      namedPlan && RUN_POINTS.has(namedPlan.point.split(':')[0]!);
    await round([
      {
        mode: 'fuzz-run',
        plan: firstNamed ? namedPlan : randomPlan(rng, ref, memory),
      },
    ]);

    let decided: Map<Id, string> | undefined;
    let finished = false;
    for (let r = 1; r <= MAX_ROUNDS && !finished && !bad.length; r++) {
      const latest = await store.latest(runId);
      if (!latest) {
        // Killed before the start was stored: nothing may have run; the client starts it again.
        if (cluster.ledger(seed).length)
          bad.push('I5 tools ran but no checkpoint was stored');
        count('restarts');
        await round([
          { mode: 'fuzz-run', plan: maybePlan(r, true, RUN_POINTS) },
        ]);
        continue;
      }
      const status = latest.status;
      const listed = (await store.listUnfinished(spec.flow)).some(
        (h) => h.runId === runId,
      );
      if (status === 'done' || status === 'failed') {
        if (listed)
          bad.push(`I5 the run ended ${status} but is listed unfinished`);
        finished = true;
        break;
      }
      if (!listed)
        bad.push(`I5 the run is ${status} but not listed unfinished (lost)`);
      const headBefore = await store.head(runId);
      const rerun = sabotage || decided !== undefined;
      if (decided && !sabotage)
        for (const id of decided.keys())
          grants.set(id, (grants.get(id) ?? 0) + 1);
      if (decided) count('decisions.rerun');
      decided = undefined;
      let outcomes: FuzzOutcome[];
      const pending =
        status === 'paused'
          ? (await reader.get(flow, runId)).pending
          : undefined;
      const due =
        status === 'sleeping'
          ? (await store.head(runId))?.leaseExpiresAt
          : pending?.deadline;
      if (status === 'sleeping' || due !== undefined) {
        // A sleeping run, or a paused one only the clock decides: recoverers at its time (they
        // race for the wake claim, or as clocks for the decision).
        if (due !== undefined) await waitUntil(due);
        count(status === 'sleeping' ? 'rounds.wake' : 'rounds.clock');
        const n = 1 + rng.int(3);
        outcomes = await round(
          Array.from({ length: n }, (_, i) => ({
            mode: 'fuzz-recover' as const,
            rerun: sabotage || (rerun && i === 0),
            plan: maybePlan(r, i === 0, 'any'),
          })),
        );
      } else if (status === 'paused') {
        const got = await reader.get(flow, runId);
        const decision = decisionFor(spec, got.pending!);
        count('rounds.resume');
        const n = 1 + rng.int(2);
        outcomes = await round(
          Array.from({ length: n }, (_, i) => ({
            mode: 'fuzz-resume' as const,
            decision,
            rerun: rerun && i === 0,
            plan: maybePlan(
              r,
              i === 0,
              new Set([
                'resume',
                'started',
                'done',
                'superstep',
                'pause',
                'tool',
              ]),
            ),
          })),
        );
      } else {
        count('rounds.recover');
        const n = 1 + rng.int(3);
        outcomes = await round(
          Array.from({ length: n }, (_, i) => ({
            mode: 'fuzz-recover' as const,
            rerun: sabotage || (rerun && i === 0),
            plan: maybePlan(r, i === 0, 'any'),
          })),
        );
      }
      // A decision is current if nothing was written since the round began.
      const needs = outcomes.filter(
        (
          o,
        ): o is Extract<FuzzOutcome, { calls?: unknown }> & { error: string } =>
          'error' in o && o.error === 'RecoveryNeedsDecision',
      );
      const headAfter = await store.head(runId);
      if (
        needs.length &&
        headAfter?.step === headBefore?.step &&
        headAfter?.calls === headBefore?.calls
      ) {
        const body = bodyOf((await store.latest(runId))!.sealed);
        const superstep = Number(body.superstep);
        const log = await callLog(store, runId, superstep);
        const doubt = inDoubt(log, resolutionsOf(body));
        const settled = settledBy(log, resolutionsOf(body));
        const expected = [...doubt.entries()]
          .filter(
            ([, tool]) =>
              !isIdempotent(spec.tools.find((t) => t.name === tool)!.kind),
          )
          .map(([, tool]) => tool)
          .sort();
        for (const o of needs) {
          const named = (o.calls ?? []).map(([tool]) => tool).sort();
          if (JSON.stringify(named) !== JSON.stringify(expected))
            bad.push(
              `I3 RecoveryNeedsDecision named ${JSON.stringify(named)}, the calls in doubt are ${JSON.stringify(expected)}`,
            );
        }
        const done = new Set(
          log.filter((c) => c.phase === 'done').map((c) => c.id),
        );
        for (const l of cluster.ledger(seed)) {
          const id = ledgerId(l);
          if (
            l.phase === 'begin' &&
            l.args.superstep === superstep &&
            !done.has(id) &&
            !doubt.has(id) &&
            !settled.has(id)
          )
            bad.push(
              `I3 ${id} began (ledger) with no done record, but is not in doubt`,
            );
        }
        count('decisions');
        decided = new Map(
          [...doubt].filter(
            ([, tool]) =>
              !isIdempotent(spec.tools.find((t) => t.name === tool)!.kind),
          ),
        );
        const decide = ctx.options.decide ?? 'mixed';
        if (
          !sabotage &&
          (lies ||
            decide === 'resolve' ||
            (decide === 'mixed' && (seed + r) % 2 === 0))
        ) {
          // Resolve instead of rerunning: each call as the ledger (the system) says it went.
          const findings = resolveFromLedger(
            spec,
            log.filter((c) => decided!.has(c.id)),
            cluster.ledger(seed),
            lies,
          );
          decided = undefined; // no rerun grants: a call resolved "ran" must never run again
          try {
            await storeResolution(
              { store, ring: reader.keyRing },
              runId,
              { calls: findings, by: 'fuzz-operator' },
              { owner: 'fuzz-operator' },
            );
            count('decisions.resolve');
          } catch (error) {
            // Another write landed first: the next round decides again on what it finds.
            if (!(error instanceof CheckpointConflict)) throw error;
            count('decisions.resolve.conflict');
          }
        }
      }
    }
    if (!finished && !bad.length)
      bad.push(`I3 the run did not end in ${MAX_ROUNDS} rounds`);
    if (bad.length) return bad;

    // The outcome (I4).
    const got = await reader.get(flow, runId);
    count(`end.${got.status}`);
    if (got.status !== ref.status)
      bad.push(`I4 ended ${got.status}, the uncrashed run ${ref.status}`);
    // Compared as canonical JSON: a recovered state comes back from the store with sorted keys.
    if (canonical(got.state) !== canonical(ref.state))
      bad.push(
        `I4 final state ${canonical(got.state)}, the uncrashed run's ${canonical(ref.state)}`,
      );
    const err = got.error && {
      name: got.error.name,
      message: got.error.message,
    };
    // The clock's failure names its deadline, a time of day: compared without it.
    const errText = (e?: { name: string; message: string }) =>
      JSON.stringify(e && { ...e, message: timeless(e.message) });
    if (errText(err) !== errText(ref.error))
      bad.push(
        `I4 error ${JSON.stringify(err)}, the uncrashed run's ${JSON.stringify(ref.error)}`,
      );
    if (got.status === 'failed' && !got.error?.message)
      bad.push('I3 failed without a reason');

    // The call logs and the ledger (I1, I2, I5).
    const last = Number(bodyOf((await store.latest(runId))!.sealed).superstep);
    const started = new Map<Id, number>();
    for (let s = 0; s <= last; s++) {
      const doneSeen = new Set<Id>();
      for (const c of await callLog(store, runId, s)) {
        if (c.phase === 'done') doneSeen.add(c.id);
        if (c.phase === 'started') {
          if (doneSeen.has(c.id))
            bad.push(
              `I2 ${c.id} was done, then started again (segment ${c.segment}, seq ${c.seq})`,
            );
          started.set(c.id, (started.get(c.id) ?? 0) + 1);
        }
      }
    }
    const begins = new Map<Id, number>();
    const keyOf = new Map<Id, string>();
    const idOfKey = new Map<string, Id>();
    for (const l of cluster.ledger(seed)) {
      const id = ledgerId(l);
      if (keyOf.has(id) && keyOf.get(id) !== l.key)
        bad.push(`I5 ${id} ran with two idempotency keys`);
      if (idOfKey.has(l.key) && idOfKey.get(l.key) !== id)
        bad.push(`I5 ${id} and ${idOfKey.get(l.key)} share an idempotency key`);
      keyOf.set(id, l.key);
      idOfKey.set(l.key, id);
      if (l.phase === 'begin') begins.set(id, (begins.get(id) ?? 0) + 1);
    }
    for (const [id, times] of begins) {
      const tool = spec.tools.find((t) => t.name === JSON.parse(id)[3])!;
      if (times > (started.get(id) ?? 0))
        bad.push(
          `I2 ${id} ran ${times} times with ${started.get(id) ?? 0} started records`,
        );
      if (times > 1)
        count(isIdempotent(tool.kind) ? 'reran.idempotent' : 'reran.granted');
      if (!isIdempotent(tool.kind) && times > 1 + (grants.get(id) ?? 0))
        bad.push(
          `I1 non-idempotent ${id} (${tool.kind}) executed ${times} times, the operator allowed ${grants.get(id) ?? 0} rerun(s)`,
        );
    }
    if ((await store.listUnfinished(spec.flow)).some((h) => h.runId === runId))
      bad.push('I5 the run ended but is listed unfinished');

    // I6: a fault the retry absorbed lost no record: every call record of a failed write of a
    // worker that went on is stored (so no call it recorded `done` is left in doubt).
    const stored = new Map<number, Set<string>>();
    for (const { report, who } of absorbed)
      for (const r of report.records) {
        if (!stored.has(r.superstep))
          stored.set(
            r.superstep,
            new Set(
              (await store.calls(runId, r.superstep)).map((c) => c.sealed),
            ),
          );
        if (!stored.get(r.superstep)!.has(r.sealed))
          bad.push(
            `I6 a ${r.phase} record (superstep ${r.superstep}) whose write failed transiently was never stored, though its worker went on: ${who}`,
          );
        else count(`faults.absorbed.${r.phase}`);
      }
    return bad;
  } finally {
    reader.close();
    if (!bad.length) await store.delete(runId).catch(() => undefined);
  }
}

// ------------------------------------------------------------------------------------------------

export async function fuzz(options: FuzzOptions): Promise<FuzzSummary> {
  const log = options.log ?? (() => undefined);
  const started = performance.now();
  const cluster: Cluster =
    options.store === 'memory'
      ? new MemoryCluster()
      : await ProcessCluster.open(options.store, options.spares ?? 4);
  const ctx: TrialContext = { cluster, options, stats: {}, points: {} };
  const violations: Violation[] = [];
  const concurrency =
    options.concurrency ?? (options.store === 'memory' ? 4 : 3);
  let next = 0;
  let finished = 0;
  try {
    await Promise.all(
      Array.from(
        { length: Math.min(concurrency, options.trials) },
        async () => {
          while (next < options.trials) {
            const seed = options.seed + next++;
            let found: string[];
            try {
              found = await trial(ctx, seed);
            } catch (error) {
              found = [
                `harness error: ${String((error as Error)?.stack ?? error)}`,
              ];
            }
            for (const what of found) {
              violations.push({ store: options.store, seed, what });
              log(
                `VIOLATION store=${options.store} seed=${seed}: ${what}\n  replay: npm run crash -- --store ${options.store} --seed ${seed} --trials 1${options.time ? ' --time' : ''}`,
              );
            }
            finished++;
            if (finished % 100 === 0)
              log(
                `${options.store}: ${finished}/${options.trials} trials, ${violations.length} violation(s)`,
              );
          }
        },
      ),
    );
  } finally {
    await cluster.close();
  }
  return {
    store: options.store,
    trials: options.trials,
    seed: options.seed,
    ms: Math.round(performance.now() - started),
    violations,
    stats: Object.fromEntries(Object.entries(ctx.stats).sort()),
    points: ctx.points,
  };
}

async function cli(): Promise<number> {
  const { values } = parseArgs({
    options: {
      store: { type: 'string', default: 'all' },
      trials: { type: 'string', default: '100' },
      seed: { type: 'string' },
      concurrency: { type: 'string' },
      mode: { type: 'string', default: 'both' },
      faults: { type: 'string' },
      sabotage: { type: 'string' },
      decide: { type: 'string', default: 'mixed' },
      quiet: { type: 'boolean', default: false },
      time: { type: 'boolean', default: false },
    },
  });
  const stores: FuzzStore[] =
    values.store === 'all'
      ? ['memory', ...STORE_KINDS]
      : values.store.split(',').map((s) => {
          if (s !== 'memory' && !isStoreKind(s))
            throw new Error(`--store: unknown store "${s}"`);
          return s;
        });
  const seed =
    values.seed !== undefined
      ? Number(values.seed)
      : Math.floor(Math.random() * 1e9);
  const trials = Number(values.trials);
  if (
    !Number.isSafeInteger(seed) ||
    !Number.isSafeInteger(trials) ||
    trials < 1
  )
    throw new Error('--seed and --trials must be integers');
  if (!['random', 'named', 'both'].includes(values.mode))
    throw new Error('--mode must be random, named or both');
  if (
    values.sabotage !== undefined &&
    values.sabotage !== 'rerun-in-doubt' &&
    values.sabotage !== 'resolve-lies'
  )
    throw new Error('--sabotage must be rerun-in-doubt or resolve-lies');
  if (!['rerun', 'resolve', 'mixed'].includes(values.decide))
    throw new Error('--decide must be rerun, resolve or mixed');
  let failed = false;
  for (const store of stores) {
    console.log(
      `${store}: ${trials} trials from seed ${seed} (mode ${values.mode})`,
    );
    const summary = await fuzz({
      store,
      trials,
      seed,
      mode: values.mode as FuzzMode,
      ...(values.concurrency !== undefined && {
        concurrency: Number(values.concurrency),
      }),
      ...(values.faults !== undefined && { faults: Number(values.faults) }),
      ...(values.sabotage !== undefined && {
        sabotage: values.sabotage,
      }),
      decide: values.decide as NonNullable<FuzzOptions['decide']>,
      ...(values.time && { time: true }),
      log: (line) => console.log(line),
    });
    failed ||= summary.violations.length > 0;
    console.log(
      `${store}: ${summary.trials} trials, ${summary.violations.length} violation(s), ${(summary.ms / 1000).toFixed(1)} s` +
        (summary.violations.length
          ? `; failing seeds: ${[...new Set(summary.violations.map((v) => v.seed))].join(' ')}`
          : ''),
    );
    if (!values.quiet) {
      console.log(`  stats ${JSON.stringify(summary.stats)}`);
      console.log(
        `  named points reached (worker killed there) ${JSON.stringify(summary.points)}`,
      );
    }
  }
  return failed ? 1 : 0;
}

if (require.main === module) {
  cli().then(
    (code) => process.exit(code),
    (error: unknown) => {
      console.error(error);
      process.exit(2);
    },
  );
}
