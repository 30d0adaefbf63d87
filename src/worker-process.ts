import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/**
 * The example app (`src/main.ts`) as a separate worker process: what `npm run demo` and the crash
 * tests start, kill and start again. Node is given `nodeArgs` (by default this process's own, so
 * a demo started with a TypeScript loader starts its workers with it too).
 */
export class WorkerProcess {
  /** Every line the worker printed (stdout and stderr), without colours. */
  readonly lines: string[] = [];
  readonly exited: Promise<Exit>;
  private readonly waiters = new Set<() => void>();
  private partial = '';
  private hasExited = false;

  private constructor(
    readonly name: string,
    private readonly child: ChildProcess,
    private readonly echo?: (line: string) => void,
  ) {
    for (const stream of [child.stdout, child.stderr])
      stream?.on('data', (chunk: Buffer) => this.take(chunk.toString('utf8')));
    this.exited = new Promise((resolve) =>
      child.once('exit', (code, signal) => {
        this.take('\n');
        this.hasExited = true;
        resolve({ code, signal });
        this.wake();
      }),
    );
  }

  static start(
    name: string,
    env: Record<string, string>,
    options: { nodeArgs?: string[]; echo?: (line: string) => void } = {},
  ): WorkerProcess {
    const root = join(__dirname, '..');
    const child = spawn(
      process.execPath,
      [...(options.nodeArgs ?? process.execArgv), join(root, 'src', 'main.ts')],
      {
        cwd: root,
        env: { ...process.env, NO_COLOR: '1', PORT: '0', ...env },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    return new WorkerProcess(name, child, options.echo);
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  /** The app's base URL, once it listens. Rejects if the worker exits first. */
  async url(timeoutMs = 30_000): Promise<string> {
    const line = await this.waitFor(/listening on (http:\/\/\S+)/, timeoutMs);
    return /listening on (http:\/\/\S+)/.exec(line)![1]!;
  }

  /**
   * The first line matching `pattern` (already printed, or the next one); with `count`, the
   * count-th such line.
   */
  waitFor(pattern: RegExp, timeoutMs = 30_000, count = 1): Promise<string> {
    return new Promise((resolve, reject) => {
      const check = () => {
        const found = this.lines.filter((l) => pattern.test(l))[count - 1];
        if (found !== undefined) return done(() => resolve(found));
        if (this.hasExited)
          return done(() =>
            reject(
              new Error(
                `${this.name} exited before printing ${pattern}:\n${this.lines.join('\n')}`,
              ),
            ),
          );
      };
      const timer = setTimeout(
        () =>
          done(() =>
            reject(
              new Error(
                `${this.name} did not print ${pattern} within ${timeoutMs} ms:\n${this.lines.join('\n')}`,
              ),
            ),
          ),
        timeoutMs,
      );
      const done = (settle: () => void) => {
        clearTimeout(timer);
        this.waiters.delete(check);
        settle();
      };
      this.waiters.add(check);
      check();
    });
  }

  /** Asks the worker to shut down (SIGTERM: leases released, store closed) and waits. */
  async stop(): Promise<Exit> {
    if (this.child.exitCode === null && this.child.signalCode === null)
      this.child.kill('SIGTERM');
    return this.exited;
  }

  /** Kills it at once, as a crash would. */
  async kill(): Promise<Exit> {
    if (this.child.exitCode === null && this.child.signalCode === null)
      this.child.kill('SIGKILL');
    return this.exited;
  }

  private take(text: string): void {
    const parts = (this.partial + text).split('\n');
    this.partial = parts.pop() ?? '';
    for (const raw of parts) {
      // eslint-disable-next-line no-control-regex
      const line = raw.replace(/\x1b\[[0-9;]*m/g, '').trimEnd();
      if (!line) continue;
      this.lines.push(line);
      this.echo?.(line);
    }
    this.wake();
  }

  private wake(): void {
    for (const waiter of [...this.waiters]) waiter();
  }
}
