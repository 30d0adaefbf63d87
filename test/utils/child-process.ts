/**
 * One child process watched by a test or a bench: its output kept and split into lines, a wait
 * for a line with a timeout (whose error shows everything the child printed so far), SIGKILL, and
 * its exit. Every child started through it and not yet exited is in one set, killed by
 * `killAll` / `killAllNow` when a suite ends (or its parent is interrupted).
 *
 * Used by the crash workers (test/crash/harness.ts, tools/crash), the compatibility suite's app
 * (test/compat), `runTs` (test/utils/ts-child.ts) and the throughput bench's workers.
 */
import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';

/** How long after its exit a child's pipes are read on for what it printed last. */
const DRAIN_MS = 2_000;

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface HarnessOptions {
  /** How errors name the child, e.g. `app`; the default is `process <pid>`. */
  name?: string;
  /** `waitForLine`'s timeout when none is given. */
  lineTimeoutMs?: number;
}

/** Children started through a harness and not yet exited. */
const live = new Set<ChildHarness>();

/** SIGKILLs every child still running and waits until they are gone. */
export async function killAll(): Promise<void> {
  await Promise.all([...live].map((c) => c.kill()));
}

/** SIGKILLs every child still running, without waiting (process exit, Ctrl-C). */
export function killAllNow(): void {
  for (const c of live) c.child.kill('SIGKILL');
}

export class ChildHarness {
  readonly exited: Promise<Exit>;
  private out = '';
  private err = '';
  /** Complete stdout lines, empty ones left out; the unterminated rest is in `partial`. */
  private readonly complete: string[] = [];
  private partial = '';
  private readonly watchers = new Set<() => void>();
  private readonly lineTimeoutMs: number;
  private readonly label: string | undefined;
  private ended: Exit | undefined;

  constructor(
    readonly child: ChildProcess,
    options: HarnessOptions = {},
  ) {
    this.label = options.name;
    this.lineTimeoutMs = options.lineTimeoutMs ?? 20_000;
    if (child.pid !== undefined) live.add(this);
    child.stdin?.on('error', () => undefined); // a child killed before it read its input
    child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
      this.out += chunk;
      const parts = (this.partial + chunk).split('\n');
      this.partial = parts.pop()!;
      for (const line of parts) if (line) this.complete.push(line);
      this.wake();
    });
    child.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
      this.err += chunk;
    });
    this.exited = new Promise<Exit>((resolve) => {
      child.on('exit', (code, signal) => {
        // 'exit' can come before the last of its output is read (Node says its stdio may still be
        // open): a child that printed a line and exited at once would look as if it never printed
        // it. So it counts as exited at 'close', once its pipes end (bounded: a grandchild may hold
        // them; the timer keeps no process alive).
        const closed = once(child, 'close');
        const bound = sleep(DRAIN_MS, undefined, { ref: false });
        void Promise.race([closed, bound]).then(() => {
          this.ended = { code, signal };
          live.delete(this);
          resolve(this.ended);
          this.wake();
        });
      });
    });
  }

  get pid(): number {
    return this.child.pid!;
  }

  /** Whether it has not exited yet (or exited, and what it printed is still being read). */
  get running(): boolean {
    return this.ended === undefined;
  }

  /** Its stdout lines so far, empty ones left out (an unterminated last one only once it exited). */
  get lines(): string[] {
    return this.partial && !this.running
      ? [...this.complete, this.partial]
      : [...this.complete];
  }

  get stdout(): string {
    return this.out;
  }

  get stderr(): string {
    return this.err;
  }

  /** `what` happened, with the child's name and all it printed so far. */
  describe(what: string): string {
    const out =
      this.out && !this.out.endsWith('\n') ? `${this.out}\n` : this.out;
    const exit = this.ended
      ? `, exited (${this.ended.signal ?? `code ${this.ended.code}`})`
      : '';
    return `${this.label ?? 'process'} (pid ${this.child.pid}${exit}) ${what}\n--- stdout\n${out}--- stderr\n${this.err}`;
  }

  /**
   * The first stdout line matching `pattern` (already printed, or a later one); rejects if the
   * child exits first or prints none within `timeoutMs`.
   */
  waitForLine(
    pattern: RegExp,
    timeoutMs = this.lineTimeoutMs,
  ): Promise<string> {
    return new Promise<string>((resolve, reject) => {
      let seen = 0;
      const timer = setTimeout(() => {
        done();
        reject(
          new Error(
            this.describe(`printed no line ${pattern} in ${timeoutMs} ms`),
          ),
        );
      }, timeoutMs);
      const check = () => {
        for (; seen < this.complete.length; seen++) {
          const line = this.complete[seen]!;
          if (pattern.test(line)) {
            done();
            return resolve(line);
          }
        }
        if (this.running) return;
        done();
        if (this.partial && pattern.test(this.partial)) resolve(this.partial);
        else
          reject(new Error(this.describe(`exited before printing ${pattern}`)));
      };
      const done = () => {
        clearTimeout(timer);
        this.watchers.delete(check);
      };
      this.watchers.add(check);
      check();
    });
  }

  /** Its exit, or a rejection after `timeoutMs` (the child is left running). */
  exit(timeoutMs = 30_000): Promise<Exit> {
    let timer: NodeJS.Timeout | undefined;
    return Promise.race([
      this.exited,
      new Promise<never>((_, reject) => {
        timer = setTimeout(
          () =>
            reject(new Error(this.describe(`did not exit in ${timeoutMs} ms`))),
          timeoutMs,
        );
      }),
    ]).finally(() => clearTimeout(timer));
  }

  /** SIGKILL, and wait until the process is gone. */
  kill(): Promise<Exit> {
    this.child.kill('SIGKILL');
    return this.exited;
  }

  private wake(): void {
    for (const w of [...this.watchers]) w();
  }
}
