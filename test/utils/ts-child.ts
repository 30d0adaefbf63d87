/**
 * Runs a `.ts` entry in a child Node process through ts-register, with the library's sources
 * transpiled once in this process and piped to the child (see ts-transpile.js `snapshot`): a child
 * then starts without loading the TypeScript compiler, in a fraction of the time. A file missing
 * from the snapshot, or changed since, is transpiled by the child itself.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { ChildHarness } from './child-process';

const ROOT = join(__dirname, '..', '..');
const HOOK = join(ROOT, 'test', 'utils', 'ts-register.js');
const LIBRARY = join(ROOT, 'libs', 'agent-adapter', 'src');

// eslint-disable-next-line @typescript-eslint/no-require-imports
const transpiler = require('./ts-transpile.js') as {
  CACHE_FD_ENV: string;
  snapshot(files: string[]): string;
};

export interface ChildResult {
  code: number;
  stdout: string;
  stderr: string;
}

const snapshots = new Map<string, string>();

/**
 * Every `.ts` file of the library but specs and the Nest layer, plus `extra`, transpiled once per
 * process (per `extra`): what a child gets on its snapshot fd.
 */
function snapshotFor(extra: readonly string[]): string {
  const key = extra.join('\n');
  let text = snapshots.get(key);
  if (text === undefined) {
    const files = walk(LIBRARY).filter(
      (f) => !f.endsWith('.spec.ts') && !f.startsWith(join(LIBRARY, 'nest')),
    );
    text = transpiler.snapshot([...files, ...extra]);
    snapshots.set(key, text);
  }
  return text;
}

function walk(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory()
      ? walk(join(dir, e.name))
      : e.name.endsWith('.ts')
        ? [join(dir, e.name)]
        : [],
  );
}

export interface SpawnTsOptions {
  /** The child's whole environment (the snapshot's fd variable is added). */
  env: NodeJS.ProcessEnv;
  /** Files of this project to transpile into the snapshot beside the library's. */
  files?: readonly string[];
  /** Node options before `-r ts-register` (e.g. `--cpu-prof`). */
  nodeArgs?: readonly string[];
  /** stdin, stdout, stderr; fd 3 is the snapshot's. */
  stdio?: ['pipe' | 'ignore', 'pipe' | 'ignore' | 'inherit', 'pipe' | 'ignore'];
  /** An IPC channel (fd 4), for `send` and `message`. */
  ipc?: boolean;
}

/**
 * Starts `entry` with `args` under ts-register in the project's root, its sources' snapshot
 * written to fd 3 (a child that ends before reading it is no error).
 */
export function spawnTs(
  entry: string,
  args: readonly string[],
  options: SpawnTsOptions,
): ChildProcess {
  const child = spawn(
    process.execPath,
    [...(options.nodeArgs ?? []), '-r', HOOK, entry, ...args],
    {
      cwd: ROOT,
      env: { ...options.env, [transpiler.CACHE_FD_ENV]: '3' },
      stdio: [
        ...(options.stdio ?? ['ignore', 'pipe', 'pipe']),
        'pipe',
        ...(options.ipc ? ['ipc' as const] : []),
      ],
    },
  );
  const cache = child.stdio[3] as NodeJS.WritableStream;
  cache.on('error', () => undefined); // a child that ends before reading it
  cache.end(snapshotFor(options.files ?? []));
  return child;
}

/** Runs `entry` with `args` to its end; `timeoutMs` kills it (code -1). */
export function runTs(
  entry: string,
  args: readonly string[],
  env: NodeJS.ProcessEnv,
  options: { extra?: readonly string[]; timeoutMs?: number } = {},
): Promise<ChildResult> {
  const proc = new ChildHarness(
    spawnTs(entry, args, { env, files: options.extra ?? [] }),
  );
  const timer = setTimeout(
    () => void proc.kill(),
    options.timeoutMs ?? 120_000,
  );
  // 'close', not 'exit': the output is all read by then.
  return new Promise((resolve) => {
    proc.child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code: code ?? -1, stdout: proc.stdout, stderr: proc.stderr });
    });
  });
}
