import { existsSync, readFileSync, statSync } from 'node:fs';
import {
  copyFile,
  mkdir,
  mkdtemp,
  readFile,
  rm,
  writeFile,
} from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sh, shFail } from '../utils/npm';

/**
 * The package as a user gets it: build the library, `npm pack` it, install the tarball into an
 * empty project (no Nest, no class-validator: the optional peers stay uninstalled), then run the
 * spec's tickets flow through a simulated worker crash from CommonJS and from ESM, and type-check
 * a consumer against the shipped typings. The tarball holds exactly the package's README, the
 * repository's LICENSE and CHANGELOG, package.json, the bin and dist's .js/.d.ts/.js.map (each map
 * with its sources). Also the bin in this repository itself: `npm ci` links
 * it before anything is built, and after the build it runs the CLI.
 */
jest.setTimeout(180_000);

const ROOT = join(__dirname, '..', '..');
const LIB = join(ROOT, 'libs', 'agent-adapter');
const TYPESCRIPT = 'typescript@5.9.3';
// The typings name Node's own types (AsyncLocalStorage, Buffer), as any Node library's do.
const NODE_TYPES = '@types/node@20';

const CLI_HELP = 'npx agent-adapter runs --help';
const REPO_BIN = 'node_modules/.bin/agent-adapter --help (in the repository)';
const REPO_NPX = 'npx agent-adapter --help (in the repository)';
const BIN = join(LIB, 'bin', 'agent-adapter.js');
const CLI_LIST = 'npx agent-adapter runs list (sqlite, driver missing)';

const NAMES = [
  'Call',
  'Executor',
  'Flow',
  'FlowRunner',
  'MemoryCheckpointStore',
  'RecoveryNeedsDecision',
  'ToolRegistry',
  'idempotencyKey',
].join(', ');

/**
 * The tickets flow on a memory store whose worker "dies" while mailing: from that moment every
 * write of worker 1 fails, as if its process were gone. Worker 2 then shares the same store and
 * checkpoint key. The ledger is what really ran, outside the library.
 */
const SCENARIO = `
const KEY = 'use-a-secret-from-your-vault-32b';
const ledger = [];

class Dying extends MemoryCheckpointStore {
  dead = false;
  async recordCall(...a) {
    if (this.dead) throw new Error('crashed');
    return super.recordCall(...a);
  }
  async save(...a) {
    if (this.dead) throw new Error('crashed');
    return super.save(...a);
  }
}
const store = new Dying();

let mails = 0;
const registry = new ToolRegistry()
  .register('hold_seats', async (a) => {
    ledger.push({ tool: 'hold_seats', args: a });
    return 'held ' + a.seats + ' for ' + a.show;
  }, { idempotent: true })
  .register('charge_card', async (a) => {
    const key = idempotencyKey();
    ledger.push({ tool: 'charge_card', args: a, key });
    return 'charged ' + key;
  })
  .register('email_tickets', async (a) => {
    ledger.push({ tool: 'email_tickets', args: a });
    if (++mails === 1) {
      store.dead = true; // the worker is gone from here on
      throw new Error('worker died while mailing');
    }
    return 'sent';
  });

const flow = new Flow('tickets')
  .node('hold', Call('hold_seats', { args: (o) => ({ show: o.show, seats: o.seats }), into: 'note' }))
  .node('pay', Call('charge_card', { args: (o) => ({ show: o.show, seats: o.seats }), into: 'note' }))
  .node('send', async (o, ctx) => ({ note: await ctx.call('email_tickets', { show: o.show }) }))
  .edge('hold', 'pay')
  .edge('pay', 'send')
  .end('send');

const describe = (e) => ({ name: e && e.name, message: e && e.message });

async function main() {
  const out = { entry: typeof Flow };

  const worker1 = new FlowRunner(new Executor(registry), { checkpoints: store, checkpointKey: KEY });
  try {
    const r = await worker1.run(flow, { show: 'Hamlet', seats: 2 }, { runId: 'order-7' });
    out.worker1 = { resolved: r.status };
  } catch (e) {
    out.worker1 = { rejected: describe(e) };
  }
  worker1.close();
  store.dead = false;

  const worker2 = new FlowRunner(new Executor(registry), { checkpoints: store, checkpointKey: KEY });
  try {
    const r = await worker2.recover(flow, 'order-7');
    out.recover = { resolved: r.status };
  } catch (e) {
    out.recover = {
      rejected: describe(e),
      needsDecision: e instanceof RecoveryNeedsDecision,
      calls: e.calls,
    };
  }

  const all = await worker2.recoverAll(flow, { rerunInDoubt: true, force: true });
  const r = all.get('order-7');
  out.recoverAll = {
    runs: [...all.keys()],
    result: r instanceof Error ? { error: describe(r) } : r,
  };
  worker2.close();

  out.ledger = ledger;
  out.ran = {};
  for (const entry of ledger) out.ran[entry.tool] = (out.ran[entry.tool] || 0) + 1;
  process.stdout.write(JSON.stringify(out));
}

main().catch((e) => {
  console.error(e);
  process.exitCode = 1;
});
`;

const CONFORMANCE =
  'agent-adapter/testing: the conformance suite on the memory store, no test framework';

/**
 * A third-party store author's test file, without jest or vitest: the conformance suite from the
 * packed 'agent-adapter/testing', declared with a ten-line framework of its own and run in order.
 */
const CONFORMANCE_SCRIPT = `'use strict';
const { MemoryCheckpointStore } = require('agent-adapter');
const { describeCheckpointStoreConformance } = require('agent-adapter/testing');
const tests = [];
const hooks = [];
const path = [];
const framework = {
  describe: (name, body) => { path.push(name); body(); path.pop(); },
  it: (name, test) => tests.push({ name: [...path, name].join(' > '), test }),
  afterAll: (hook) => hooks.push(hook),
};
describeCheckpointStoreConformance({ name: 'memory', make: async () => new MemoryCheckpointStore() }, framework);
(async () => {
  const failed = [];
  for (const { name, test } of tests) {
    await test().catch((e) => failed.push(name + ': ' + (e && e.message)));
  }
  for (const hook of hooks) await hook();
  process.stdout.write(JSON.stringify({ passed: tests.length - failed.length, failed }));
})();
`;

/** Compiled against the shipped typings only: values, generics and `import type`. */
const CONSUMER_TS = `
import { Call, Executor, Flow, FlowRunner, MemoryCheckpointStore, RecoveryNeedsDecision, ToolRegistry, idempotencyKey } from 'agent-adapter';
import type { FlowRunnerOptions, NodeContext, RunResult } from 'agent-adapter';
import { AiSdkChatModel, type AiSdkCallOptions, type AiSdkGenerateResult, type AiSdkLanguageModel, type ChatModel } from 'agent-adapter';
import { CrashingStore, describeCheckpointStoreConformance, type CheckpointStoreFixture, type TestFramework } from 'agent-adapter/testing';

export function conformance(framework: TestFramework): CheckpointStoreFixture {
  const fixture: CheckpointStoreFixture = { name: 'memory', make: async () => new CrashingStore(new MemoryCheckpointStore()) };
  describeCheckpointStoreConformance(fixture, framework);
  return fixture;
}

interface Order { show: string; seats: number; note?: string }

const registry = new ToolRegistry()
  .register('hold_seats', async (a: { show: string; seats: number }) => \`held \${a.seats} for \${a.show}\`, { idempotent: true })
  .register('charge_card', async () => \`charged \${idempotencyKey()}\`);

const flow = new Flow<Order>('tickets')
  .node('hold', Call<Order>('hold_seats', { args: (o) => ({ show: o.show, seats: o.seats }), into: 'note' }))
  .node('pay', async (o: Order, ctx: NodeContext) => ({ note: await ctx.call<string>('charge_card', { seats: o.seats }) }))
  .edge('hold', 'pay')
  .end('pay');

const options: FlowRunnerOptions = { checkpoints: new MemoryCheckpointStore(), checkpointKey: 'use-a-secret-from-your-vault-32b' };
const runner = new FlowRunner(new Executor(registry), options);

export async function order(): Promise<string | undefined> {
  const result: RunResult<Order> = await runner.run(flow, { show: 'Hamlet', seats: 2 }, { runId: 'order-7' });
  try {
    await runner.recover(flow, result.runId, { rerunInDoubt: false });
  } catch (e) {
    if (e instanceof RecoveryNeedsDecision) return e.calls.map(([tool, why]) => tool + why).join();
  }
  const all: Map<string, RunResult<Order> | Error> = await runner.recoverAll(flow, { rerunInDoubt: true });
  return all.size ? result.state.note : undefined;
}

// An AI SDK model, typed without any AI SDK package installed (the typings are structural).
const languageModel: AiSdkLanguageModel = {
  specificationVersion: 'v4',
  provider: 'hand.made',
  modelId: 'm',
  async doGenerate(options: AiSdkCallOptions): Promise<AiSdkGenerateResult> {
    return { content: [{ type: 'text', text: String(options.prompt.length) }], finishReason: { unified: 'stop', raw: 'stop' } };
  },
};
export const aiModel: ChatModel = new AiSdkChatModel(languageModel, { settings: { temperature: 0 } });
`;

const TYPEORM = 'typeorm@0.3.31';

/**
 * 'agent-adapter/typeorm' in a project that has typeorm (its optional peer): the entities are the
 * consumer's own typeorm's EntitySchema (the entry bundles none), one per table, per tenant.
 */
const TYPEORM_SCENARIO = `
const { EntitySchema } = IMPORTED_TYPEORM;
const entities = agentAdapterEntities({ type: 'postgres', schema: 'tenant_a', tablePrefix: 'a_' });
const [migration] = agentAdapterMigrations({ schema: 'tenant_a', tablePrefix: 'a_' });
process.stdout.write(JSON.stringify({
  schemas: entities.every((e) => e instanceof EntitySchema),
  tables: entities.map((e) => e.options.schema + '.' + e.options.tableName),
  migration: migration.name,
}));
`;

/** A DataSource with the shipped entities and migrations, type-checked against typeorm's typings. */
const TYPEORM_CONSUMER_TS = `
import { DataSource } from 'typeorm';
import { agentAdapterEntities, agentAdapterMigrations, type AgentAdapterRunRow } from 'agent-adapter/typeorm';

const tables = { schema: 'tenant_a' };
export const dataSource = new DataSource({
  type: 'postgres',
  entities: [...agentAdapterEntities({ type: 'postgres', ...tables })],
  migrations: agentAdapterMigrations(tables),
});
export async function unfinished(): Promise<string[]> {
  const [runs] = agentAdapterEntities({ type: 'postgres', ...tables });
  const rows: AgentAdapterRunRow[] = await dataSource.getRepository(runs).find({ where: { status: 'running' } });
  return rows.map((r) => r.run_id);
}
`;

interface TypeormScenarioOutput {
  schemas: boolean;
  tables: string[];
  migration: string;
}

interface ScenarioOutput {
  entry: string;
  worker1: { resolved?: string; rejected?: { name: string; message: string } };
  recover: {
    resolved?: string;
    rejected?: { name: string; message: string };
    needsDecision?: boolean;
    calls?: Array<[string, string]>;
  };
  recoverAll: {
    runs: string[];
    result: { status?: string; state?: { note?: string }; error?: unknown };
  };
  ledger: Array<{ tool: string; key?: string }>;
  ran: Record<string, number>;
}

const TYPEORM_SCRIPTS = ['entities.cjs', 'entities.mjs'] as const;
const TYPEORM_TSC = 'agent-adapter/typeorm typings against typeorm';

const SCENARIOS = [
  ['CommonJS (require)', 'tickets.cjs'],
  ['ESM (import)', 'tickets.mjs'],
] as const;

const TSC_CHECKS = [
  [
    'node16 resolution (package "exports"), CommonJS and ESM consumers',
    [
      '--module',
      'node16',
      '--moduleResolution',
      'node16',
      'consumer.ts',
      'consumer.mts',
    ],
  ],
  [
    'node10 resolution ("types" field), CommonJS consumer',
    ['--module', 'commonjs', '--moduleResolution', 'node10', 'consumer.ts'],
  ],
] as const;

describe('agent-adapter as a packed npm package', () => {
  let packDir: string;
  let unpacked: string; // the tarball extracted: unpacked/package/...
  let projectDir: string;
  let typeormDir: string;
  let packed: { filename: string; files: Array<{ path: string }> };
  // The scenario scripts and the type checks are independent: they run side by side once the
  // package is installed, and each test awaits its own.
  const jobs = new Map<string, Promise<string>>();
  const start = (name: string, job: Promise<string>) => {
    job.catch(() => undefined); // awaited (and reported) by the test that needs it
    jobs.set(name, job);
  };
  const result = (name: string): Promise<string> =>
    jobs.get(name) ??
    Promise.reject(new Error(`${name} never started: see the beforeAll error`));

  beforeAll(async () => {
    packDir = await mkdtemp(join(tmpdir(), 'agent-adapter-pack-'));
    projectDir = await mkdtemp(join(tmpdir(), 'agent-adapter-consumer-'));

    await sh('npm', ['run', 'build:lib'], ROOT);
    // The repository's own bin link, made by `npm ci` before anything was built, runs the build.
    start(
      REPO_BIN,
      sh(join(ROOT, 'node_modules', '.bin', 'agent-adapter'), ['--help'], ROOT),
    );
    start(
      REPO_NPX,
      sh('npx', ['--no-install', 'agent-adapter', '--help'], ROOT),
    );
    // As the README says, from the repository's root: npm runs the package's prepack there too.
    const json = await sh(
      'npm',
      ['pack', './libs/agent-adapter', '--json', '--pack-destination', packDir],
      ROOT,
    );
    [packed] = JSON.parse(json) as [typeof packed];
    unpacked = await mkdtemp(join(tmpdir(), 'agent-adapter-unpacked-'));
    await sh('tar', ['-xzf', join(packDir, packed.filename)], unpacked);

    // The typeorm entry's consumer: its own project, so the first one proves the root entry's
    // typings compile without typeorm installed.
    typeormDir = await mkdtemp(join(tmpdir(), 'agent-adapter-typeorm-'));
    const typeormProject = (async () => {
      await writeFile(
        join(typeormDir, 'package.json'),
        JSON.stringify({
          name: 'typeorm-consumer',
          version: '0.0.0',
          private: true,
        }),
      );
      await sh(
        'npm',
        [
          'install',
          join(packDir, packed.filename),
          TYPEORM,
          TYPESCRIPT,
          NODE_TYPES,
          '--no-audit',
          '--no-fund',
          '--prefer-offline',
          '--loglevel=error',
        ],
        typeormDir,
      );
      await writeFile(
        join(typeormDir, 'entities.cjs'),
        `'use strict';\nconst { agentAdapterEntities, agentAdapterMigrations } = require('agent-adapter/typeorm');\n` +
          TYPEORM_SCENARIO.replace('IMPORTED_TYPEORM', "require('typeorm')"),
      );
      await writeFile(
        join(typeormDir, 'entities.mjs'),
        `import { agentAdapterEntities, agentAdapterMigrations } from 'agent-adapter/typeorm';\nimport * as typeorm from 'typeorm';\n` +
          TYPEORM_SCENARIO.replace('IMPORTED_TYPEORM', 'typeorm'),
      );
      await writeFile(join(typeormDir, 'consumer.ts'), TYPEORM_CONSUMER_TS);
    })();
    typeormProject.catch(() => undefined); // awaited by the jobs below
    for (const script of TYPEORM_SCRIPTS) {
      start(
        script,
        typeormProject.then(() => sh(process.execPath, [script], typeormDir)),
      );
    }
    start(
      TYPEORM_TSC,
      typeormProject.then(() =>
        sh(
          'npx',
          [
            '--yes',
            '-p',
            TYPESCRIPT,
            'tsc',
            '--noEmit',
            '--strict',
            '--target',
            'ES2022',
            '--module',
            'node16',
            '--moduleResolution',
            'node16',
            '--experimentalDecorators',
            'consumer.ts',
          ],
          typeormDir,
        ),
      ),
    );

    await writeFile(
      join(projectDir, 'package.json'),
      JSON.stringify({ name: 'consumer', version: '0.0.0', private: true }),
    );
    await sh(
      'npm',
      [
        'install',
        join(packDir, packed.filename),
        TYPESCRIPT,
        NODE_TYPES,
        '--no-audit',
        '--no-fund',
        '--prefer-offline',
        '--loglevel=error',
      ],
      projectDir,
    );
    const scenario = (importLine: string) => `${importLine}\n${SCENARIO}`;
    await writeFile(
      join(projectDir, 'tickets.cjs'),
      scenario(`'use strict';\nconst { ${NAMES} } = require('agent-adapter');`),
    );
    await writeFile(
      join(projectDir, 'tickets.mjs'),
      scenario(`import { ${NAMES} } from 'agent-adapter';`),
    );
    await writeFile(join(projectDir, 'consumer.ts'), CONSUMER_TS);
    await writeFile(join(projectDir, 'consumer.mts'), CONSUMER_TS);
    await writeFile(join(projectDir, 'conformance.cjs'), CONFORMANCE_SCRIPT);
    start(CONFORMANCE, sh(process.execPath, ['conformance.cjs'], projectDir));

    for (const [, script] of SCENARIOS) {
      start(script, sh(process.execPath, [script], projectDir));
    }
    start(
      CLI_HELP,
      sh(
        'npx',
        ['--no-install', 'agent-adapter', 'runs', '--help'],
        projectDir,
      ),
    );
    start(
      CLI_LIST,
      (async () => {
        const db = join(projectDir, 'runs.db');
        await writeFile(db, '');
        // The consumer has no typeorm/better-sqlite3 (optional peers): the CLI says what to install.
        return shFail(
          'npx',
          [
            '--no-install',
            'agent-adapter',
            '--store',
            `sqlite:${db}`,
            'runs',
            'list',
          ],
          projectDir,
        );
      })(),
    );
    for (const [label, args] of TSC_CHECKS) {
      start(
        label,
        sh(
          'npx',
          [
            '--yes',
            '-p',
            TYPESCRIPT,
            'tsc',
            '--noEmit',
            '--strict',
            '--target',
            'ES2022',
            ...args,
          ],
          projectDir,
        ),
      );
    }
  });

  afterAll(async () => {
    await Promise.allSettled(jobs.values());
    for (const dir of [packDir, unpacked, projectDir, typeormDir]) {
      if (dir) await rm(dir, { recursive: true, force: true });
    }
  });

  it('ships the README, LICENSE, CHANGELOG, package.json, the bin and dist (.js, .d.ts, .js.map), nothing else', () => {
    const files = packed.files.map((f) => f.path).sort();
    expect(files.filter((f) => !f.startsWith('dist/'))).toEqual([
      'CHANGELOG.md',
      'LICENSE',
      'README.md',
      'bin/agent-adapter.js',
      'package.json',
    ]);
    const dist = files.filter((f) => f.startsWith('dist/'));
    // No specs, no sources, no tsconfig: compiled modules, their typings and their maps only.
    expect(dist.filter((f) => !/\.(js|d\.ts|js\.map)$/.test(f))).toEqual([]);
    expect(dist.filter((f) => /\.spec\./.test(f))).toEqual([]);
    const stems = (ext: string) =>
      dist
        .filter((f) => f.endsWith(ext))
        .map((f) => f.slice(0, -ext.length))
        .sort();
    const modules = stems('.js');
    expect(modules).toEqual(
      expect.arrayContaining([
        'dist/index',
        'dist/nest/index',
        'dist/cli/main',
      ]),
    );
    expect(stems('.d.ts')).toEqual(modules);
    expect(stems('.js.map')).toEqual(modules);
  });

  it("ships the package's own README and the repository's LICENSE and CHANGELOG, copied at pack time", async () => {
    const shipped = (name: string) =>
      readFile(join(unpacked, 'package', name), 'utf8');
    const root = (name: string) => readFile(join(ROOT, name), 'utf8');
    expect(await shipped('README.md')).toBe(
      await readFile(join(LIB, 'README.md'), 'utf8'),
    );
    expect(await shipped('LICENSE')).toBe(await root('LICENSE'));
    expect(await shipped('LICENSE')).toMatch(/^MIT License/);
    expect(await shipped('CHANGELOG.md')).toBe(await root('CHANGELOG.md'));
    // postpack removed the copies: one source of truth, at the root.
    expect(existsSync(join(LIB, 'LICENSE'))).toBe(false);
    expect(existsSync(join(LIB, 'CHANGELOG.md'))).toBe(false);
  });

  it('ships source maps that carry their sources (the .ts files are not shipped)', async () => {
    const maps = packed.files
      .map((f) => f.path)
      .filter((f) => f.endsWith('.js.map'));
    expect(maps.length).toBeGreaterThan(0);
    const without: string[] = [];
    for (const map of maps) {
      const { sources, sourcesContent } = JSON.parse(
        await readFile(join(unpacked, 'package', map), 'utf8'),
      ) as { sources: string[]; sourcesContent?: unknown[] };
      const complete =
        Array.isArray(sourcesContent) &&
        sourcesContent.length === sources.length &&
        sourcesContent.every((c) => typeof c === 'string' && c.length > 0);
      if (!complete) without.push(map);
    }
    expect(without).toEqual([]);
  });

  it('installs without any optional peer (no Nest, no class-validator)', () => {
    const modules = join(projectDir, 'node_modules');
    expect(existsSync(join(modules, 'agent-adapter', 'dist', 'index.js'))).toBe(
      true,
    );
    for (const peer of [
      '@nestjs',
      'class-validator',
      'class-transformer',
      'reflect-metadata',
      'rxjs',
      'typeorm',
    ]) {
      expect([peer, existsSync(join(modules, peer))]).toEqual([peer, false]);
    }
  });

  describe.each(SCENARIOS)(
    '%s: the tickets flow survives its worker',
    (_, script) => {
      let out: ScenarioOutput;

      beforeAll(async () => {
        out = JSON.parse(await result(script)) as ScenarioOutput;
      });

      it('loses worker 1 mid-superstep', () => {
        expect(out.entry).toBe('function');
        expect(out.worker1.rejected?.message).toBe('crashed');
      });

      it('fails closed: recover() needs a decision about the mail', () => {
        expect(out.recover.needsDecision).toBe(true);
        expect(out.recover.rejected?.name).toBe('RecoveryNeedsDecision');
        expect(out.recover.calls?.map(([tool]) => tool)).toEqual([
          'email_tickets',
        ]);
      });

      it('recoverAll({ rerunInDoubt, force }) finishes the run', () => {
        expect(out.recoverAll.runs).toEqual(['order-7']);
        expect(out.recoverAll.result).toMatchObject({
          status: 'done',
          state: { note: 'sent' },
        });
      });

      it('ran the card charge and the seat hold exactly once', () => {
        expect(out.ran).toEqual({
          hold_seats: 1,
          charge_card: 1,
          email_tickets: 2,
        });
        const keys = out.ledger
          .filter((e) => e.tool === 'charge_card')
          .map((e) => e.key);
        expect(keys).toEqual([expect.stringMatching(/^[A-Za-z0-9_-]{20,}$/)]);
      });
    },
  );

  it('ships the operator CLI as the agent-adapter bin (npx agent-adapter)', async () => {
    const files = packed.files.map((f) => f.path);
    expect(files).toEqual(
      expect.arrayContaining(['bin/agent-adapter.js', 'dist/cli/main.js']),
    );
    const help = await result(CLI_HELP);
    for (const command of [
      'list',
      'show',
      'verify',
      'inspect',
      'cancel',
      'fork',
      'export',
      'prune',
    ])
      expect(help).toContain(command);
    const list = JSON.parse(await result(CLI_LIST)) as {
      code: number;
      stderr: string;
    };
    expect(list.code).toBe(2);
    expect(list.stderr).toMatch(
      /needs the "typeorm" package.*npm install typeorm/,
    );
    expect(list.stderr).not.toMatch(/\n\s+at /);
  });

  describe('the bin in the repository (npm ci, then npm run build)', () => {
    it('is a committed, executable shim, so npm ci links it before dist/ exists', () => {
      const pkg = JSON.parse(
        readFileSync(join(LIB, 'package.json'), 'utf8'),
      ) as { bin: Record<string, string> };
      expect(pkg.bin).toEqual({ 'agent-adapter': 'bin/agent-adapter.js' });
      expect(statSync(BIN).mode & 0o111).toBe(0o111);
      // npm ci links the bins the lockfile names, not package.json's.
      const lock = JSON.parse(
        readFileSync(join(ROOT, 'package-lock.json'), 'utf8'),
      ) as { packages: Record<string, { bin?: Record<string, string> }> };
      expect(lock.packages['libs/agent-adapter']?.bin).toEqual(pkg.bin);
    });

    it.each([REPO_BIN, REPO_NPX])('%s prints the usage', async (name) => {
      const help = await result(name);
      expect(help).toMatch(/^Usage: agent-adapter \[options\] \[command\]/);
      expect(help).toContain('runs            operate on runs');
    });

    it('says to build the library when dist/ is missing', async () => {
      const dir = await mkdtemp(join(tmpdir(), 'agent-adapter-unbuilt-'));
      try {
        await mkdir(join(dir, 'bin'));
        await copyFile(BIN, join(dir, 'bin', 'agent-adapter.js'));
        const out = JSON.parse(
          await shFail(
            process.execPath,
            [join(dir, 'bin', 'agent-adapter.js'), '--help'],
            dir,
          ),
        ) as { code: number; stderr: string };
        expect(out).toEqual({
          code: 1,
          stderr:
            'agent-adapter: the library is not built; run npm run build\n',
        });
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    });
  });

  it.each(TSC_CHECKS)('the typings compile with %s', async (label) => {
    await result(label);
  });

  it(CONFORMANCE, async () => {
    const out = JSON.parse(await result(CONFORMANCE)) as {
      passed: number;
      failed: string[];
    };
    expect(out.failed).toEqual([]);
    // Every test but the tampering ones (they need raw row access the fixture does not give).
    expect(out.passed).toBeGreaterThanOrEqual(20);
  });

  it('ships the agent-adapter/testing and agent-adapter/typeorm entries', () => {
    expect(packed.files.map((f) => f.path)).toEqual(
      expect.arrayContaining([
        'dist/testing/index.js',
        'dist/testing/index.d.ts',
      ]),
    );
  });

  it('ships the agent-adapter/typeorm entry', () => {
    const files = packed.files.map((f) => f.path);
    expect(files).toEqual(
      expect.arrayContaining([
        'dist/typeorm/index.js',
        'dist/typeorm/index.d.ts',
      ]),
    );
  });

  it.each(TYPEORM_SCRIPTS)(
    "agent-adapter/typeorm (%s) gives the consumer typeorm's EntitySchema per table, per tenant",
    async (script) => {
      const out = JSON.parse(await result(script)) as TypeormScenarioOutput;
      expect(out).toEqual({
        schemas: true,
        tables: [
          'tenant_a.a_runs',
          'tenant_a.a_checkpoints',
          'tenant_a.a_calls',
          'tenant_a.a_stream',
          'tenant_a.a_meta',
          'tenant_a.a_queues',
        ],
        migration: expect.stringMatching(/^AgentAdapterInit.*1795900000000$/),
      });
    },
  );

  it('the agent-adapter/typeorm typings compile against typeorm (node16 resolution)', async () => {
    await result(TYPEORM_TSC);
  });
});
