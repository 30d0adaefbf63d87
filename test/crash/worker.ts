/**
 * One crash-test worker process: the spec's tickets flow on a shared store, with tools that append
 * what really happens to an external ledger file. The test kills it with SIGKILL wherever it likes.
 *
 *   node -r ./test/utils/ts-register.js test/crash/worker.ts <mode> [flags]
 *
 * Modes: run, run-many, enqueue (--count runs on the tickets queue, or one --dedupe-key for all),
 * recover, recover-all, takeover (the tickets flow and the durable-time flows of time-flows.ts:
 * takeover looks for due runs every --every-ms until killed and prints `TOOK <runId> <outcome
 * JSON>` per run it took, `FIRED <record> <ticks>` per schedule firing; --takeover-concurrency;
 * --schedule <cron> declares the `beat` schedule first and prints `SCHEDULED` once it is stored
 * (--schedule-name, --catch-up, --overlap; each tick's run charges once, its `show` the tick); --start nap|late then starts --count runs
 * (ids <run-prefix>-<i>): `nap` sleeps --sleep-ms between its charge and its mail and prints
 * `SLEEPING <id> <wakeAt>`, `late` pauses on `refund_late`, whose approval has a --deadline-ms
 * deadline the clock denies, and prints `PAUSED <id> <deadline>`); approval-run, approval-resume,
 * approval-recover (a `refunds` flow: `quote`, then `refund`, which needs approval); loop-run,
 * loop-recover (a tool loop whose model is an OpenAI-compatible server at CHAT_URL, with the tools
 * hold_seats (idempotent) and charge_card).
 *
 * Mode fuzz-serve (the crash fuzzer, tools/crash/fuzz.ts): a long-lived worker that runs fuzz jobs (JSON lines
 * on stdin: run, recover or resume the random flow of a seed, tools/crash/fuzz-flow.ts) one after the other.
 * A job's kill plan makes the worker SIGKILL itself at that point: before or after the n-th store
 * write or a named protocol point (a checkpoint's reason, a call-log write carrying `started` or
 * only `done`), in the n-th tool call, or after a delay. The hook lives in this test worker's store
 * wrapper and tools: the library has no fault hooks. Fuzz tools' ledger lines carry the call's
 * arguments.
 *
 * Approval and loop flags: --decision approve|deny (approval-resume); --sync-port hang|approve
 * (a synchronous ApprovalPort instead of a pause: `hang` prints `READY port` once the call's
 * `approving` record is stored and never answers; `approve` approves and appends a `port` line
 * to the ledger).
 *
 * Flags: --store redis|sqlite|postgres (default $CRASH_STORE, else redis), --run-id <id> (required
 * for recover), --count <n> and --run-prefix <p> (run-many: n runs at once, ids p-0..p-(n-1)), --rerun-in-doubt, --force (recover-all: ignore leases), --lease-ms <n>, --queue-concurrency <n> (the tickets queue's limit), --barrier
 * (hold the first checkpoint save — the start, or a recovery's claim — until a line arrives on stdin).
 *
 * Environment: LEDGER (the ledger file, required); the store's location (see stores.ts: REDIS_URL +
 * REDIS_PREFIX, SQLITE_PATH, DATABASE_URL + PG_SCHEMA); HANG_IN=<tool> makes that tool block after
 * its `begin` line, forever or until RELEASE_FILE exists (polled every 20 ms); TOOL_DELAY_MS=<n>
 * makes every tool sleep up to n ms (random) before and inside its side effect.
 * READY_AFTER=<tool>:<phase> delays a hanging tool's `READY` until a call record of that tool and
 * phase is stored (so a finished sibling call is on the store when the test kills the worker).
 * HANG_AFTER_SAVE=<reason> (start, superstep, pause, resume, claim) or step=<n>: once that
 * checkpoint is stored, print `SAVED <what>` and block for ever (the test kills the worker there).
 * CHAT_URL: the chat-completions base URL of the loop modes' model; CHAT_CLIENT=ai-sdk talks to it
 * through the AI SDK (AiSdkChatModel over @ai-sdk/openai-compatible) instead of OpenAIChatModel.
 *
 * Stdout: `STARTED` when the work begins (after loading and connecting), `READY <tool>` once a
 * hanging tool's `begin` is on disk, `ARMED` at the barrier, then one
 * JSON line with the outcome (a result, or the library error that stopped it) and exit 0.
 * Anything unexpected: the stack on stderr and exit 1.
 */
import { closeSync, existsSync, fsyncSync, openSync, writeSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { parseArgs } from 'node:util';
import {
  AiSdkChatModel,
  DurableError,
  Executor,
  FlowRunner,
  OpenAIChatModel,
  RecoveryNeedsDecision,
  ToolLoop,
  ToolRegistry,
  idempotencyKey,
  type ApprovalPort,
  type CallRecord,
  type ChatModel,
  type CheckpointRecord,
  type CheckpointStore,
  type RunResult,
  type ToolLoopResult,
} from 'agent-adapter';
import { InterceptingStore, type StoreWrite } from 'agent-adapter/testing';
import {
  KEY,
  refundsFlow,
  ticketsFlow,
  type Order,
  type Refund,
} from 'agent-adapter/testing/fixtures';
import {
  KillSwitch,
  fuzzFlow,
  fuzzRegistry,
  generate,
  writeKinds,
  type FuzzState,
  type KillPlan,
} from '../../tools/crash/fuzz-flow';
import {
  faulty,
  type FaultPlan,
  type FaultReport,
} from '../../tools/crash/store-faults';
import { isBackendKind, openStore, type BackendKind } from './stores';
import { timeFlows } from './time-flows';

/** One ledger line: a tool's side effect is about to happen (`begin`) or has happened (`end`). */
export interface LedgerLine {
  tool: string;
  pid: number;
  key: string;
  phase: 'begin' | 'end';
  /** Fuzz tools: the call's arguments (they name the call: node, superstep, index). */
  args?: unknown;
  /** Epoch ms the line was written (one host's clock: calls of several workers compare). */
  at?: number;
}

/** What a worker prints last. */
export type Outcome =
  | {
      status: string;
      runId: string;
      step: number;
      note: string;
      /** A paused run: the tool that waits for a decision. */
      pending?: string;
      /** Tool loops: model calls of the whole run. */
      modelCalls?: number;
    }
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
  /** enqueue: what each enqueue returned. */
  enqueued?: Array<{ runId: string; created: boolean }>;
}

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    store: { type: 'string', default: process.env.CRASH_STORE ?? 'redis' },
    'run-id': { type: 'string' },
    'rerun-in-doubt': { type: 'boolean', default: false },
    force: { type: 'boolean', default: false },
    'lease-ms': { type: 'string' },
    'every-ms': { type: 'string', default: '100' },
    barrier: { type: 'boolean', default: false },
    count: { type: 'string', default: '1' },
    'run-prefix': { type: 'string', default: 'run' },
    'queue-concurrency': { type: 'string' },
    'queue-per-key': { type: 'string' },
    keys: { type: 'string' },
    'dedupe-key': { type: 'string' },
    decision: { type: 'string' },
    'sync-port': { type: 'string' },
    start: { type: 'string' },
    'sleep-ms': { type: 'string', default: '3000' },
    'deadline-ms': { type: 'string', default: '2000' },
    'takeover-concurrency': { type: 'string' },
    schedule: { type: 'string' },
    'schedule-name': { type: 'string', default: 'beat' },
    'catch-up': { type: 'string', default: 'last' },
    overlap: { type: 'string', default: 'skip' },
  },
});
const mode = positionals[0] ?? '';
const LEDGER = process.env.LEDGER;
const HANG_IN = process.env.HANG_IN;
const RELEASE_FILE = process.env.RELEASE_FILE;
const TOOL_DELAY_MS = Number(process.env.TOOL_DELAY_MS ?? 0);
const READY_AFTER = process.env.READY_AFTER;
const HANG_AFTER_SAVE = process.env.HANG_AFTER_SAVE;

function appendLedger(
  tool: string,
  phase: LedgerLine['phase'],
  key = idempotencyKey(),
  args?: unknown,
  file = LEDGER!,
): void {
  const line: LedgerLine = {
    tool,
    pid: process.pid,
    key,
    phase,
    ...(args !== undefined && { args }),
    at: Date.now(),
  };
  const fd = openSync(file, 'a');
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
  if (READY_AFTER) await stored(READY_AFTER);
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

/** A tool that appends `begin` and `end` to the ledger around its (pretend) side effect. */
const tool =
  <A>(name: string, result: (a: A) => string) =>
  async (a: A) => {
    await jitter();
    // The arguments name the run (the tickets flow's show is its run id in queue tests).
    appendLedger(name, 'begin', idempotencyKey(), a);
    if (HANG_IN === name) await hang(name);
    await jitter();
    appendLedger(name, 'end', idempotencyKey(), a);
    return result(a);
  };

function registry(): ToolRegistry {
  return new ToolRegistry()
    .register(
      'hold_seats',
      tool<Ticket>('hold_seats', (a) => `held ${a.seats} for ${a.show}`),
      { idempotent: true },
    )
    .register(
      'charge_card',
      tool<Ticket>('charge_card', (a) => `charged ${a.seats}`),
    )
    .register(
      'email_tickets',
      tool<Ticket>('email_tickets', (a) => `sent ${a.show}`),
    )
    .register(
      'refund_late',
      tool<Ticket>('refund_late', (a) => `refunded ${a.show}`),
      // The deadline is sealed with the pause: another worker's setting does not change it.
      {
        approval: {
          timeoutMs: Number(values['deadline-ms']),
          onTimeout: 'deny',
        },
      },
    );
}

type Ticket = { show: string; seats?: number };

type Amount = { amount: number };

function refundsRegistry(): ToolRegistry {
  return new ToolRegistry()
    .register(
      'quote',
      tool<Amount>('quote', (a) => `quote ${a.amount}`),
    )
    .register(
      'refund',
      tool<Amount>('refund', (a) => `refunded ${a.amount}`),
      { approval: true },
    );
}

/** The loop's tools: hold_seats (idempotent) and charge_card. */
function loopRegistry(): ToolRegistry {
  return new ToolRegistry()
    .register(
      'hold_seats',
      tool<{ seats: number }>('hold_seats', (a) => `held ${a.seats}`),
      { idempotent: true },
    )
    .register(
      'charge_card',
      tool<Amount>('charge_card', (a) => `charged ${a.amount}`),
    );
}

/** The loop modes' model at `url`: OpenAIChatModel, or an AI SDK provider's model (`ai-sdk`). */
async function chatModel(
  url: string,
  client: string | undefined,
): Promise<ChatModel> {
  if (client === 'ai-sdk') {
    // Loaded only here: the other modes start without the AI SDK.
    const { createOpenAICompatible } =
      await import('@ai-sdk/openai-compatible');
    const provider = createOpenAICompatible({ name: 'local', baseURL: url });
    return new AiSdkChatModel(provider.chatModel('test-model'), {
      maxRetries: 0,
    });
  }
  if (client !== undefined) throw new Error('CHAT_CLIENT must be ai-sdk');
  return new OpenAIChatModel({
    baseUrl: url,
    model: 'test-model',
    maxRetries: 0,
  });
}

/** The synchronous approval port --sync-port asks for. */
function syncPort(kind: string | undefined): ApprovalPort | undefined {
  if (kind === undefined) return undefined;
  if (kind === 'hang')
    return {
      decide: async () => {
        await stored('refund:approving');
        await hang('port');
        return { approved: false, reason: 'released' };
      },
    };
  if (kind === 'approve')
    return {
      decide: (req) => {
        appendLedger('port', 'end', req.requestId);
        return { approved: true, by: 'port' };
      },
    };
  throw new Error('--sync-port must be hang or approve');
}

// ------------------------------------------------------------------------------------------------
// What this worker has stored, observed on its own store (for READY_AFTER and HANG_AFTER_SAVE).

/** A sealed record's body, read without verifying it (the worker only looks). */
function bodyOf(sealed: string): Record<string, unknown> {
  return JSON.parse(sealed.split('.').slice(3).join('.')) as Record<
    string,
    unknown
  >;
}

const storedPhases = new Set<string>();
const waiting = new Set<() => void>();

function noteStored(records: readonly CallRecord[]): void {
  for (const r of records) {
    const body = bodyOf(r.sealed);
    storedPhases.add(`${String(body.tool)}:${String(body.phase)}`);
  }
  for (const check of waiting) check();
}

/** Resolves once a call record `tool:phase` is stored. */
function stored(what: string): Promise<void> {
  return new Promise<void>((resolve) => {
    const check = () => {
      if (!storedPhases.has(what)) return;
      waiting.delete(check);
      resolve();
    };
    waiting.add(check);
    check();
  });
}

/** Whether HANG_AFTER_SAVE names this checkpoint. */
function hangsAfter(record: CheckpointRecord): string | undefined {
  if (!HANG_AFTER_SAVE) return undefined;
  const reason = String(bodyOf(record.sealed).reason);
  if (HANG_AFTER_SAVE === reason) return reason;
  if (HANG_AFTER_SAVE === `step=${record.step}`) return HANG_AFTER_SAVE;
  return undefined;
}

/** The store, watched: call records it stored, and a block after the checkpoint HANG_AFTER_SAVE names. */
function observed(store: CheckpointStore): CheckpointStore {
  return new InterceptingStore(store, {
    after: async (write) => {
      noteStored(write.records);
      const what =
        write.kind === 'save' ? hangsAfter(write.checkpoint) : undefined;
      if (what !== undefined) {
        process.stdout.write(`SAVED ${what}\n`);
        await new Promise(() => setInterval(() => undefined, 1_000));
      }
    },
  });
}

/** The store, with its first `save` held until the test says go (a line on stdin). */
function withBarrier(store: CheckpointStore): CheckpointStore {
  return heldUntil(
    store,
    () =>
      new Promise<void>((resolve) => {
        process.stdin.once('data', () => {
          process.stdin.pause();
          resolve();
        });
        process.stdout.write('ARMED\n');
      }),
  );
}

function outcomeOf(
  x: RunResult<Order | Refund> | ToolLoopResult | Error,
): Outcome {
  if ('messages' in x) {
    return {
      status: x.status,
      runId: x.runId,
      step: x.step,
      note: x.reply?.content ?? '',
      modelCalls: x.modelCalls,
      ...(x.pending && { pending: x.pending.tool }),
    };
  }
  if (!(x instanceof Error)) {
    return {
      status: x.status,
      runId: x.runId,
      step: x.step,
      note: x.state.note ?? '',
      ...(x.pending && { pending: x.pending.tool }),
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
  if (!isBackendKind(values.store))
    throw new Error(`--store must be redis, redis-cluster, sqlite or postgres`);
  if (mode === 'fuzz-serve') return fuzzServe(values.store);
  if (!LEDGER) throw new Error('LEDGER (the ledger file) must be set');
  const runId = values['run-id'];
  const opened = await openStore(values.store);
  const watched = observed(opened.store);
  const store = values.barrier ? withBarrier(watched) : watched;
  const leaseMs = values['lease-ms'] ? Number(values['lease-ms']) : undefined;
  const concurrency = values['queue-concurrency'];
  const runner = new FlowRunner(new Executor(registry()), {
    checkpoints: store,
    checkpointKey: KEY,
    ...(leaseMs !== undefined && { leaseMs }),
    // The tickets flow's own queue, limited as every worker of the test says.
    ...(concurrency !== undefined && {
      queues: {
        tickets: {
          concurrency: Number(concurrency),
          ...(values['queue-per-key'] && {
            perKey: Number(values['queue-per-key']),
          }),
        },
      },
    }),
  });
  const port = syncPort(values['sync-port']);
  const refunds = new FlowRunner(new Executor(refundsRegistry()), {
    checkpoints: store,
    checkpointKey: KEY,
    ...(leaseMs !== undefined && { leaseMs }),
    ...(port && { approvals: port }),
  });
  const loop = process.env.CHAT_URL
    ? new ToolLoop(
        await chatModel(process.env.CHAT_URL, process.env.CHAT_CLIENT),
        loopRegistry(),
        {
          name: 'support',
          checkpoints: store,
          checkpointKey: KEY,
          ...(leaseMs !== undefined && { leaseMs }),
        },
      )
    : undefined;
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
  // SIGTERM (a rolling restart): drain, so each run stops at its next superstep boundary, stored
  // and released for another worker; the outcomes are reported as usual.
  process.once('SIGTERM', () => {
    void Promise.all([runner.drain(), refunds.drain(), loop?.runner.drain()]);
  });
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
    case 'enqueue': {
      // --count runs on the tickets queue at once, ids <prefix>-<i>, or all with --dedupe-key.
      const prefix = values['run-prefix'];
      const dedupeKey = values['dedupe-key'];
      const keys = values.keys === undefined ? 0 : Number(values.keys);
      report.enqueued = await Promise.all(
        Array.from({ length: Number(values.count) }, (_, i) =>
          runner.enqueue(
            flow,
            { show: `${prefix}-${i}`, seats: 2 },
            {
              ...(dedupeKey ? { dedupeKey } : { runId: `${prefix}-${i}` }),
              // --keys n: run i's concurrency key is k<i mod n>.
              ...(keys > 0 && { key: `k${i % keys}` }),
            },
          ),
        ),
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
    case 'takeover': {
      // A live worker of a fleet: takes over due runs (continuous takeover) of the tickets flow
      // and the durable-time flows until it is killed, one `TOOK <runId> <outcome>` line per run
      // it finished or could not (a schedule's firing: `FIRED <record> <what it fired>`).
      // --schedule <cron>: declares the `beat` schedule first (--schedule-name, --catch-up,
      // --overlap). --start nap|late: then starts --count runs (ids <run-prefix>-<i>) and prints
      // `SLEEPING <id> <wakeAt>` / `PAUSED <id> <deadline>` (or `RESULT <id> <outcome>`) for each.
      const time = timeFlows();
      if (values.schedule !== undefined)
        await runner.schedule(time.beat, values.schedule, {
          name: values['schedule-name'],
          catchUp: values['catch-up'] as 'none' | 'last' | 'all',
          overlap: values.overlap as 'skip' | 'queue' | 'allow',
          input: (tick) => ({ show: tick.toISOString() }),
        });
      if (values.schedule !== undefined) process.stdout.write('SCHEDULED\n');
      const flows = [flow, time.nap, time.late, time.beat] as const;
      runner.takeOver(flows, {
        everyMs: Number(values['every-ms']),
        ...(values['takeover-concurrency'] !== undefined && {
          concurrency: Number(values['takeover-concurrency']),
        }),
        onOutcome: (flowName, [id, out]) =>
          process.stdout.write(
            flowName === '$schedules'
              ? `FIRED ${id} ${JSON.stringify(out instanceof Error ? { error: out.name, message: out.message } : out)}\n`
              : `TOOK ${id} ${JSON.stringify({ ...outcomeOf(out as RunResult<Order> | Error), at: Date.now() })}\n`,
          ),
      });
      const start = values.start;
      if (start !== undefined) {
        if (start !== 'nap' && start !== 'late')
          throw new Error('--start must be nap or late');
        const sleepMs = Number(values['sleep-ms']);
        await Promise.all(
          Array.from({ length: Number(values.count) }, async (_, i) => {
            const id = `${values['run-prefix']}-${i}`;
            const r = await settle(
              start === 'nap'
                ? runner.run(time.nap, { show: id, sleepMs }, { runId: id })
                : runner.run(time.late, { show: id }, { runId: id }),
            );
            process.stdout.write(
              r instanceof Error ||
                (r.status !== 'sleeping' && r.status !== 'paused')
                ? `RESULT ${id} ${JSON.stringify(outcomeOf(r as RunResult<Order> | Error))}\n`
                : r.status === 'sleeping'
                  ? `SLEEPING ${id} ${r.wakeAt}\n`
                  : `PAUSED ${id} ${r.pending?.deadline}\n`,
            );
          }),
        );
      }
      await new Promise<never>(() => undefined);
      break;
    }
    case 'recover-all': {
      const all = await runner.recoverAll(flow, {
        rerunInDoubt: values['rerun-in-doubt'],
        force: values.force,
      });
      report.runs = {};
      for (const [id, out] of all) report.runs[id] = outcomeOf(out);
      break;
    }
    case 'approval-run':
      report.outcome = outcomeOf(
        await settle(
          refunds.run(
            refundsFlow(),
            { amount: 30 },
            runId === undefined ? {} : { runId },
          ),
        ),
      );
      break;
    case 'approval-resume': {
      if (runId === undefined) throw new Error(`${mode} needs --run-id`);
      if (values.decision !== 'approve' && values.decision !== 'deny')
        throw new Error('--decision must be approve or deny');
      report.outcome = outcomeOf(
        await settle(
          refunds.resume(refundsFlow(), runId, {
            approved: values.decision === 'approve',
            by: `pid ${process.pid}`,
          }),
        ),
      );
      break;
    }
    case 'approval-recover':
      if (runId === undefined) throw new Error(`${mode} needs --run-id`);
      report.outcome = outcomeOf(
        await settle(
          refunds.recover(refundsFlow(), runId, {
            rerunInDoubt: values['rerun-in-doubt'],
          }),
        ),
      );
      break;
    case 'loop-run':
      if (!loop) throw new Error(`${mode} needs CHAT_URL`);
      report.outcome = outcomeOf(
        await settle(
          loop.run([{ role: 'user', content: 'Two seats for Hamlet.' }], {
            ...(runId !== undefined && { runId }),
          }),
        ),
      );
      break;
    case 'loop-recover':
      if (!loop) throw new Error(`${mode} needs CHAT_URL`);
      if (runId === undefined) throw new Error(`${mode} needs --run-id`);
      report.outcome = outcomeOf(
        await settle(
          loop.recover(runId, { rerunInDoubt: values['rerun-in-doubt'] }),
        ),
      );
      break;
    default:
      throw new Error(
        `unknown mode "${mode}" (run, run-many, recover, recover-all, approval-run, approval-resume, approval-recover, loop-run, loop-recover)`,
      );
  }
  report.workMs = Math.round(performance.now() - report.bootMs);
  process.stdout.write(`${JSON.stringify(report)}\n`);
  runner.close();
  refunds.close();
  loop?.close();
  // Closing is a courtesy: the process ends either way.
  await Promise.race([opened.close().catch(() => undefined), sleep(1000)]);
  return 0;
}

// ------------------------------------------------------------------------------------------------
// The crash fuzzer's worker (see tools/crash/fuzz.ts).

/** The store, with this worker SIGKILLing itself where its kill switch says. */
function killing(store: CheckpointStore, kill: KillSwitch): CheckpointStore {
  const die = (): never => {
    process.kill(process.pid, 'SIGKILL');
    throw new Error('unreachable');
  };
  const kinds = (write: StoreWrite) =>
    writeKinds(
      write.kind === 'save'
        ? { kind: 'save', checkpoint: write.checkpoint, calls: write.records }
        : { kind: 'recordCall', calls: write.records },
    );
  return new InterceptingStore(store, {
    before: (write) => {
      if (kill.atWrite(kinds(write), 'before')) die();
    },
    after: (write) => {
      if (kill.atWrite(kinds(write), 'after')) die();
    },
  });
}

/**
 * What a fuzz job ends with: the run's result, or the library error that stopped it; and what its
 * injected store faults hit, if it had any.
 */
export type FuzzOutcome = (
  | {
      status: string;
      step: number;
      error?: { name: string; message: string };
      pending?: string;
    }
  | {
      error: string;
      message: string;
      calls?: ReadonlyArray<readonly [string, string]>;
    }
) & { faults?: FaultReport };

/** One job of a fuzz-serve worker (a line of JSON on stdin). */
export interface FuzzJob {
  id: string;
  mode: 'fuzz-run' | 'fuzz-recover' | 'fuzz-resume';
  seed: number;
  runId: string;
  ledger: string;
  plan?: KillPlan;
  /** Transient store faults injected into this job's writes. */
  fault?: FaultPlan;
  rerun?: boolean;
  decision?: { approved: boolean; reason?: string };
  /** The seed's durable-time variant, whatever the seed (the fuzzer's --time). */
  timed?: boolean;
  /** Hold the job's first save until `go <id>` arrives (after `ARMED <id>`). */
  barrier?: boolean;
}

/** The store, with its first `save` held until `go` resolves. */
function heldUntil(
  store: CheckpointStore,
  go: () => Promise<void>,
): CheckpointStore {
  let armed = true;
  return new InterceptingStore(store, {
    before: (write) => {
      if (write.kind !== 'save' || !armed) return;
      armed = false;
      return go();
    },
  });
}

/** Runs one fuzz job on `base` (a fresh runner, kill switch and tools; the connection is shared). */
async function fuzzJob(
  base: CheckpointStore,
  job: FuzzJob,
  go: () => Promise<void>,
): Promise<FuzzOutcome> {
  const kill = new KillSwitch(job.plan);
  const spec = generate(job.seed, job.timed);
  const flow = fuzzFlow(spec);
  const report: FaultReport = { injected: 0, records: [] };
  // Outside the kill switch: a write that fails before the store is not a write it counts.
  const killed = faulty(killing(base, kill), job.fault, report);
  const store = job.barrier ? heldUntil(killed, go) : killed;
  const faults = job.fault && { faults: report };
  const registry = fuzzRegistry(spec, {
    effect: (e) => appendLedger(e.tool, e.phase, e.key, e.args, job.ledger),
    after: (where) => {
      if (kill.atTool(where)) process.kill(process.pid, 'SIGKILL');
    },
  });
  const runner = new FlowRunner(new Executor(registry), {
    checkpoints: store,
    checkpointKey: KEY,
  });
  const timer =
    job.plan?.kind === 'timer'
      ? setTimeout(() => process.kill(process.pid, 'SIGKILL'), job.plan.ms)
      : undefined;
  let out: RunResult<FuzzState> | Error;
  try {
    out =
      job.mode === 'fuzz-run'
        ? await runner.run(flow, { n: 0, log: [] }, { runId: job.runId })
        : job.mode === 'fuzz-recover'
          ? await runner.recover(flow, job.runId, {
              rerunInDoubt: Boolean(job.rerun),
            })
          : await runner.resume(
              flow,
              job.runId,
              {
                approved: Boolean(job.decision?.approved),
                by: 'operator',
                ...(job.decision?.reason !== undefined && {
                  reason: job.decision.reason,
                }),
              },
              { rerunInDoubt: Boolean(job.rerun) },
            );
  } catch (error) {
    if (!(error instanceof DurableError)) throw error;
    out = error;
  } finally {
    clearTimeout(timer);
    runner.close();
  }
  return out instanceof Error
    ? {
        error: out.name,
        message: out.message,
        ...(out instanceof RecoveryNeedsDecision && { calls: out.calls }),
        ...faults,
      }
    : {
        status: out.status,
        step: out.step,
        ...(out.error && {
          error: { name: out.error.name, message: out.error.message },
        }),
        ...(out.pending && { pending: out.pending.tool }),
        ...faults,
      };
}

/**
 * fuzz-serve: connects once, prints `IDLE 0`, then runs the jobs that arrive on stdin one at a
 * time, printing `RESULT <id> <json>` and `IDLE <jobs done>` after each — until a job's kill plan
 * SIGKILLs it. A worker serves many runs, as a real one does: nothing of a job outlives it but
 * the connection.
 */
async function fuzzServe(kind: BackendKind): Promise<number> {
  const opened = await openStore(kind);
  await opened.store.head('warm-up');
  const jobs: FuzzJob[] = [];
  const gos = new Map<string, () => void>();
  const released = new Set<string>();
  let wake: (() => void) | undefined;
  let closed = false;
  const lines = createInterface({ input: process.stdin });
  lines.on('line', (line) => {
    if (line.startsWith('go ')) {
      const id = line.slice(3);
      released.add(id);
      gos.get(id)?.();
    } else if (line.startsWith('{')) {
      jobs.push(JSON.parse(line) as FuzzJob);
      wake?.();
    }
  });
  lines.on('close', () => {
    closed = true;
    wake?.();
  });
  let done = 0;
  process.stdout.write(`IDLE ${done}\n`);
  for (;;) {
    const job = jobs.shift();
    if (!job) {
      if (closed) break;
      await new Promise<void>((r) => (wake = r));
      continue;
    }
    const go = () =>
      new Promise<void>((resolve) => {
        process.stdout.write(`ARMED ${job.id}\n`);
        if (released.has(job.id)) resolve();
        else gos.set(job.id, resolve);
      });
    const outcome = await fuzzJob(opened.store, job, go);
    gos.delete(job.id);
    process.stdout.write(`RESULT ${job.id} ${JSON.stringify(outcome)}\n`);
    process.stdout.write(`IDLE ${++done}\n`);
  }
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
