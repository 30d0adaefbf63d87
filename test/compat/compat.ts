/**
 * The compatibility suite's pieces: the two generations of the stack a user may have, a consumer
 * project per generation (installed once from the packed tarball, then type-checked and run from),
 * the TypeScript settings it is checked under, and the crash scenario its Nest app goes through.
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import Redis from 'ioredis';
import { Client } from 'pg';
import { ChildHarness, type Exit } from '../utils/child-process';
import { cleanEnv, shOutcome, type Outcome } from '../utils/npm';
import { scanKeys, dropPrefix } from '../utils/redis-keys';
import { DATABASE_URL, REDIS_URL } from '../utils/services';
import type { LedgerLine, Order } from './fixtures/app';

export const APP_SOURCE = join(__dirname, 'fixtures', 'app.ts');

export const TYPESCRIPT = 'typescript@5.9.3';
export const NODE_TYPES = '@types/node@20';

export interface Generation {
  name: 'oldest' | 'newest';
  /** What the consumer installs beside the tarball (and TypeScript). */
  packages: string[];
  /** The version each peer must resolve to, for agent-adapter as for the app. */
  versions: Record<string, RegExp>;
  /**
   * typeorm@1.1.1 declares `peerOptional ioredis ^5.0.4` (typeorm/typeorm#12823), so npm refuses
   * typeorm 1 beside ioredis 6 in any project; the documented way out is an override.
   */
  typeormIoredisOverride: boolean;
  /**
   * Nest ships as ES modules only: a CommonJS file cannot import it under TypeScript's `node16`
   * (which models Node 16, before require(esm)), whatever else the file imports.
   */
  esmOnlyNest: boolean;
}

const COMMON = ['pg', 'reflect-metadata', 'rxjs'];

export const GENERATIONS: readonly Generation[] = [
  {
    name: 'oldest',
    packages: [
      '@nestjs/common@11',
      '@nestjs/core@11',
      '@nestjs/platform-express@11',
      '@nestjs/typeorm@11',
      'typeorm@0.3',
      'ioredis@5',
      ...COMMON,
    ],
    versions: {
      '@nestjs/common': /^11\./,
      '@nestjs/core': /^11\./,
      typeorm: /^0\.3\./,
      ioredis: /^5\./,
    },
    typeormIoredisOverride: false,
    esmOnlyNest: false,
  },
  {
    name: 'newest',
    packages: [
      '@nestjs/common@12',
      '@nestjs/core@12',
      '@nestjs/platform-express@12',
      '@nestjs/typeorm@12',
      'typeorm@1',
      'ioredis@6',
      ...COMMON,
    ],
    versions: {
      '@nestjs/common': /^12\./,
      '@nestjs/core': /^12\./,
      typeorm: /^1\./,
      ioredis: /^6\./,
    },
    typeormIoredisOverride: true,
    esmOnlyNest: true,
  },
];

/** The override typeorm's own docs give for ioredis 6 (what the repository's package.json has). */
export const TYPEORM_IOREDIS_OVERRIDE = { typeorm: { ioredis: '$ioredis' } };

/** npm's ERESOLVE report, split into what it says. */
export interface Eresolve {
  eresolve: boolean;
  /** The "Could not resolve dependency:" section: the edge npm could not satisfy. */
  unresolved: string;
  mentionsAgentAdapter: boolean;
}

export function readEresolve(stderr: string): Eresolve {
  const [, after = ''] = stderr.split('Could not resolve dependency:');
  const unresolved = after.split(/\n\s*npm error\s*\n/)[0]!;
  return {
    eresolve: /\bERESOLVE\b/.test(stderr),
    unresolved,
    // Only the edge npm could not satisfy: its "Found:" list may name agent-adapter among the
    // packages that accept the ioredis it found (our range does), which is no conflict of ours.
    mentionsAgentAdapter: /agent-adapter/.test(unresolved),
  };
}

/** typeorm's own optional peer on ioredis 5, and nothing of ours. */
export const TYPEORM_IOREDIS_PEER =
  /peerOptional ioredis@"[^"]*" from typeorm@1\.\S*/;

export function isTypeormIoredisConflict(stderr: string): boolean {
  const e = readEresolve(stderr);
  return (
    e.eresolve &&
    TYPEORM_IOREDIS_PEER.test(e.unresolved) &&
    !e.mentionsAgentAdapter
  );
}

export interface Install {
  /** `npm install <tarball> <packages>`, no flags but --prefer-offline. */
  first: Outcome;
  /** The same command again after adding typeorm's override, when the first met its ERESOLVE. */
  overridden?: Outcome;
}

/**
 * Installs the tarball and the generation's packages into `dir` (a fresh project), as a user
 * would: one `npm install`, no --legacy-peer-deps or --force. On the newest generation's known
 * ERESOLVE (typeorm's peer range), adds typeorm's documented override and installs again.
 * Rejects when the install fails any other way.
 */
export async function install(
  dir: string,
  generation: Generation,
  tarball: string,
): Promise<Install> {
  const pkg: Record<string, unknown> = {
    name: `compat-consumer-${generation.name}`,
    version: '0.0.0',
    private: true,
  };
  await writeFile(join(dir, 'package.json'), JSON.stringify(pkg, null, 2));
  const npmInstall = () =>
    shOutcome(
      'npm',
      [
        'install',
        '--prefer-offline',
        tarball,
        ...generation.packages,
        TYPESCRIPT,
        NODE_TYPES,
      ],
      dir,
      { timeout: 180_000, env: { npm_config_audit: 'false' } },
    );
  const first = await npmInstall();
  if (first.code === 0) return { first };
  if (
    !generation.typeormIoredisOverride ||
    !isTypeormIoredisConflict(first.stderr)
  ) {
    throw new Error(
      `npm install (${generation.name}) failed, exit code ${first.code}:\n${first.stderr}`,
    );
  }
  pkg.overrides = TYPEORM_IOREDIS_OVERRIDE;
  await writeFile(join(dir, 'package.json'), JSON.stringify(pkg, null, 2));
  const overridden = await npmInstall();
  if (overridden.code !== 0) {
    throw new Error(
      `npm install (${generation.name}) with typeorm's override failed, exit code ${overridden.code}:\n${overridden.stderr}`,
    );
  }
  return { first, overridden };
}

/** One TypeScript setting the consumer's app is checked under. */
export interface TscVariant {
  label: string;
  /** '.' (the CommonJS project) or 'esm' (a `"type": "module"` folder inside it). */
  dir: '.' | 'esm';
  module: string;
  moduleResolution?: string;
  skipLibCheck: boolean;
  /** Emits dist/ (the app the crash scenarios run): the others are `noEmit`. */
  build?: boolean;
  /** Models a Node without require(esm): a CommonJS file cannot import ESM-only Nest. */
  noRequireEsm?: boolean;
}

export const BUILD =
  'commonjs, node10 resolution (no moduleResolution), skipLibCheck: the build';

export const TSC_VARIANTS: readonly TscVariant[] = [
  {
    label: BUILD,
    dir: '.',
    module: 'commonjs',
    skipLibCheck: true,
    build: true,
  },
  {
    label: 'commonjs, node10 resolution, without skipLibCheck',
    dir: '.',
    module: 'commonjs',
    skipLibCheck: false,
  },
  {
    label: 'node16 / node16, CommonJS project',
    dir: '.',
    module: 'node16',
    moduleResolution: 'node16',
    skipLibCheck: true,
    noRequireEsm: true,
  },
  {
    label: 'node20 / node16, CommonJS project (require(esm))',
    dir: '.',
    module: 'node20',
    moduleResolution: 'node16',
    skipLibCheck: true,
  },
  {
    label: 'nodenext, CommonJS project',
    dir: '.',
    module: 'nodenext',
    moduleResolution: 'nodenext',
    skipLibCheck: true,
  },
  {
    label: 'esnext + bundler',
    dir: '.',
    module: 'esnext',
    moduleResolution: 'bundler',
    skipLibCheck: true,
  },
  {
    label: 'node16 / node16, ESM project ("type": "module")',
    dir: 'esm',
    module: 'node16',
    moduleResolution: 'node16',
    skipLibCheck: true,
  },
  {
    label: 'nodenext, ESM project ("type": "module")',
    dir: 'esm',
    module: 'nodenext',
    moduleResolution: 'nodenext',
    skipLibCheck: true,
  },
  {
    label: 'nodenext, ESM project ("type": "module"), without skipLibCheck',
    dir: 'esm',
    module: 'nodenext',
    moduleResolution: 'nodenext',
    skipLibCheck: false,
  },
];

const configName = (i: number) => `tsconfig.compat-${i}.json`;

/**
 * The app and one tsconfig per variant, as a Nest app's: strict, decorators with their
 * metadata, isolatedModules, declarations, skipLibCheck unless the variant checks the libraries.
 */
export async function writeSources(dir: string): Promise<void> {
  const source = await readFile(APP_SOURCE, 'utf8');
  await mkdir(join(dir, 'esm'), { recursive: true });
  await writeFile(
    join(dir, 'esm', 'package.json'),
    JSON.stringify({ type: 'module' }),
  );
  await writeFile(join(dir, 'app.ts'), source);
  await writeFile(join(dir, 'esm', 'app.ts'), source);
  await Promise.all(
    TSC_VARIANTS.map((v, i) =>
      writeFile(
        join(dir, v.dir, configName(i)),
        JSON.stringify(
          {
            compilerOptions: {
              target: 'ES2022',
              module: v.module,
              ...(v.moduleResolution && {
                moduleResolution: v.moduleResolution,
              }),
              strict: true,
              experimentalDecorators: true,
              emitDecoratorMetadata: true,
              esModuleInterop: true,
              isolatedModules: true,
              declaration: true,
              forceConsistentCasingInFileNames: true,
              ...(v.skipLibCheck && { skipLibCheck: true }),
              types: ['node'],
              ...(v.build ? { outDir: 'dist' } : { noEmit: true }),
            },
            files: ['app.ts'],
          },
          null,
          2,
        ),
      ),
    ),
  );
}

/** Runs the project's own tsc on a variant's tsconfig. */
export function tsc(dir: string, variant: TscVariant): Promise<Outcome> {
  const i = TSC_VARIANTS.indexOf(variant);
  return shOutcome(
    process.execPath,
    [
      join(dir, 'node_modules', 'typescript', 'bin', 'tsc'),
      '-p',
      join(variant.dir, configName(i)),
      '--pretty',
      'false',
    ],
    dir,
  );
}

/** tsc's diagnostics: `file(line,col): error TSnnnn: message` (first lines only). */
export function diagnostics(
  output: string,
): Array<{ file: string; code: string; message: string }> {
  const found = [];
  for (const line of output.split('\n')) {
    const m = /^(.+?)\(\d+,\d+\): error (TS\d+): (.*)$/.exec(line);
    if (m) found.push({ file: m[1]!, code: m[2]!, message: m[3]! });
  }
  return found;
}

/**
 * Runs jobs at most `n` at a time, in the order they were queued; `urgent` ones go ahead of
 * those waiting (the builds the crash scenarios wait for).
 */
export function limiter(
  n: number,
): <T>(fn: () => Promise<T>, urgent?: boolean) => Promise<T> {
  let active = 0;
  const queue: Array<() => void> = [];
  const next = () => {
    if (active < n) queue.shift()?.();
  };
  return <T>(fn: () => Promise<T>, urgent = false) =>
    new Promise<T>((resolve, reject) => {
      const start = () => {
        active++;
        fn()
          .then(resolve, reject)
          .finally(() => {
            active--;
            next();
          });
      };
      if (urgent) queue.unshift(start);
      else queue.push(start);
      next();
    });
}

/** The compiled app under plain `node`, in the project, with its own environment only. */
export class AppProcess extends ChildHarness {
  constructor(dir: string, env: Record<string, string>) {
    super(
      spawn(process.execPath, [join('dist', 'app.js')], {
        cwd: dir,
        env: { ...cleanEnv(), ...env },
        stdio: ['ignore', 'pipe', 'pipe'],
      }),
      { name: 'app', lineTimeoutMs: 60_000 },
    );
  }
}

export type StoreKind = 'postgres' | 'redis';

/** What the crash scenario saw. */
export interface CrashReport {
  runId: string;
  /** The ledger when the parent killed the first process. */
  atKill: LedgerLine[];
  killed: Exit;
  /** The second process: its bootstrap recovery was over when it printed READY. */
  recovered: { status: string; step: number; state: Order } | null;
  /** The second process's recovery log lines (DurableRecovery), up to READY. */
  recoveryLog: string[];
  /** Postgres only: the run's row read by the app through the agent-adapter/typeorm entity. */
  row?: { run_id: string; status: string } | null;
  /** SIGTERM to the second process (enableShutdownHooks): its exit. */
  shutdown: Exit;
  ledger: LedgerLine[];
  pids: [number, number];
  /** What of the store was left after the cleanup (Postgres: the schema; Redis: keys). */
  leftover: number;
}

async function readLedger(path: string): Promise<LedgerLine[]> {
  if (!existsSync(path)) return [];
  return (await readFile(path, 'utf8'))
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as LedgerLine);
}

async function json<T>(url: string, init?: RequestInit): Promise<T> {
  const res = await fetch(url, init);
  const text = await res.text();
  if (!res.ok)
    throw new Error(`${init?.method ?? 'GET'} ${url}: ${res.status} ${text}`);
  return (text === '' ? null : JSON.parse(text)) as T;
}

/**
 * The crash scenario: the app starts run `runId`; inside `send_parcel` (idempotent), once its
 * line is in the ledger, the parent SIGKILLs the process. A second process of the same worker
 * id recovers the run in its bootstrap; the parent reads it back, then stops the app with
 * SIGTERM. The store's schema or key prefix (`namespace`) is removed at the end, whatever happened;
 * `leftover` says what was left of it after that (nothing).
 */
export async function crashScenario(
  dir: string,
  store: StoreKind,
  namespace: string,
): Promise<CrashReport> {
  const ledgerPath = join(dir, `ledger-${store}.jsonl`);
  const runId = `order-${namespace}`;
  const env: Record<string, string> = {
    STORE: store,
    LEDGER: ledgerPath,
    NO_COLOR: '1', // plain log lines
    WORKER_ID: `compat-${namespace}`,
    ...(store === 'postgres'
      ? { DATABASE_URL, PG_SCHEMA: namespace }
      : { REDIS_URL, REDIS_PREFIX: namespace }),
  };
  const started: AppProcess[] = [];
  const boot = async (extra: Record<string, string> = {}) => {
    const app = new AppProcess(dir, { ...env, ...extra });
    started.push(app);
    const ready = await app.waitForLine(/^READY \d+$/);
    return { app, base: `http://127.0.0.1:${ready.split(' ')[1]}` };
  };
  const drive = async (): Promise<Omit<CrashReport, 'leftover'>> => {
    const first = await boot({ BLOCK_IN: 'send_parcel' });
    await json(`${first.base}/orders/${runId}`, { method: 'POST' });
    await first.app.waitForLine(/^BLOCKED send_parcel$/);
    const atKill = await readLedger(ledgerPath);
    first.app.child.kill('SIGKILL');
    const killed = await first.app.exit();

    const second = await boot();
    const recoveryLog = second.app.lines.filter((l) =>
      l.includes('[DurableRecovery]'),
    );
    const recovered = await json<CrashReport['recovered']>(
      `${second.base}/orders/${runId}`,
    );
    const row =
      store === 'postgres'
        ? await json<CrashReport['row']>(`${second.base}/rows/${runId}`)
        : undefined;
    second.app.child.kill('SIGTERM');
    const shutdown = await second.app.exit();
    return {
      runId,
      atKill,
      killed,
      recoveryLog,
      recovered,
      ...(row !== undefined && { row }),
      shutdown,
      ledger: await readLedger(ledgerPath),
      pids: [first.app.pid, second.app.pid],
    };
  };
  const cleanup = async (): Promise<number> => {
    for (const app of started) app.child.kill('SIGKILL');
    await Promise.all(started.map((a) => a.exited));
    return dropNamespace(store, namespace);
  };
  let report: Omit<CrashReport, 'leftover'>;
  try {
    report = await drive();
  } catch (error) {
    await cleanup().catch(() => undefined); // the scenario's error is the one to see
    throw error;
  }
  return { ...report, leftover: await cleanup() };
}

/** Removes the scenario's schema / keys; resolves to how much is left (0). */
export async function dropNamespace(
  store: StoreKind,
  namespace: string,
): Promise<number> {
  if (store === 'postgres') {
    const client = new Client({ connectionString: DATABASE_URL });
    await client.connect();
    try {
      await client.query(`DROP SCHEMA IF EXISTS "${namespace}" CASCADE`);
      const { rowCount } = await client.query(
        'SELECT 1 FROM information_schema.schemata WHERE schema_name = $1',
        [namespace],
      );
      return rowCount ?? 0;
    } finally {
      await client.end();
    }
  }
  const client = new Redis(REDIS_URL, {
    lazyConnect: true,
    maxRetriesPerRequest: 1,
  });
  await client.connect();
  try {
    await dropPrefix(client, namespace);
    return (await scanKeys(client, `*${namespace}*`)).length;
  } finally {
    client.disconnect();
  }
}
