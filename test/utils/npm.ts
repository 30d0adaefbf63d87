/**
 * Commands in throwaway consumer projects (npm, tsc, node), run as a user would run them: in an
 * environment without what an enclosing `npm test` exports, which would steer the inner npm.
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chmod, copyFile, cp, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const exec = promisify(execFile);

const ROOT = join(__dirname, '..', '..');
const LIB = join(ROOT, 'libs', 'agent-adapter');

/** The environment without what an enclosing `npm test` exports (it would steer the inner npm). */
export function cleanEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(process.env)) {
    if (!/^npm_/i.test(name) && name !== 'NODE_OPTIONS') env[name] = value;
  }
  return {
    ...env,
    npm_config_update_notifier: 'false',
    npm_config_fund: 'false',
  };
}

export interface ShOptions {
  /** @default 150_000 */
  timeout?: number;
  /** Added to cleanEnv(). */
  env?: NodeJS.ProcessEnv;
}

/** Runs a command that must succeed; resolves to its stdout, or rejects with both outputs. */
export async function sh(
  cmd: string,
  args: string[],
  cwd: string,
  { timeout = 150_000, env }: ShOptions = {},
): Promise<string> {
  try {
    const { stdout } = await exec(cmd, args, {
      cwd,
      env: { ...cleanEnv(), ...env },
      maxBuffer: 64 * 1024 * 1024,
      timeout,
    });
    return stdout;
  } catch (error) {
    const e = error as Error & { stdout?: string; stderr?: string };
    throw new Error(
      `${cmd} ${args.join(' ')} (in ${cwd}) failed: ${e.message}\n--- stdout\n${e.stdout ?? ''}\n--- stderr\n${e.stderr ?? ''}`,
    );
  }
}

/** Runs a command that must fail; resolves to its exit code and stderr. */
export async function shFail(
  cmd: string,
  args: string[],
  cwd: string,
): Promise<string> {
  try {
    await exec(cmd, args, { cwd, env: cleanEnv(), timeout: 150_000 });
  } catch (error) {
    const e = error as Error & { code?: number; stderr?: string };
    return JSON.stringify({ code: e.code, stderr: e.stderr ?? '' });
  }
  throw new Error(
    `${cmd} ${args.join(' ')} (in ${cwd}) succeeded; it should fail`,
  );
}

/** How a command ended. */
export interface Outcome {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * Runs a command that may fail; resolves to its exit code and outputs. Rejects only when it
 * could not run to an exit code (not found, timed out, killed).
 */
export async function shOutcome(
  cmd: string,
  args: string[],
  cwd: string,
  { timeout = 150_000, env }: ShOptions = {},
): Promise<Outcome> {
  try {
    const { stdout, stderr } = await exec(cmd, args, {
      cwd,
      env: { ...cleanEnv(), ...env },
      maxBuffer: 64 * 1024 * 1024,
      timeout,
    });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const e = error as Error & {
      code?: number | string;
      stdout?: string;
      stderr?: string;
    };
    if (typeof e.code !== 'number') {
      throw new Error(
        `${cmd} ${args.join(' ')} (in ${cwd}) did not exit: ${e.message}\n--- stdout\n${e.stdout ?? ''}\n--- stderr\n${e.stderr ?? ''}`,
      );
    }
    return { code: e.code, stdout: e.stdout ?? '', stderr: e.stderr ?? '' };
  }
}

/** What `npm pack --json` says about the tarball. */
export interface Packed {
  filename: string;
  files: Array<{ path: string }>;
}

/**
 * Builds the library into a staging copy of its package folder and packs that: the same
 * compiler run as `npm run build:lib` (tsconfig.lib.json, then the CLI made executable), with
 * another outDir, so that it never removes libs/agent-adapter/dist under a suite packing it
 * at the same time (test/package). Resolves to the tarball's path, in `destination`.
 */
export async function packLibrary(
  destination: string,
): Promise<{ tarball: string; packed: Packed }> {
  // The package folder at the same depth as in the repository, with the root's LICENSE and
  // CHANGELOG.md above it, where its prepack script (scripts/pack-files.js) copies them from.
  const root = await mkdtemp(join(tmpdir(), 'aa-stage-'));
  const stage = join(root, 'libs', 'agent-adapter');
  try {
    await sh(
      process.execPath,
      [
        join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'),
        '-p',
        join(LIB, 'tsconfig.lib.json'),
        '--outDir',
        join(stage, 'dist'),
      ],
      ROOT,
    );
    await chmod(join(stage, 'dist', 'cli', 'main.js'), 0o755);
    for (const file of ['LICENSE', 'CHANGELOG.md'])
      await copyFile(join(ROOT, file), join(root, file));
    for (const entry of ['package.json', 'README.md', 'bin', 'scripts']) {
      if (existsSync(join(LIB, entry)))
        await cp(join(LIB, entry), join(stage, entry), { recursive: true });
    }
    const json = await sh(
      'npm',
      ['pack', '--json', '--pack-destination', destination],
      stage,
    );
    const [packed] = JSON.parse(json) as [Packed];
    return { tarball: join(destination, packed.filename), packed };
  } finally {
    await rm(root, { recursive: true, force: true });
  }
}
