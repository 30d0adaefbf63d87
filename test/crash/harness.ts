/**
 * Starting, watching and killing crash-test workers (worker.ts), and reading their ledger.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ChildHarness } from '../utils/child-process';
import { suiteId } from '../utils/services';
import { spawnTs } from '../utils/ts-child';
import {
  dropStore,
  storeLocation,
  type StoreEnv,
  type BackendKind,
} from './stores';
import type { LedgerLine, WorkerReport } from './worker';

const ROOT = join(__dirname, '..', '..');
const WORKER = join(__dirname, 'worker.ts');

/**
 * The worker's sources transpiled once, here, and piped into every worker, so a worker starts
 * without loading the compiler (see test/utils/ts-child.ts). A file missing from it, or changed
 * since, is transpiled by the worker itself: the snapshot only saves time.
 */
const WORKER_FILES = [
  WORKER,
  join(__dirname, 'stores.ts'),
  join(__dirname, 'time-flows.ts'),
  join(ROOT, 'tools', 'crash', 'fuzz-flow.ts'),
  join(ROOT, 'test', 'utils', 'services.ts'),
];

/** One worker process. */
export class Worker extends ChildHarness {
  readonly startedAt = performance.now();

  constructor(args: string[], env: Record<string, string>) {
    super(
      spawnTs(WORKER, args, {
        env: { ...process.env, NODE_OPTIONS: '', ...env },
        files: WORKER_FILES,
        stdio: ['pipe', 'pipe', 'pipe'],
      }),
      { name: `worker (${args.join(' ')})`, lineTimeoutMs: 20_000 },
    );
    if (this.child.pid === undefined)
      throw new Error(`could not start a worker (${args.join(' ')})`);
  }

  /** Releases a worker started with --barrier. */
  go(): void {
    this.child.stdin!.write('go\n');
  }

  /** Waits for a normal exit and returns the worker's JSON report (its last stdout line). */
  async report(timeoutMs = 30_000): Promise<WorkerReport> {
    const exit = await this.exit(timeoutMs).catch(async (error: unknown) => {
      await this.kill();
      throw error;
    });
    const last = this.lines.at(-1);
    if (exit.code !== 0 || last === undefined || !last.startsWith('{')) {
      throw new Error(
        this.describe(
          `ended with code ${exit.code} signal ${exit.signal} without a report`,
        ),
      );
    }
    const report = JSON.parse(last) as WorkerReport;
    timings.push({
      bootMs: report.bootMs,
      wallMs: Math.round(performance.now() - this.startedAt),
    });
    return report;
  }
}

/** Boot time (process start → work begins) and spawn → exit time of every worker that reported. */
export const timings: Array<{ bootMs: number; wallMs: number }> = [];

export function readLedger(file: string): LedgerLine[] {
  if (!existsSync(file)) return [];
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as LedgerLine);
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** Waits until the worker has printed `n` lines matching `pattern`; returns them. */
export async function printed(
  w: { lines: readonly string[]; stderr: string },
  pattern: RegExp,
  n: number,
  timeoutMs: number,
): Promise<string[]> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const found = w.lines.filter((l) => pattern.test(l));
    if (found.length >= n) return found;
    if (Date.now() > until)
      throw new Error(
        `${found.length} of ${n} lines ${pattern} in ${timeoutMs} ms: ${w.lines.join(' | ')}; stderr: ${w.stderr}`,
      );
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** The value at quantile `q` (0..1) of a list of numbers (nearest rank). */
export function quantile(values: readonly number[], q: number): number {
  if (!values.length) return NaN;
  const s = [...values].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil(q * s.length) - 1))]!;
}

/** "min / median / max" of a list of numbers. */
export function spread(values: number[]): string {
  if (!values.length) return 'n/a';
  const s = [...values].sort((a, b) => a - b);
  return `${s[0]} / ${s[Math.floor(s.length / 2)]} / ${s[s.length - 1]}`;
}

/** `phase:who` per ledger line of `tool`, with pids named by the map. */
export function trail(
  ledger: LedgerLine[],
  tool: string,
  names: Record<number, string>,
): string[] {
  return ledger
    .filter((l) => l.tool === tool)
    .map((l) => `${l.phase}:${names[l.pid] ?? `pid ${l.pid}`}`);
}

/** The distinct idempotency keys `tool` ran with. */
export function keysOf(ledger: LedgerLine[], tool: string): Set<string> {
  return new Set(ledger.filter((l) => l.tool === tool).map((l) => l.key));
}

/** One test's world: a private store location, ledger file and run id. */
export interface Sandbox {
  dir: string;
  env: StoreEnv;
  runId: string;
  ledgerFile: string;
  ledger(): LedgerLine[];
  /** Starts a worker on this store and ledger (`extra`: more environment). */
  start(args: string[], extra?: Record<string, string>): Worker;
}

/**
 * Sandboxes on one backend, each dropped (store, files) by `cleanup` — call it in afterAll, after
 * killAll.
 */
export function sandboxes(kind: BackendKind, prefix = 'crash') {
  const made: Array<{ env: StoreEnv; dir: string }> = [];
  return {
    fresh(): Sandbox {
      const dir = mkdtempSync(join(tmpdir(), 'aa-crash-'));
      const env = storeLocation(kind, suiteId(prefix), dir);
      made.push({ env, dir });
      const ledger = join(dir, 'ledger.jsonl');
      return {
        dir,
        env,
        runId: `run-${randomBytes(6).toString('hex')}`,
        ledgerFile: ledger,
        ledger: () => readLedger(ledger),
        start: (args, extra = {}) =>
          new Worker([...args, '--store', kind], {
            ...env,
            LEDGER: ledger,
            ...extra,
          }),
      };
    },
    async cleanup(): Promise<void> {
      for (const { env, dir } of made.splice(0)) {
        await dropStore(kind, env);
        rmSync(dir, { recursive: true, force: true });
      }
    },
  };
}
