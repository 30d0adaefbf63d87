/**
 * Starting, watching and killing crash-test workers (worker.ts), and reading their ledger.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suiteId } from '../utils/services';
import { SNAPSHOT_FD_ENV, snapshotFor } from '../utils/ts-child';
import {
  dropStore,
  storeLocation,
  type StoreEnv,
  type StoreKind,
} from './stores';
import type { LedgerLine, WorkerReport } from './worker';

const ROOT = join(__dirname, '..', '..');
const HOOK = join(ROOT, 'test', 'utils', 'ts-register.js');
const WORKER = join(__dirname, 'worker.ts');

/**
 * The worker's sources transpiled once, here, and piped into every worker, so a worker starts
 * without loading the compiler (see test/utils/ts-child.ts). A file missing from it, or changed
 * since, is transpiled by the worker itself: the snapshot only saves time.
 */
const WORKER_FILES = [
  WORKER,
  join(__dirname, 'stores.ts'),
  join(ROOT, 'tools', 'crash', 'fuzz-flow.ts'),
  join(ROOT, 'test', 'utils', 'services.ts'),
];
const transpiled = () => snapshotFor(WORKER_FILES);

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** One worker process. */
export class Worker {
  readonly child: ChildProcess;
  readonly pid: number;
  readonly startedAt = performance.now();
  readonly exited: Promise<Exit>;
  private out = '';
  private err = '';
  private watchers: Array<() => void> = [];

  constructor(args: string[], env: Record<string, string>) {
    this.child = spawn(process.execPath, ['-r', HOOK, WORKER, ...args], {
      cwd: ROOT,
      env: {
        ...process.env,
        NODE_OPTIONS: '',
        [SNAPSHOT_FD_ENV]: '3',
        ...env,
      },
      stdio: ['pipe', 'pipe', 'pipe', 'pipe'],
    });
    if (this.child.pid === undefined)
      throw new Error(`could not start a worker (${args.join(' ')})`);
    this.pid = this.child.pid;
    live.add(this);
    const cache = this.child.stdio[3] as NodeJS.WritableStream;
    cache.on('error', () => undefined); // a worker killed before it read the snapshot
    cache.end(transpiled());
    this.child.stdin!.on('error', () => undefined);
    this.child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
      this.out += chunk;
      for (const w of this.watchers) w();
    });
    this.child.stderr!.setEncoding('utf8').on('data', (chunk: string) => {
      this.err += chunk;
    });
    this.exited = new Promise<Exit>((resolve) => {
      this.child.on('exit', (code, signal) => {
        live.delete(this);
        resolve({ code, signal });
        for (const w of this.watchers) w();
      });
    });
  }

  get lines(): string[] {
    return this.out.split('\n').filter(Boolean);
  }

  get stderr(): string {
    return this.err;
  }

  /** Resolves with the first stdout line matching `pattern`; rejects if the worker exits first. */
  waitForLine(pattern: RegExp, timeoutMs = 20_000): Promise<string> {
    return new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => {
        done();
        reject(
          new Error(this.describe(`no line ${pattern} in ${timeoutMs} ms`)),
        );
      }, timeoutMs);
      const check = () => {
        const line = this.lines.find((l) => pattern.test(l));
        if (line !== undefined) {
          done();
          resolve(line);
        } else if (this.child.exitCode !== null || this.child.signalCode) {
          done();
          reject(new Error(this.describe(`exited before printing ${pattern}`)));
        }
      };
      const done = () => {
        clearTimeout(timer);
        this.watchers = this.watchers.filter((w) => w !== check);
      };
      this.watchers.push(check);
      check();
    });
  }

  /** Releases a worker started with --barrier. */
  go(): void {
    this.child.stdin!.write('go\n');
  }

  /** SIGKILL, and wait until the process is gone. */
  async kill(): Promise<Exit> {
    this.child.kill('SIGKILL');
    return this.exited;
  }

  /** Waits for a normal exit and returns the worker's JSON report (its last stdout line). */
  async report(timeoutMs = 30_000): Promise<WorkerReport> {
    let timer: NodeJS.Timeout | undefined;
    const exit = await Promise.race([
      this.exited,
      new Promise<'timeout'>(
        (r) => (timer = setTimeout(() => r('timeout'), timeoutMs)),
      ),
    ]);
    clearTimeout(timer);
    if (exit === 'timeout') {
      await this.kill();
      throw new Error(this.describe(`still running after ${timeoutMs} ms`));
    }
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

  private describe(what: string): string {
    return `worker ${this.pid} (${this.child.spawnargs.slice(3).join(' ')}) ${what}\n--- stdout\n${this.out}--- stderr\n${this.err}`;
  }
}

/** Workers not yet exited (for killing in afterAll). */
const live = new Set<Worker>();

/** Boot time (process start → work begins) and spawn → exit time of every worker that reported. */
export const timings: Array<{ bootMs: number; wallMs: number }> = [];

export async function killAll(): Promise<void> {
  await Promise.all([...live].map((w) => w.kill()));
}

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
export function sandboxes(kind: StoreKind, prefix = 'crash') {
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
