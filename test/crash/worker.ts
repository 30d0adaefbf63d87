/**
 * One crash-test worker process: the spec's tickets flow on a shared store, with tools that append
 * what really happens to an external ledger file. The test kills it with SIGKILL wherever it likes.
 *
 *   node -r ./test/utils/ts-register.js test/crash/worker.ts <run|run-many|recover|recover-all> [flags]
 *
 * Flags: --store redis|sqlite|postgres (default $CRASH_STORE, else redis), --run-id <id> (required
 * for recover), --count <n> and --run-prefix <p> (run-many: n runs at once, ids p-0..p-(n-1)), --rerun-in-doubt, --force (recover-all: ignore leases), --lease-ms <n>, --barrier
 * (hold the first checkpoint save — the start, or a recovery's claim — until a line arrives on stdin).
 *
 * Environment: LEDGER (the ledger file, required); the store's location (see stores.ts: REDIS_URL +
 * REDIS_PREFIX, SQLITE_PATH, DATABASE_URL + PG_SCHEMA); HANG_IN=<tool> makes that tool block after
 * its `begin` line, forever or until RELEASE_FILE exists (polled every 20 ms); TOOL_DELAY_MS=<n>
 * makes every tool sleep up to n ms (random) before and inside its side effect.
 *
 * Stdout: `STARTED` when the work begins (after loading and connecting), `READY <tool>` once a
 * hanging tool's `begin` is on disk, `ARMED` at the barrier, then one
 * JSON line with the outcome (a result, or the library error that stopped it) and exit 0.
 * Anything unexpected: the stack on stderr and exit 1.
 */
import { closeSync, existsSync, fsyncSync, openSync, writeSync } from 'node:fs';
import { parseArgs } from 'node:util';
import {
  DurableError,
  Executor,
  FlowRunner,
  RecoveryNeedsDecision,
  ToolRegistry,
  idempotencyKey,
  type CheckpointStore,
  type RunResult,
} from 'agent-adapter';
import { KEY, ticketsFlow, type Order } from '../utils/tickets';
import { isStoreKind, openStore } from './stores';

/** One ledger line: a tool's side effect is about to happen (`begin`) or has happened (`end`). */
export interface LedgerLine {
  tool: string;
  pid: number;
  key: string;
  phase: 'begin' | 'end';
}

/** What a worker prints last. */
export type Outcome =
  | { status: string; runId: string; step: number; note: string }
  | {
      error: string;
      message: string;
      calls?: ReadonlyArray<readonly [string, string]>;
    };

export interface WorkerReport {
  pid: number;
  mode: string;
  /** From process start to the moment the worker began its work (module loading, transpiling, connecting). */
  bootMs: number;
  /** From `STARTED` to the outcome. */
  workMs?: number;
  outcome?: Outcome;
  /** recover-all: run id → outcome. */
  runs?: Record<string, Outcome>;
}

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    store: { type: 'string', default: process.env.CRASH_STORE ?? 'redis' },
    'run-id': { type: 'string' },
    'rerun-in-doubt': { type: 'boolean', default: false },
    force: { type: 'boolean', default: false },
    'lease-ms': { type: 'string' },
    barrier: { type: 'boolean', default: false },
    count: { type: 'string', default: '1' },
    'run-prefix': { type: 'string', default: 'run' },
  },
});
const mode = positionals[0] ?? '';
const LEDGER = process.env.LEDGER;
const HANG_IN = process.env.HANG_IN;
const RELEASE_FILE = process.env.RELEASE_FILE;
const TOOL_DELAY_MS = Number(process.env.TOOL_DELAY_MS ?? 0);

function appendLedger(tool: string, phase: LedgerLine['phase']): void {
  const line: LedgerLine = {
    tool,
    pid: process.pid,
    key: idempotencyKey(),
    phase,
  };
  const fd = openSync(LEDGER!, 'a');
  try {
    writeSync(fd, `${JSON.stringify(line)}\n`);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const jitter = () =>
  TOOL_DELAY_MS > 0 ? sleep(Math.random() * TOOL_DELAY_MS) : undefined;

/** Blocks (keeping the process alive) until RELEASE_FILE exists; forever without one. */
async function hang(tool: string): Promise<void> {
  process.stdout.write(`READY ${tool}\n`);
  await new Promise<void>((resolve) => {
    const timer = setInterval(() => {
      if (RELEASE_FILE && existsSync(RELEASE_FILE)) {
        clearInterval(timer);
        resolve();
      }
    }, 20);
  });
}

function registry(): ToolRegistry {
  const tool =
    (name: string, result: (a: { show: string; seats?: number }) => string) =>
    async (a: { show: string; seats?: number }) => {
      await jitter();
      appendLedger(name, 'begin');
      if (HANG_IN === name) await hang(name);
      await jitter();
      appendLedger(name, 'end');
      return result(a);
    };
  return new ToolRegistry()
    .register(
      'hold_seats',
      tool('hold_seats', (a) => `held ${a.seats} for ${a.show}`),
      { idempotent: true },
    )
    .register(
      'charge_card',
      tool('charge_card', (a) => `charged ${a.seats}`),
    )
    .register(
      'email_tickets',
      tool('email_tickets', (a) => `sent ${a.show}`),
    );
}

/** The store, with its first `save` held until the test says go (a line on stdin). */
function withBarrier(store: CheckpointStore): CheckpointStore {
  let armed = true;
  const go = () =>
    new Promise<void>((resolve) => {
      process.stdin.once('data', () => {
        process.stdin.pause();
        resolve();
      });
      process.stdout.write('ARMED\n');
    });
  return new Proxy(store, {
    get(target, prop) {
      const value: unknown = Reflect.get(target, prop, target);
      if (prop === 'save' && armed) {
        armed = false;
        return async (...args: Parameters<CheckpointStore['save']>) => {
          await go();
          return target.save(...args);
        };
      }
      return typeof value === 'function' && prop !== 'constructor'
        ? (value as (...a: unknown[]) => unknown).bind(target)
        : value;
    },
  });
}

function outcomeOf(x: RunResult<Order> | Error): Outcome {
  if (!(x instanceof Error)) {
    return {
      status: x.status,
      runId: x.runId,
      step: x.step,
      note: x.state.note,
    };
  }
  if (!(x instanceof DurableError)) throw x;
  return {
    error: x.name,
    message: x.message,
    ...(x instanceof RecoveryNeedsDecision && { calls: x.calls }),
  };
}

async function main(): Promise<number> {
  if (!LEDGER) throw new Error('LEDGER (the ledger file) must be set');
  if (!isStoreKind(values.store))
    throw new Error(`--store must be redis, sqlite or postgres`);
  const runId = values['run-id'];
  const opened = await openStore(values.store);
  const store = values.barrier ? withBarrier(opened.store) : opened.store;
  const leaseMs = values['lease-ms'] ? Number(values['lease-ms']) : undefined;
  const runner = new FlowRunner(new Executor(registry()), {
    checkpoints: store,
    checkpointKey: KEY,
    ...(leaseMs !== undefined && { leaseMs }),
  });
  const flow = ticketsFlow();
  // Connect, and load what the first save would load lazily (the state class's validator), so
  // that `STARTED` marks the moment the run's own work begins: random kill points land in it.
  await opened.store.head('warm-up');
  await flow.compile().state.fromInput({ show: 'warm-up', seats: 1 });
  const report: WorkerReport = {
    pid: process.pid,
    mode,
    bootMs: Math.round(performance.now()),
  };
  process.stdout.write('STARTED\n');
  const settle = <T>(p: Promise<T>) =>
    p.then(
      (v) => v,
      (e: unknown) => (e instanceof Error ? e : new Error(String(e))),
    );

  switch (mode) {
    case 'run':
      report.outcome = outcomeOf(
        await settle(
          runner.run(
            flow,
            { show: 'Hamlet', seats: 2 },
            runId === undefined ? {} : { runId },
          ),
        ),
      );
      break;
    case 'run-many': {
      const ids = Array.from(
        { length: Number(values.count) },
        (_, i) => `${values['run-prefix']}-${i}`,
      );
      const results = await Promise.all(
        ids.map((id) =>
          settle(runner.run(flow, { show: id, seats: 2 }, { runId: id })),
        ),
      );
      report.runs = Object.fromEntries(
        ids.map((id, i) => [id, outcomeOf(results[i]!)]),
      );
      break;
    }
    case 'recover':
      if (runId === undefined) throw new Error('recover needs --run-id');
      report.outcome = outcomeOf(
        await settle(
          runner.recover(flow, runId, {
            rerunInDoubt: values['rerun-in-doubt'],
          }),
        ),
      );
      break;
    case 'recover-all': {
      const all = await runner.recoverAll(flow, {
        rerunInDoubt: values['rerun-in-doubt'],
        force: values.force,
      });
      report.runs = {};
      for (const [id, out] of all) report.runs[id] = outcomeOf(out);
      break;
    }
    default:
      throw new Error(
        `unknown mode "${mode}" (run, run-many, recover, recover-all)`,
      );
  }
  report.workMs = Math.round(performance.now() - report.bootMs);
  process.stdout.write(`${JSON.stringify(report)}\n`);
  runner.close();
  // Closing is a courtesy: the process ends either way.
  await Promise.race([opened.close().catch(() => undefined), sleep(1000)]);
  return 0;
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(
      `${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
    );
    process.exit(1);
  },
);
