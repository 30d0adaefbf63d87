/**
 * Proof under fire (issue 18 item 5): a fleet of worker processes (test/crash/worker.ts, mode
 * `takeover`) takes queued runs of the tickets flow under a queue's limits while this driver
 * SIGKILLs a random worker every few seconds and starts a new one later (and, on a Redis Cluster,
 * once SIGKILLs a master). Runs a dead worker left in doubt get an operator's decision from the
 * ledger (the ledger is the payment and mail systems: a call whose `end` is there ran). Then it
 * checks the fsync'd ledger:
 *
 *  V1 every run ends (done or failed);
 *  V2 no non-idempotent call has its side effect twice (ledger `end` lines per run and tool ≤ 1),
 *     and none begins again after its side effect (a finished call is never rerun);
 *  V3 the queue's global and per-key concurrency limits are never exceeded (tool calls in progress
 *     at once, a killed worker's cut at its kill);
 *  V4 each run a killed worker was driving is taken over (its next ledger line, by another worker,
 *     or its `TOOK` line when it needs a decision) within the lease plus 2 s (p50/p99 reported);
 *     a takeover that fell due while a Cluster failed over is reported apart, not held to it.
 */
import {
  CheckpointConflict,
  Executor,
  FlowRunner,
  KeyRing,
  ToolRegistry,
  type CallFinding,
  type CheckpointStore,
} from 'agent-adapter';
import { storeResolution } from 'agent-adapter/flow/runner/resolve';
import { KEY, ticketsFlow } from 'agent-adapter/testing/fixtures';
import { sandboxes, type Worker } from '../../test/crash/harness';
import { openStore, type BackendKind } from '../../test/crash/stores';
import type { LedgerLine } from '../../test/crash/worker';
import { killAll } from '../../test/utils/child-process';
import {
  startRedisCluster,
  type LocalRedisCluster,
} from '../../test/utils/redis-cluster';
import { markRestored } from 'agent-adapter/cli/restore';

export interface ChaosOptions {
  store: BackendKind;
  runs: number;
  workers: number;
  seed: number;
  /** The queue's limits, and how many concurrency keys the runs spread over. */
  concurrency: number;
  perKey: number;
  keys: number;
  leaseMs: number;
  everyMs: number;
  /** A random worker is killed every `killEveryMs` (± half) and replaced `restartAfterMs` later. */
  killEveryMs: number;
  restartAfterMs: number;
  /** Redis Cluster: SIGKILL one master once (a replica is promoted). */
  failover: boolean;
  toolDelayMs: number;
  timeoutMs: number;
  log?: (line: string) => void;
  /** Redis Cluster: one already started (the test's); else one is started and stopped here. */
  cluster?: LocalRedisCluster;
}

export interface ChaosReport {
  options: Omit<ChaosOptions, 'log' | 'cluster'>;
  wallMs: number;
  ended: number;
  done: number;
  failed: number;
  kills: number;
  failoverAtMs?: number;
  /** From the master's kill until every slot had a master again (the store was down meanwhile). */
  failoverOutageMs?: number;
  decisions: number;
  /** Kill → next ledger line of each run the killed worker drove, by another worker (ms). */
  takeoverMs: number[];
  /** The same, for kills whose takeover fell due during the failover (not held to the bound). */
  takeoverDuringFailoverMs: number[];
  mostAtOnce: number;
  mostPerKey: number;
  violations: string[];
}

/** A small seeded generator (mulberry32): the same seed, the same kill schedule and victims. */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const NOT_IDEMPOTENT = ['charge_card', 'email_tickets'];
const runOf = (l: LedgerLine) => (l.args as { show: string }).show;

/** What each tool returns (worker.ts), for a decision that says a call ran. */
function resultOf(tool: string, runId: string): string {
  if (tool === 'hold_seats') return `held 2 for ${runId}`;
  if (tool === 'charge_card') return 'charged 2';
  return `sent ${runId}`;
}

export async function chaos(options: ChaosOptions): Promise<ChaosReport> {
  const log = options.log ?? (() => undefined);
  const rng = random(options.seed);
  const started = Date.now();
  let cluster: LocalRedisCluster | undefined;
  const ownCluster = options.store === 'redis-cluster' && !options.cluster;
  if (options.store === 'redis-cluster') {
    cluster = options.cluster ?? (await startRedisCluster());
    process.env.REDIS_CLUSTER_NODES = cluster.startupNodes
      .map((n) => `${n.host}:${n.port}`)
      .join(',');
  }
  const boxes = sandboxes(options.store, 'chaos');
  const t = boxes.fresh();
  const prefix = t.runId;
  const ids = Array.from({ length: options.runs }, (_, i) => `${prefix}-${i}`);
  const keyOf = new Map(ids.map((id, i) => [id, `k${i % options.keys}`]));
  const opened = await openStore(options.store, { ...process.env, ...t.env });
  const workerArgs = [
    'takeover',
    '--every-ms',
    String(options.everyMs),
    '--lease-ms',
    String(options.leaseMs),
    '--queue-concurrency',
    String(options.concurrency),
    '--queue-per-key',
    String(options.perKey),
  ];
  const env = { TOOL_DELAY_MS: String(options.toolDelayMs) };
  const fleet: Array<Worker | undefined> = [];
  /** Every worker started, killed ones too: their `TOOK` lines say when each took a run. */
  const everyone: Worker[] = [];
  const start = () => {
    const w = t.start(workerArgs, env);
    everyone.push(w);
    return w;
  };
  const kills: Array<{ at: number; pid: number }> = [];
  const decided = new Map<string, number>(); // run id → when its last decision was stored
  let failoverAt: number | undefined;
  /** When the cluster had a master for every slot again after the failover. */
  let healedAt: number | undefined;
  try {
    for (let i = 0; i < options.workers; i++) fleet.push(start());
    for (const w of fleet) await w!.waitForLine(/^STARTED$/, 60_000);
    const enqueued = await t
      .start([
        'enqueue',
        '--count',
        String(options.runs),
        '--run-prefix',
        prefix,
        '--keys',
        String(options.keys),
      ])
      .report(120_000);
    log(`enqueued ${enqueued.enqueued?.length} runs`);
    const operator = operatorOn(opened.store);

    /** Stores a decision for each run waiting for one; resolves to the runs not ended. */
    const decide = async (): Promise<string[]> => {
      const unfinished = await progress(opened.store, ids);
      decisions: for (const runId of unfinished) {
        const needs = await operator.needs(runId).catch(() => undefined);
        if (needs?.failover) {
          // Written meanwhile by a worker that had not yet seen the failover: marked now.
          const marked = await operator.markFailover().catch(() => []);
          log(`failover: marked ${marked.length} more run(s) restored`);
          continue;
        }
        const got = needs?.calls;
        if (!got?.length) continue;
        const ledger = t.ledger();
        const calls: CallFinding[] = [];
        for (const call of got) {
          const ran = ledger.some(
            (l) => l.phase === 'end' && l.key === call.idempotencyKey,
          );
          if (call.idempotencyKey === undefined) continue decisions;
          calls.push(
            ran
              ? {
                  call: call.callId,
                  ran: true,
                  result: resultOf(call.tool, runId),
                }
              : { call: call.callId, ran: false },
          );
        }
        if (await operator.decide(runId, calls)) {
          decided.set(runId, Date.now());
          log(
            `decided ${runId}: ${calls.map((c) => `${c.call} ${c.ran ? 'ran' : 'did not run'}`).join(', ')}`,
          );
        }
      }
      return unfinished;
    };
    let nextKill = Date.now() + options.killEveryMs * (0.5 + rng());
    const pendingRestarts: Array<{ at: number; slot: number }> = [];
    for (;;) {
      const now = Date.now();
      if (now - started > options.timeoutMs) break;
      if (now >= nextKill) {
        const live = fleet.flatMap((w, slot) => (w ? [slot] : []));
        if (live.length > 1) {
          const slot = live[Math.floor(rng() * live.length)]!;
          const victim = fleet[slot]!;
          kills.push({ at: Date.now(), pid: victim.child.pid! });
          await victim.kill();
          fleet[slot] = undefined;
          pendingRestarts.push({ at: now + options.restartAfterMs, slot });
          log(`killed worker ${victim.child.pid} (slot ${slot})`);
        }
        nextKill = now + options.killEveryMs * (0.5 + rng());
      }
      for (const r of pendingRestarts.splice(0)) {
        if (r.at > now) {
          pendingRestarts.push(r);
          continue;
        }
        fleet[r.slot] = start();
      }
      if (
        cluster &&
        options.failover &&
        failoverAt === undefined &&
        kills.length >= 1
      ) {
        const masters = await cluster.masters();
        const master = masters[0]!;
        log(
          `failover: prefix ${t.env.REDIS_PREFIX}; ${await cluster.describe()}`,
        );
        failoverAt = Date.now();
        await cluster.kill(master);
        log(`failover: SIGKILLed master ${master}`);
        // Healed once a replica is a master in its place and every slot is served again.
        void (async () => {
          while ((await cluster.masters()).length < masters.length)
            await sleep(50);
          await cluster.healthy(30_000);
          // The store now refuses the victim's unfinished runs (FailoverNeedsDecision): writes
          // the dead master acknowledged may be lost. The operator marks them restored (`runs
          // restored --failover`); every call they may have lost is then in doubt, and decided
          // from the ledger like any other (decide()).
          const marked = await operator.markFailover();
          healedAt = Date.now();
          log(`failover: marked ${marked.length} run(s) restored`);
          log(`failover: healed after ${healedAt - failoverAt} ms`);
        })().catch(() => undefined);
      }
      // The store may fail for a while (a failover): the driver looks again, as a worker does.
      const unfinished = await decide().catch((error: unknown) => {
        log(`driver: ${String(error)}`);
        return undefined;
      });
      if (unfinished?.length === 0) break;
      await sleep(200);
    }
    await killAll();
    if (cluster && Date.now() - started > options.timeoutMs)
      log(`timed out; the cluster: ${await cluster.describe()}`);
    const took = everyone.flatMap((w) =>
      w.lines.flatMap((line) => {
        const m = /^TOOK (\S+) (.*)$/.exec(line);
        if (!m) return [];
        const { at } = JSON.parse(m[2]!) as { at: number };
        return [{ run: m[1]!, pid: w.child.pid!, at, outcome: m[2]! }];
      }),
    );
    const outage =
      failoverAt === undefined
        ? undefined
        : { from: failoverAt, to: healedAt ?? Date.now() };
    const report = await analyse(
      options,
      t.ledger(),
      ids,
      keyOf,
      kills,
      { decided, took, outage },
      opened.store,
      log,
    );
    report.wallMs = Date.now() - started;
    if (outage) {
      report.failoverAtMs = outage.from - started;
      report.failoverOutageMs = outage.to - outage.from;
    }
    return report;
  } finally {
    await killAll();
    await opened.close().catch(() => undefined);
    await boxes.cleanup().catch(() => undefined);
    if (ownCluster) await cluster?.stop();
  }
}

/** The runs of `ids` not yet ended. */
async function progress(
  store: CheckpointStore,
  ids: string[],
): Promise<string[]> {
  const heads = await Promise.all(
    ids.map((id) => store.head(id).catch(() => undefined)),
  );
  return ids.filter((_, i) => {
    const s = heads[i]?.status;
    return s !== 'done' && s !== 'failed';
  });
}

/** The operator: reads a run's calls in doubt, and stores a decision about them. */
function operatorOn(store: CheckpointStore) {
  const fail = () => {
    throw new Error('the operator runs no tool');
  };
  const registry = new ToolRegistry()
    .register('hold_seats', fail, { idempotent: true })
    .register('charge_card', fail)
    .register('email_tickets', fail);
  const runner = new FlowRunner(new Executor(registry), {
    checkpoints: store,
    checkpointKey: KEY,
  });
  const ring = KeyRing.from(KEY);
  return {
    async needs(runId: string) {
      return (await runner.get(ticketsFlow(), runId)).needsDecision;
    },
    /** `runs restored --failover`, as an operator runs it once the cluster healed. */
    async markFailover(): Promise<string[]> {
      const { marked } = await markRestored(store, ring, {
        failover: true,
        by: 'chaos',
        reason: 'a master was SIGKILLed',
      });
      return marked;
    },
    async decide(runId: string, calls: CallFinding[]): Promise<boolean> {
      try {
        // No lease: the run is due at once, and a worker's takeover spends the decision.
        await storeResolution(
          { store, ring },
          runId,
          { calls, by: 'chaos' },
          { owner: 'chaos-operator' },
        );
        return true;
      } catch (error) {
        if (error instanceof CheckpointConflict) return false; // a worker moved it meanwhile
        throw error;
      }
    },
  };
}

async function analyse(
  options: ChaosOptions,
  ledger: LedgerLine[],
  ids: string[],
  keyOf: Map<string, string>,
  kills: Array<{ at: number; pid: number }>,
  seen: {
    decided: Map<string, number>;
    /** Each worker's settled takeovers (a run finished, or found needing a decision). */
    took: Array<{ run: string; pid: number; at: number; outcome: string }>;
    /** The failover: the store could not be written in between, so no one could take a run. */
    outage?: { from: number; to: number };
  },
  store: CheckpointStore,
  log: (line: string) => void,
): Promise<ChaosReport> {
  const { decided, took, outage } = seen;
  const violations: string[] = [];
  const heads = await Promise.all(ids.map((id) => store.head(id)));
  const statuses = heads.map((h) => h?.status);
  ids.forEach((id, i) => {
    if (statuses[i] !== 'done' && statuses[i] !== 'failed')
      violations.push(`V1 run ${id} did not end (${statuses[i] ?? 'missing'})`);
  });
  // V2: side effects once; none begun again after it happened.
  for (const id of ids)
    for (const tool of NOT_IDEMPOTENT) {
      const lines = ledger.filter((l) => runOf(l) === id && l.tool === tool);
      const ends = lines.filter((l) => l.phase === 'end');
      if (ends.length > 1)
        violations.push(`V2 ${tool} of ${id} ran ${ends.length} times`);
      const first = ends[0];
      if (first && lines.some((l) => l.phase === 'begin' && l.at! > first.at!))
        violations.push(`V2 ${tool} of ${id} began again after it ran`);
    }
  // V3: calls in progress at once, overall and per key; a killed worker's cut at its kill.
  const killedAt = new Map(kills.map((k) => [k.pid, k.at]));
  const spans = ledger
    .filter((l) => l.phase === 'begin')
    .map((l) => {
      const end = ledger.find(
        (e) =>
          e.phase === 'end' &&
          e.pid === l.pid &&
          e.key === l.key &&
          e.tool === l.tool,
      );
      return {
        run: runOf(l),
        pid: l.pid,
        tool: l.tool,
        from: l.at!,
        to: end?.at ?? killedAt.get(l.pid) ?? Infinity,
      };
    });
  const most = (of: typeof spans) => {
    const edges = of
      .flatMap((s) => [[s.from, 1] as const, [s.to, -1] as const])
      .sort((a, b) => a[0] - b[0] || a[1] - b[1]);
    let now = 0;
    let max = 0;
    for (const [, step] of edges) max = Math.max(max, (now += step));
    return max;
  };
  /** The calls in progress when `of` passed `limit`, with their runs' history: why it did. */
  const trace = (of: typeof spans, limit: number) => {
    const over = of.find(
      (s) => of.filter((o) => o.from <= s.from && o.to > s.from).length > limit,
    );
    if (!over) return;
    const at = of.filter((o) => o.from <= over.from && o.to > over.from);
    for (const s of at)
      log(
        `V3: ${s.run} (${keyOf.get(s.run)}) by ${s.pid} ${s.tool} ${s.from}-${s.to}`,
      );
    const involved = new Set(at.map((o) => o.run));
    for (const l of ledger.filter((l) => involved.has(runOf(l))))
      log(`V3 ledger: ${runOf(l)} ${l.pid} ${l.tool} ${l.phase} ${l.at}`);
    for (const x of took.filter((x) => involved.has(x.run)))
      log(`V3 took: ${x.run} by ${x.pid} ${x.outcome}`);
    for (const k of kills) log(`V3 kill: ${k.pid} at ${k.at}`);
    if (outage) log(`V3 outage: ${outage.from}-${outage.to}`);
  };
  const mostAtOnce = most(spans);
  if (mostAtOnce > options.concurrency) {
    violations.push(
      `V3 ${mostAtOnce} runs in a call at once (limit ${options.concurrency})`,
    );
    trace(spans, options.concurrency);
  }
  let mostPerKey = 0;
  for (const key of new Set(keyOf.values())) {
    const ofKey = spans.filter((s) => keyOf.get(s.run) === key);
    const n = most(ofKey);
    mostPerKey = Math.max(mostPerKey, n);
    if (n > options.perKey) {
      violations.push(
        `V3 ${n} runs of key ${key} in a call at once (limit ${options.perKey})`,
      );
      trace(ofKey, options.perKey);
    }
  }
  // V4: each run a killed worker drove, taken over by another within the lease + 2 s.
  const takeoverMs: number[] = [];
  const duringFailoverMs: number[] = [];
  for (const kill of kills) {
    const before = ledger.filter((l) => l.at! <= kill.at);
    const lastBy = new Map<string, LedgerLine>();
    for (const l of before) lastBy.set(runOf(l), l);
    for (const [run, last] of lastBy) {
      if (last.pid !== kill.pid) continue;
      if (last.tool === 'email_tickets' && last.phase === 'end') continue; // it had finished
      const next = ledger.find(
        (l) => runOf(l) === run && l.at! > kill.at && l.pid !== kill.pid,
      )?.at;
      // A run that needs a decision is taken when a worker finds so (its `TOOK` line).
      const found = took.find(
        (x) => x.run === run && x.at > kill.at && x.pid !== kill.pid,
      )?.at;
      const at = Math.min(next ?? Infinity, found ?? Infinity);
      if (at === Infinity) continue; // ended with no call left (its last checkpoint only)
      // A takeover due while the cluster fails over waits for it (and for the clients to find
      // the new master): counted apart, not held to the bound.
      const due = kill.at + options.leaseMs + 2_000;
      if (outage && outage.from < due && outage.to + 2_000 > kill.at) {
        duringFailoverMs.push(at - kill.at);
        continue;
      }
      takeoverMs.push(at - kill.at);
      if (at - kill.at > options.leaseMs + 2_000)
        violations.push(
          `V4 run ${run} taken ${at - kill.at} ms after its worker's kill`,
        );
    }
  }
  const { log: _log, cluster: _cluster, ...rest } = options;
  return {
    options: rest,
    wallMs: 0,
    ended: statuses.filter((s) => s === 'done' || s === 'failed').length,
    done: statuses.filter((s) => s === 'done').length,
    failed: statuses.filter((s) => s === 'failed').length,
    kills: kills.length,
    decisions: decided.size,
    takeoverMs: takeoverMs.sort((a, b) => a - b),
    takeoverDuringFailoverMs: duringFailoverMs.sort((a, b) => a - b),
    mostAtOnce,
    mostPerKey,
    violations,
  };
}

/** The p-th percentile of sorted values. */
export function percentile(sorted: number[], p: number): number | undefined {
  if (sorted.length === 0) return undefined;
  return sorted[
    Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)
  ];
}
