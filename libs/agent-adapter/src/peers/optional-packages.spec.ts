import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  DriverNotInstalledError,
  Flow,
  RedisCheckpointStore,
  SQLCheckpointStore,
  SQLiteCheckpointStore,
} from 'agent-adapter';
import { openCheckpointStore } from '../exec/checkpoints/create-store';
import {
  OPTIONAL_FEATURES,
  loadOptionalPackage,
  requireFeatures,
  requirePackage,
  usePackageResolver,
} from './optional-packages';
import {
  refusePackages,
  runInFreshNode,
} from '../../../../test/utils/fresh-node';
import { thrownBy } from '../../../../test/utils/specs';

/**
 * Missing packages are simulated without uninstalling them: the loader's resolver refuses the
 * chosen names (every check and load goes through it), and, where jest's own module registry would
 * be in the way, a fresh `node` refuses them in Node's own resolution (Module._resolveFilename).
 */
function hide(...names: string[]): () => void {
  return usePackageResolver((name) => {
    if (
      names.some((hidden) => name === hidden || name.startsWith(`${hidden}/`))
    ) {
      const error = new Error(`Cannot find module '${name}'`);
      (error as Error & { code: string }).code = 'MODULE_NOT_FOUND';
      throw error;
    }
    return require.resolve(name);
  });
}

let restore: (() => void) | undefined;
afterEach(() => {
  restore?.();
  restore = undefined;
});

const thrown = (fn: () => unknown): DriverNotInstalledError =>
  thrownBy(DriverNotInstalledError, fn);

describe('the feature table', () => {
  it('lists only optional peers of the library (the table and package.json agree)', () => {
    const pkg = JSON.parse(
      readFileSync(join(__dirname, '..', '..', 'package.json'), 'utf8'),
    ) as {
      peerDependencies: Record<string, string>;
      peerDependenciesMeta: Record<string, { optional?: boolean }>;
    };
    for (const { packages } of Object.values(OPTIONAL_FEATURES)) {
      for (const name of packages) {
        expect([name, pkg.peerDependencies[name]]).toEqual([
          name,
          expect.any(String),
        ]);
        expect([name, pkg.peerDependenciesMeta[name]?.optional]).toEqual([
          name,
          true,
        ]);
      }
    }
  });
});

describe('requireFeatures', () => {
  it('names every missing package of every feature in one error, with one npm command', () => {
    restore = hide('typeorm', 'better-sqlite3', 'class-validator');
    const error = thrown(() =>
      requireFeatures(['sqlite', 'stateClass', 'toolArguments'], 'MyApp'),
    );
    expect(error.packages).toEqual([
      'typeorm',
      'better-sqlite3',
      'class-validator',
    ]);
    expect(error.command).toBe(
      'npm install typeorm better-sqlite3@12 class-validator',
    );
    expect(error.message).toBe(
      'MyApp needs the "typeorm" package (for the SQLite store), the "better-sqlite3" package (for the SQLite store) and the "class-validator" package (for flow state classes, @Tool({ args }) argument classes), which are not installed. Install them: npm install typeorm better-sqlite3@12 class-validator',
    );
  });

  it('passes when every package is installed, and never requires an optional feature', () => {
    expect(() =>
      requireFeatures(
        ['sqlite', 'postgres', 'redis', 'stateClass', 'toolArguments'],
        'x',
      ),
    ).not.toThrow();
    restore = hide(
      '@opentelemetry/api',
      '@nestjs/event-emitter',
      'class-validator-jsonschema',
    );
    expect(() =>
      requireFeatures(['tracing', 'nestEvents', 'toolArgumentSchemas'], 'x'),
    ).not.toThrow();
  });

  it('a missing optional package loads as undefined; a required one throws for its feature', () => {
    restore = hide('@opentelemetry/api', 'ioredis');
    expect(loadOptionalPackage('@opentelemetry/api')).toBeUndefined();
    const error = thrown(() =>
      requirePackage('ioredis', 'redis', 'RedisCheckpointStore'),
    );
    expect(error.message).toContain('npm install ioredis');
  });
});

describe('stores check their packages when they are created', () => {
  it('a SQLite store descriptor with typeorm and better-sqlite3 missing: one error naming both', () => {
    restore = hide('typeorm', 'better-sqlite3');
    const error = thrown(() =>
      openCheckpointStore({ type: 'sqlite', path: 'never-created.db' }),
    );
    expect(error.packages).toEqual(['typeorm', 'better-sqlite3']);
    expect(error.message).toContain('npm install typeorm better-sqlite3@12');
  });

  it('new SQLiteCheckpointStore(path) throws at construction, not at first use', () => {
    restore = hide('better-sqlite3');
    const error = thrown(() => new SQLiteCheckpointStore('never-created.db'));
    expect(error.message).toMatch(
      /^SQLiteCheckpointStore needs the "better-sqlite3" package \(for the SQLite store\), which is not installed/,
    );
    expect(error.command).toBe('npm install better-sqlite3@12');
  });

  it('Postgres from a URL needs typeorm and pg; Redis from a URL needs ioredis', () => {
    restore = hide('typeorm', 'pg', 'ioredis');
    expect(
      thrown(() =>
        openCheckpointStore({ type: 'postgres', url: 'postgres://x' }),
      ).command,
    ).toBe('npm install typeorm pg');
    expect(
      thrown(() => new SQLCheckpointStore({ type: 'postgres', url: 'x' }))
        .packages,
    ).toEqual(['typeorm', 'pg']);
    expect(
      thrown(() => openCheckpointStore({ type: 'redis', url: 'redis://x' }))
        .command,
    ).toBe('npm install ioredis');
  });

  it('a store given its DataSource or client needs nothing of its own', async () => {
    restore = hide('typeorm', 'pg', 'better-sqlite3', 'ioredis');
    const dataSource = {
      options: { type: 'postgres' },
      isInitialized: false,
      driver: undefined,
      initialize: () => Promise.resolve(),
      destroy: () => Promise.resolve(),
      query: () => Promise.resolve([]),
    };
    expect(
      openCheckpointStore({ type: 'postgres', dataSource }).store,
    ).toBeInstanceOf(SQLCheckpointStore);
    const client = {
      status: 'wait',
      defineCommand: () => undefined,
      disconnect: () => undefined,
    };
    const redis = openCheckpointStore({
      type: 'redis',
      client: () => client as never,
    }).store;
    expect(redis).toBeInstanceOf(RedisCheckpointStore);
    await redis.close();
  });
});

describe('a flow with a state class', () => {
  class Order {
    show = '';
  }

  it('checks class-validator and class-transformer when it is built', () => {
    restore = hide('class-validator', 'class-transformer');
    const error = thrown(() => new Flow('tickets', { state: Order }));
    expect(error.message).toBe(
      'Flow "tickets" needs the "class-validator" package (for its state class Order) and the "class-transformer" package (for its state class Order), which are not installed. Install them: npm install class-validator class-transformer',
    );
  });

  it('without a state class needs neither', () => {
    restore = hide('class-validator', 'class-transformer');
    expect(() =>
      new Flow('plain').node('a', () => ({})).end('a'),
    ).not.toThrow();
  });
});

describe('tracing', () => {
  it('is optional: without @opentelemetry/api a run makes no span and raises no error', async () => {
    // A registered SDK would make spans, so no span proves the package was not loaded.
    const { trace } = await import('@opentelemetry/api');
    const { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } =
      await import('@opentelemetry/sdk-trace-base');
    const exporter = new InMemorySpanExporter();
    trace.setGlobalTracerProvider(
      new BasicTracerProvider({
        spanProcessors: [new SimpleSpanProcessor(exporter)],
      }),
    );
    try {
      let span: unknown = 'not called';
      await jest.isolateModulesAsync(async () => {
        // A fresh copy of the loader and of tracing (which remembers what it loaded).
        const packages = await import('./optional-packages');
        const { traced } = await import('../observability/tracing');
        const undo = packages.usePackageResolver((name) => {
          if (name === '@opentelemetry/api') throw new Error('not installed');
          return require.resolve(name);
        });
        try {
          span = await traced(
            'run',
            () => ({}),
            async (s) => s,
          );
        } finally {
          undo();
        }
      });
      expect(span).toBeUndefined();
      expect(exporter.getFinishedSpans()).toEqual([]);
    } finally {
      trace.disable();
    }
  });
});

describe('legacy use of DriverNotInstalledError', () => {
  it('one package given by name keeps its message and gains the fields', () => {
    const error = new DriverNotInstalledError('SQLCheckpointStore', 'pg');
    expect(error.name).toBe('DriverNotInstalledError');
    expect(error.message).toBe(
      'SQLCheckpointStore needs the "pg" package, which is not installed. Install it: npm install pg',
    );
    expect(error.packages).toEqual(['pg']);
    expect(error.command).toBe('npm install pg');
  });
});

// Node's own resolution, in a fresh process: nothing of jest's registry in the way.
describe('in a fresh node, with the packages refused by Module._resolveFilename', () => {
  function inChild(hidden: string[], body: string): unknown {
    const result = runInFreshNode(`
      ${refusePackages(hidden)}
      const lib = require(${JSON.stringify(join(__dirname, '..', 'index.ts'))});
      const store = require(${JSON.stringify(join(__dirname, '..', 'exec', 'checkpoints', 'create-store.ts'))});
      let out;
      try {
        ${body}
        out = 'no error';
      } catch (e) {
        out = { name: e.name, message: e.message, packages: e.packages };
      }
      process.stdout.write(JSON.stringify(out));`);
    expect(result.stderr).toBe('');
    return JSON.parse(result.stdout);
  }

  it('a SQLite store descriptor with typeorm and better-sqlite3 missing: one error naming both', () => {
    expect(
      inChild(
        ['typeorm', 'better-sqlite3'],
        `store.openCheckpointStore({ type: 'sqlite', path: 'never-created.db' });`,
      ),
    ).toEqual({
      name: 'DriverNotInstalledError',
      message: expect.stringContaining('npm install typeorm better-sqlite3@12'),
      packages: ['typeorm', 'better-sqlite3'],
    });
  });

  it('new SQLiteCheckpointStore(path) fails at construction', () => {
    expect(
      inChild(['better-sqlite3'], `new lib.SQLiteCheckpointStore('never.db');`),
    ).toEqual(
      expect.objectContaining({
        name: 'DriverNotInstalledError',
        packages: ['better-sqlite3'],
      }),
    );
  });

  it('a Flow with a state class fails when it is built', () => {
    expect(
      inChild(
        ['class-validator'],
        `new lib.Flow('tickets', { state: class Order {} });`,
      ),
    ).toEqual(
      expect.objectContaining({
        name: 'DriverNotInstalledError',
        packages: ['class-validator'],
      }),
    );
  });
});
