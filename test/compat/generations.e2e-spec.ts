import { existsSync, readFileSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { killAllNow } from '../utils/child-process';
import { packLibrary, shOutcome, type Outcome } from '../utils/npm';
import {
  describeWithService,
  serviceReachable,
  suiteId,
} from '../utils/services';
import {
  BUILD,
  GENERATIONS,
  TSC_VARIANTS,
  TYPEORM_IOREDIS_OVERRIDE,
  TYPEORM_IOREDIS_PEER,
  crashScenario,
  diagnostics,
  install,
  limiter,
  readEresolve,
  tsc,
  writeSources,
  type CrashReport,
  type Generation,
  type Install,
  type StoreKind,
} from './compat';

/**
 * The packed package in a consumer's project on the oldest and the newest stack it supports
 * (Nest 11 + TypeORM 0.3 + ioredis 5; Nest 12 + TypeORM 1 + ioredis 6): installed with plain
 * `npm install`, type-checked under every module setting a Nest app may use, and a real Nest app
 * compiled to CommonJS that survives a SIGKILL inside a tool, on Postgres (through its
 * @nestjs/typeorm DataSource) and on Redis.
 *
 * Each generation is installed once; everything else runs from that project, side by side
 * (tsc two at a time: this machine has two cores), while the tests await what they assert on.
 */
jest.setTimeout(240_000);

const STORES: readonly StoreKind[] = ['postgres', 'redis'];
const { version: VERSION } = JSON.parse(
  readFileSync(
    join(__dirname, '..', '..', 'libs', 'agent-adapter', 'package.json'),
    'utf8',
  ),
) as { version: string };
const reachable = {
  postgres: serviceReachable('postgres'),
  redis: serviceReachable('redis'),
};

const began = performance.now();
const jobs = new Map<string, Promise<unknown>>();
/** When each job settled, in seconds since the suite began (COMPAT_TIMINGS=1 prints them). */
const settled = new Map<string, number>();
function start(name: string, job: Promise<unknown>): void {
  // Awaited (and reported) by the test that needs it.
  void job
    .catch(() => undefined)
    .then(() => settled.set(name, (performance.now() - began) / 1000));
  jobs.set(name, job);
}
function result<T>(name: string): Promise<T> {
  return (
    (jobs.get(name) as Promise<T> | undefined) ??
    Promise.reject(new Error(`${name} never started: see the beforeAll error`))
  );
}
const key = (g: Generation, what: string) => `${g.name}: ${what}`;

/** What the suite found on its way (the workarounds it used), printed at the end. */
const notes: string[] = [];

interface NpmLsNode {
  version?: string;
  invalid?: string;
  missing?: boolean;
  problems?: string[];
  dependencies?: Record<string, NpmLsNode>;
}

/** The consumer's JSON file, as npm left it. */
async function packageJson(dir: string): Promise<Record<string, unknown>> {
  return JSON.parse(
    await readFile(join(dir, 'package.json'), 'utf8'),
  ) as Record<string, unknown>;
}

describe('compatibility: the packed package on the oldest and newest stacks', () => {
  let work: string;
  const dirs = new Map<string, string>();
  const cpu = limiter(2);
  const apps = limiter(2);

  beforeAll(async () => {
    work = await mkdtemp(join(tmpdir(), 'aa-compat-'));
    start('pack', packLibrary(work));
    const { tarball } =
      await result<Awaited<ReturnType<typeof packLibrary>>>('pack');

    for (const g of GENERATIONS) {
      const dir = join(work, g.name);
      dirs.set(g.name, dir);
      const installed = mkdir(dir).then(() => install(dir, g, tarball));
      start(key(g, 'install'), installed);
      start(
        key(g, 'npm ls'),
        installed.then(() =>
          Promise.all([
            shOutcome('npm', ['ls', 'agent-adapter'], dir),
            shOutcome('npm', ['ls', '--all', '--json'], dir),
          ]),
        ),
      );
      const sources = installed.then(() => writeSources(dir));
      sources.catch(() => undefined); // each tsc job reports it
      for (const v of TSC_VARIANTS) {
        start(
          key(g, v.label),
          sources.then(() => cpu(() => tsc(dir, v), v.build)),
        );
      }
      const built = result<Outcome>(key(g, BUILD)).then((o) => {
        if (o.code !== 0)
          throw new Error(`the app did not compile:\n${o.stdout}`);
      });
      built.catch(() => undefined); // each crash scenario reports it
      for (const store of STORES) {
        if (!reachable[store]) continue; // describeWithService says why
        start(
          key(g, store),
          built.then(() =>
            apps(() =>
              crashScenario(dir, store, suiteId(`compat_${g.name}_${store}`)),
            ),
          ),
        );
      }
    }
  });

  afterAll(async () => {
    await Promise.allSettled(jobs.values());
    killAllNow();
    if (work) await rm(work, { recursive: true, force: true });
    const wall = ((performance.now() - began) / 1000).toFixed(1);
    const timings = process.env.COMPAT_TIMINGS
      ? [...settled].map(([name, s]) => `  ${s.toFixed(1)} s  ${name}`)
      : [];
    console.info(
      [`compat suite: ${wall} s wall time`, ...notes, ...timings].join('\n'),
    );
  });

  describe.each(GENERATIONS.map((g) => [g.name, g] as const))(
    '%s stack',
    (_, g) => {
      const dir = () => dirs.get(g.name)!;

      it(`installs: npm install <tarball> ${g.packages.join(' ')} (no --legacy-peer-deps, no --force)`, async () => {
        const { first, overridden } = await result<Install>(key(g, 'install'));
        const pkg = await packageJson(dir());
        if (first.code === 0) {
          // typeorm's range accepts ioredis 6 now (or this is the oldest stack): no override.
          expect(overridden).toBeUndefined();
          expect(pkg.overrides).toBeUndefined();
          notes.push(`${g.name}: installed without any override`);
        } else {
          // Only typeorm's own optional peer on ioredis 5 may stop it (typeorm/typeorm#12823).
          expect(g.typeormIoredisOverride).toBe(true);
          const e = readEresolve(first.stderr);
          expect(e.eresolve).toBe(true);
          expect(e.unresolved).toMatch(TYPEORM_IOREDIS_PEER);
          expect(e.mentionsAgentAdapter).toBe(false);
          // typeorm's documented override, and the same plain command again.
          expect(pkg.overrides).toEqual(TYPEORM_IOREDIS_OVERRIDE);
          expect(overridden?.code).toBe(0);
          notes.push(
            `${g.name}: ERESOLVE on typeorm's own "${TYPEORM_IOREDIS_PEER.exec(e.unresolved)?.[0]}"; installed with typeorm's override ${JSON.stringify(TYPEORM_IOREDIS_OVERRIDE)}`,
          );
        }
        // SQLite is covered elsewhere: nothing here builds better-sqlite3.
        expect(existsSync(join(dir(), 'node_modules', 'better-sqlite3'))).toBe(
          false,
        );
      });

      it('npm ls: agent-adapter is healthy; its peers are the app’s own copies, none invalid', async () => {
        const [plain, all] = await result<[Outcome, Outcome]>(key(g, 'npm ls'));
        expect(plain.code).toBe(0);
        expect(plain.stdout).toContain(`agent-adapter@${VERSION}`);
        expect(all.code).toBe(0);
        const tree = JSON.parse(all.stdout) as NpmLsNode;
        expect(
          (tree.problems ?? []).filter((p) => /agent-adapter/.test(p)),
        ).toEqual([]);
        const ours = tree.dependencies?.['agent-adapter'];
        expect(ours?.version).toBe(VERSION);
        expect(ours?.invalid).toBeUndefined();
        expect(ours?.problems).toBeUndefined();
        for (const [name, version] of Object.entries(g.versions)) {
          const peer = ours?.dependencies?.[name];
          expect([name, peer?.invalid, peer?.missing]).toEqual([
            name,
            undefined,
            undefined,
          ]);
          expect([name, peer?.version]).toEqual([
            name,
            expect.stringMatching(version),
          ]);
          expect(peer?.version).toBe(tree.dependencies?.[name]?.version);
        }
      });

      it.each(TSC_VARIANTS.map((v) => [v.label, v] as const))(
        'tsc: %s',
        async (label, v) => {
          const { code, stdout, stderr } = await result<Outcome>(key(g, label));
          const output = stdout + stderr;
          if (code !== 0 && g.esmOnlyNest && v.noRequireEsm) {
            // TypeScript's node16 is Node 16, which could not require() an ES module: a
            // CommonJS file cannot import ESM-only Nest 12 at all. Every error must be that
            // one, about a @nestjs import; node20 and nodenext (require(esm)) pass.
            const errors = output
              .split('\n')
              .filter((l) => /error TS\d+/.test(l));
            expect(errors.length).toBeGreaterThan(0);
            expect(diagnostics(output)).toHaveLength(errors.length);
            for (const d of diagnostics(output)) {
              expect(d).toEqual({
                file: 'app.ts', // the consumer's own imports of Nest
                code: 'TS1479',
                message: expect.stringMatching(/import\("@nestjs\/[a-z-]+"\)/),
              });
            }
            notes.push(
              `${g.name}: tsc ${label}: ${errors.length} × TS1479 on @nestjs imports (Nest 12 is ESM-only; node16 has no require(esm))`,
            );
            return;
          }
          expect(output).toBe('');
          expect(code).toBe(0);
        },
      );

      for (const store of STORES) {
        describeWithService(
          store,
          `${g.name} stack: a Nest app on ${store === 'postgres' ? "Postgres (TypeOrmModule's DataSource)" : 'Redis'} survives SIGKILL inside a tool`,
          () => {
            let r: CrashReport;
            beforeAll(async () => {
              r = await result<CrashReport>(key(g, store));
            });

            it('is killed inside send_parcel, after the calls before it finished', () => {
              expect(r.killed).toEqual({ code: null, signal: 'SIGKILL' });
              expect(r.atKill.map((l) => [l.tool, l.pid])).toEqual([
                ['charge_card', r.pids[0]],
                ['print_label', r.pids[0]],
                ['send_parcel', r.pids[0]],
              ]);
            });

            it("the restarted app's bootstrap recovery finishes the run", () => {
              expect(r.recoveryLog).toEqual(
                expect.arrayContaining([
                  expect.stringMatching(
                    // The killed step's finished call replays; the idempotent one in flight runs again.
                    `Run "${r.runId}" of flow "shipping" recovered: done at step \\d+; replayed print_label; ran again send_parcel \\(idempotent\\)\\.$`,
                  ),
                ]),
              );
              expect(r.recovered).toMatchObject({
                runId: r.runId,
                status: 'done',
                state: {
                  item: 'book',
                  charged: 'charged for book',
                  label: 'label for book',
                  sent: 'sent book',
                  notified: 'notified about book',
                },
              });
              if (store === 'postgres') {
                // Read by the app through the agent-adapter/typeorm entity.
                expect(r.row).toEqual({
                  run_id: r.runId,
                  status: 'done',
                });
              }
            });

            it('no finished call ran again; the killed (idempotent) tool ran at most twice, with one key', () => {
              const ran = (tool: string) =>
                r.ledger.filter((l) => l.tool === tool);
              expect(ran('charge_card').map((l) => l.pid)).toEqual([r.pids[0]]);
              expect(ran('print_label').map((l) => l.pid)).toEqual([r.pids[0]]);
              const sent = ran('send_parcel');
              expect(sent.length).toBeLessThanOrEqual(2);
              expect(sent.map((l) => l.pid)).toEqual([r.pids[0], r.pids[1]]);
              expect(new Set(sent.map((l) => l.key)).size).toBe(1);
              expect(ran('notify_customer').map((l) => l.pid)).toEqual([
                r.pids[1],
              ]);
              expect(r.ledger).toHaveLength(5);
            });

            it('stops on SIGTERM (enableShutdownHooks); its schema / key prefix is removed', () => {
              expect([
                { code: 0, signal: null },
                { code: null, signal: 'SIGTERM' },
              ]).toContainEqual(r.shutdown);
              expect(r.leftover).toBe(0);
            });
          },
        );
      }
    },
  );
});
