/**
 * Runs a `.ts` entry in a child Node process through ts-register, with the library's sources
 * transpiled once in this process and piped to the child (see ts-transpile.js `snapshot`): a child
 * then starts without loading the TypeScript compiler, in a fraction of the time. A file missing
 * from the snapshot, or changed since, is transpiled by the child itself.
 */
import { spawn } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';

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

/** The env var a child reads its snapshot's fd number from. */
export const SNAPSHOT_FD_ENV = transpiler.CACHE_FD_ENV;

/**
 * Every `.ts` file of the library but specs and the Nest layer, plus `extra`, transpiled once per
 * process (per `extra`): what a child gets on its snapshot fd.
 */
export function snapshotFor(extra: readonly string[]): string {
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

/** Runs `entry` with `args` to its end; `timeoutMs` kills it (code -1). */
export function runTs(
  entry: string,
  args: readonly string[],
  env: NodeJS.ProcessEnv,
  options: { extra?: readonly string[]; timeoutMs?: number } = {},
): Promise<ChildResult> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['-r', HOOK, entry, ...args], {
      cwd: ROOT,
      env: { ...env, [transpiler.CACHE_FD_ENV]: '3' },
      stdio: ['ignore', 'pipe', 'pipe', 'pipe'],
    });
    const cache = child.stdio[3] as NodeJS.WritableStream;
    cache.on('error', () => undefined); // a child that ends before reading it
    cache.end(snapshotFor(options.extra ?? []));
    let stdout = '';
    let stderr = '';
    child.stdout!.setEncoding('utf8').on('data', (c: string) => (stdout += c));
    child.stderr!.setEncoding('utf8').on('data', (c: string) => (stderr += c));
    const timer = setTimeout(
      () => child.kill('SIGKILL'),
      options.timeoutMs ?? 120_000,
    );
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code: code ?? -1, stdout, stderr });
    });
  });
}
