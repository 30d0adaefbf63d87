/**
 * DurableModule names every optional package the application needs and does not have in one
 * error at bootstrap (before the store is created), so the application fails to start instead of
 * failing at its first request, one package per error.
 *
 * Missing packages are simulated without uninstalling them: in jest, the library's one package
 * resolver refuses chosen names (every check and load goes through it); in a fresh node, Node's own
 * resolution refuses them (Module._resolveFilename), with nothing of jest in the way.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DriverNotInstalledError, SQLiteCheckpointStore } from 'agent-adapter';
import { DurableModule, Flow, FlowRunner, Node } from 'agent-adapter/nest';
import { usePackageResolver } from 'agent-adapter/peers/optional-packages';
import {
  Order,
  OrdersFlow,
  Seats,
  bootAndClose,
  sqliteStore,
} from './fixtures/optional-packages.fixtures';
import { Apps } from './utils';

function hide(...names: string[]): () => void {
  return usePackageResolver((name) => {
    if (names.some((h) => name === h || name.startsWith(`${h}/`))) {
      throw Object.assign(new Error(`Cannot find module '${name}'`), {
        code: 'MODULE_NOT_FOUND',
      });
    }
    return require.resolve(name);
  });
}

async function bootError(boot: () => Promise<unknown>): Promise<unknown> {
  try {
    await boot();
  } catch (error) {
    return error;
  }
  return 'booted';
}

let dir: string;
let restore: (() => void) | undefined;
const apps = new Apps();

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'aa-optional-'));
});

afterEach(async () => {
  restore?.();
  restore = undefined;
  await apps.closeAll();
  rmSync(dir, { recursive: true, force: true });
});

describe('DurableModule checks the optional packages at bootstrap', () => {
  it('boots with the required packages when the optional ones (tracing, events, schemas) are missing', async () => {
    restore = hide(
      '@opentelemetry/api',
      '@nestjs/event-emitter',
      'class-validator-jsonschema',
    );
    const path = join(dir, 'runs.db');
    const app = await apps.boot([sqliteStore(path)], {
      providers: [Seats, OrdersFlow],
    });
    const runner = app.get(FlowRunner);
    const result = await runner.start(OrdersFlow, { show: 'Hamlet', seats: 2 });
    expect(result).toMatchObject({
      status: 'done',
      state: { note: 'held 2 for Hamlet' },
    });
  });

  it('a @Flow state class and a SQLite store with class-validator and better-sqlite3 missing: one error naming both', async () => {
    restore = hide('class-validator', 'better-sqlite3');
    const path = join(dir, 'runs.db');
    const error = await bootError(() => bootAndClose([sqliteStore(path)]));
    expect(error).toBeInstanceOf(DriverNotInstalledError);
    const missing = error as DriverNotInstalledError;
    expect(missing.packages).toEqual(['better-sqlite3', 'class-validator']);
    expect(missing.command).toBe(
      'npm install better-sqlite3@12 class-validator',
    );
    expect(missing.message).toMatch(
      /^DurableModule needs the "better-sqlite3" package \(for store \{ type: "sqlite" \}\) and the "class-validator" package \(for .*\), which are not installed\. Install them: npm install better-sqlite3@12 class-validator$/,
    );
    // What needs class-validator: the flow's state class and the tool's argument class.
    expect(missing.missing[1]?.neededFor).toEqual(
      expect.arrayContaining([
        'the state class of @Flow "orders"',
        'the args of @Tool Seats#hold',
      ]),
    );
    expect(existsSync(path)).toBe(false); // failed before the store was created
  });

  it('a flow provided by a factory is checked when the explorer sees it (still before any request)', async () => {
    restore = hide('class-transformer');
    @Flow('late', { state: Order })
    class LateFlow {
      @Node({ start: true, end: true }) done(): object {
        return {};
      }
    }
    const error = await bootError(() =>
      bootAndClose(
        [DurableModule.forRoot({ store: { type: 'memory' } })],
        [{ provide: 'LATE', useFactory: () => new LateFlow() }],
      ),
    );
    expect(error).toBeInstanceOf(DriverNotInstalledError);
    expect((error as DriverNotInstalledError).message).toContain(
      'the "class-transformer" package (for the state class of @Flow "late")',
    );
  });

  it('a store instance is checked when it is made, before the module sees it', () => {
    restore = hide('typeorm');
    expect(() => new SQLiteCheckpointStore(join(dir, 'x.db'))).toThrow(
      'npm install typeorm',
    );
  });
});

describe('in a fresh node (Node resolution refuses the packages)', () => {
  it('the same app fails to start with one error naming class-validator and better-sqlite3', () => {
    const fixtures = join(
      __dirname,
      'fixtures',
      'optional-packages.fixtures.ts',
    );
    const path = join(dir, 'runs.db');
    const child = `
      const Module = require('module');
      const resolve = Module._resolveFilename;
      const hidden = ['class-validator', 'better-sqlite3'];
      Module._resolveFilename = function (request, ...rest) {
        if (hidden.some((h) => request === h || request.startsWith(h + '/'))) {
          const e = new Error('Cannot find module ' + request);
          e.code = 'MODULE_NOT_FOUND';
          throw e;
        }
        return resolve.call(this, request, ...rest);
      };
      const f = require(${JSON.stringify(fixtures)});
      f.bootAndClose([f.sqliteStore(${JSON.stringify(path)})]).then(
        () => process.stdout.write(JSON.stringify('booted')),
        (e) => process.stdout.write(JSON.stringify({ name: e.name, packages: e.packages, message: e.message })),
      );`;
    const out = spawnSync(
      process.execPath,
      ['-r', join(__dirname, '..', 'utils', 'ts-register.js'), '-e', child],
      {
        encoding: 'utf8',
        env: { ...process.env, NODE_OPTIONS: '' },
        timeout: 60_000,
      },
    );
    expect(out.stderr).toBe('');
    expect(JSON.parse(out.stdout)).toEqual({
      name: 'DriverNotInstalledError',
      packages: ['better-sqlite3', 'class-validator'],
      message: expect.stringContaining(
        'npm install better-sqlite3@12 class-validator',
      ),
    });
    expect(existsSync(path)).toBe(false);
  });
});
