import { join } from 'node:path';
import {
  CheckpointKeyError,
  DriverNotInstalledError,
  DurableSetupError,
} from '../errors';
import type { CheckpointStore } from '../exec/checkpoints/checkpoint-store';
import { MemoryCheckpointStore } from '../exec/checkpoints/memory.store';
import { RedisCheckpointStore } from '../exec/checkpoints/redis/redis.store';
import { SQLCheckpointStore } from '../exec/checkpoints/sql/sql.store';
import { SQLiteCheckpointStore } from '../exec/checkpoints/sql/sqlite.store';
import { KeyRing } from '../exec/durable/key-ring';
import { CHECKPOINT_STORE_TYPES, createCheckpointStore } from './create-store';
import { normalizeRunnerOptions } from '../flow/runner/flow-runner.options';
import { resolveDurableOptions } from './durable.providers';
import type {
  CheckpointStoreDescriptor,
  DurableModuleOptions,
} from './interfaces';
import {
  refusePackages,
  runInFreshNode,
} from '../../../../test/utils/fresh-node';

const KEY = 'use-a-secret-from-your-vault-32b';

describe('createCheckpointStore', () => {
  it('uses a store instance as it is, owned by the caller', () => {
    const store = new MemoryCheckpointStore();
    expect(createCheckpointStore(store)).toEqual({ store, owned: false });
  });

  it.each<{
    descriptor: CheckpointStoreDescriptor;
    type: abstract new (...args: never[]) => CheckpointStore;
  }>([
    { descriptor: { type: 'memory' }, type: MemoryCheckpointStore },
    {
      descriptor: { type: 'sqlite', path: ':memory:', tablePrefix: 't_' },
      type: SQLiteCheckpointStore,
    },
    {
      descriptor: {
        type: 'postgres',
        url: 'postgres://nobody@127.0.0.1:1/none',
        schema: 'tenant_a',
      },
      type: SQLCheckpointStore,
    },
  ])(
    'creates (and owns) a $descriptor.type store from its descriptor, without connecting',
    async ({ descriptor, type }) => {
      const created = createCheckpointStore(descriptor);
      expect(created.store).toBeInstanceOf(type);
      expect(created.owned).toBe(true);
      await created.store.close();
    },
  );

  it('creates (and owns) a Redis store on the given client, without connecting', () => {
    const client = { defineCommand: jest.fn(), quit: jest.fn() };
    const redis = createCheckpointStore({
      type: 'redis',
      client: () => client,
      prefix: 'tenant',
      ttlSeconds: 60,
      replicas: { count: 1, timeoutMs: 500 },
    });
    expect(redis.store).toBeInstanceOf(RedisCheckpointStore);
    expect(client.defineCommand).toHaveBeenCalled();
  });

  it("reuses the application's DataSource without owning it", () => {
    const dataSource = {
      options: { type: 'postgres' },
      isInitialized: true,
      driver: {},
      initialize: jest.fn(),
      destroy: jest.fn(),
      query: jest.fn(),
    };
    const created = createCheckpointStore({ type: 'postgres', dataSource });
    expect(created.store).toBeInstanceOf(SQLCheckpointStore);
    expect(created.owned).toBe(false);
  });

  it.each<[string, unknown, RegExp]>([
    ['no store', undefined, /"store" option is missing/],
    [
      'an unknown type',
      { type: 'mongo' },
      /unknown store type "mongo"\. Valid types: "memory", "sqlite", "postgres", "redis"/,
    ],
    ['sqlite without a path', { type: 'sqlite' }, /give "path"/],
    [
      'postgres without a connection',
      { type: 'postgres' },
      /exactly one of "dataSource" .* or "url"/,
    ],
    [
      'a postgres poolSize that is not a positive integer',
      { type: 'postgres', url: 'postgres://x', poolSize: 0 },
      /"poolSize" must be a positive integer, got 0/,
    ],
    [
      'a postgres poolSize beside a DataSource (it sizes its own pool)',
      {
        type: 'postgres',
        poolSize: 4,
        dataSource: { options: { type: 'postgres' } },
      },
      /"poolSize" sizes the pool of a store made from "url"/,
    ],
    [
      'postgres preparedStatements that is not a boolean',
      { type: 'postgres', url: 'postgres://x', preparedStatements: 'no' },
      /"preparedStatements" must be true or false, got "no"/,
    ],
    [
      'redis with url and client',
      { type: 'redis', url: 'redis://x', client: () => ({}) },
      /"url" or "client", not both/,
    ],
    [
      'redis with a client that is not a factory',
      { type: 'redis', client: {} },
      /"client" must be a function/,
    ],
    [
      'redis replicas of 0',
      {
        type: 'redis',
        client: () => ({ defineCommand: () => undefined }),
        replicas: { count: 0, timeoutMs: 100 },
      },
      /replicas/,
    ],
  ])('refuses %s', (_, option, message) => {
    expect(() =>
      createCheckpointStore(option as DurableModuleOptions['store']),
    ).toThrow(DurableSetupError);
    expect(() =>
      createCheckpointStore(option as DurableModuleOptions['store']),
    ).toThrow(message);
  });

  it('lists the valid types', () => {
    expect(CHECKPOINT_STORE_TYPES).toEqual([
      'memory',
      'sqlite',
      'postgres',
      'redis',
    ]);
  });

  // Jest's own module resolution cannot make an installed package disappear: a fresh node does,
  // by refusing to resolve the driver, then creates the store from the TypeScript source.
  it.each([
    [{ type: 'sqlite', path: 'x.db' }, 'better-sqlite3'],
    [{ type: 'postgres', url: 'postgres://x' }, 'pg'],
    [{ type: 'redis', url: 'redis://x' }, 'ioredis'],
  ])(
    'a missing driver is DriverNotInstalledError with the install command (%j)',
    (descriptor, driver) => {
      const out = runInFreshNode(`
        ${refusePackages([driver])}
        const { createCheckpointStore } = require(${JSON.stringify(join(__dirname, 'create-store.ts'))});
        try {
          createCheckpointStore(${JSON.stringify(descriptor)});
          process.stdout.write('created');
        } catch (e) {
          process.stdout.write(JSON.stringify({ name: e.name, message: e.message }));
        }`);
      expect(out.stderr).toBe('');
      const error = JSON.parse(out.stdout) as { name: string; message: string };
      expect(error.name).toBe(DriverNotInstalledError.name);
      expect(error.message).toContain(`npm install ${driver}`);
    },
  );
});

describe('resolveDurableOptions', () => {
  it("leaves the runner's defaults to the runner, and its own default", () => {
    const resolved = resolveDurableOptions({ store: { type: 'memory' } });
    expect(resolved).toMatchObject({ ownsStore: true, recoveryConcurrency: 4 });
    expect(resolved.runner).toEqual({
      checkpoints: resolved.store,
      // Nest's Logger behind the core's logger port.
      logger: { warn: expect.any(Function), error: expect.any(Function) },
    });
    const settings = normalizeRunnerOptions(resolved.runner);
    expect(settings.leaseMs).toBe(15_000);
    expect(settings.workerId).toMatch(/^.+:\d+:[0-9a-f]{8}$/);
    expect(settings.maxRecoveryAttempts).toBeUndefined();
    expect(
      resolveDurableOptions({
        store: { type: 'memory' },
        maxRecoveryAttempts: 3,
      }).runner.maxRecoveryAttempts,
    ).toBe(3);
  });

  it('takes a key as a string, a Buffer or a key ring', () => {
    for (const key of [KEY, Buffer.alloc(32, 7), { current: KEY }]) {
      const resolved = resolveDurableOptions({
        store: { type: 'memory' },
        key,
        workerId: 'w1',
        leaseMs: 500,
        recoveryConcurrency: 2,
      });
      expect(normalizeRunnerOptions(resolved.runner).ring).toBeInstanceOf(
        KeyRing,
      );
      expect(resolved.runner).toMatchObject({ workerId: 'w1', leaseMs: 500 });
      expect(resolved.recoveryConcurrency).toBe(2);
    }
  });

  it('needs a key for a shared store, and closes the store it created', async () => {
    const close = jest.spyOn(SQLCheckpointStore.prototype, 'close');
    expect(() =>
      resolveDurableOptions({ store: { type: 'sqlite', path: ':memory:' } }),
    ).toThrow(/the SQLiteCheckpointStore is shared .* "key" is required/);
    expect(close).toHaveBeenCalledTimes(1);
    close.mockRestore();
  });

  it('refuses an encryptionKey that is the key, and closes the store it created', () => {
    const close = jest.spyOn(SQLCheckpointStore.prototype, 'close');
    const key = 'use-a-secret-from-your-vault-32b';
    expect(() =>
      resolveDurableOptions({
        store: { type: 'sqlite', path: ':memory:' },
        key,
        encryptionKey: {
          current: 'another-secret-of-at-least-32-bytes',
          previous: [key],
        },
      }),
    ).toThrow(/^The encryption key must not be a checkpoint key/);
    expect(close).toHaveBeenCalledTimes(1);
    close.mockRestore();
  });

  it('refuses a key shorter than 32 bytes', () => {
    expect(() =>
      resolveDurableOptions({ store: { type: 'memory' }, key: 'short' }),
    ).toThrow(CheckpointKeyError);
  });

  it.each([
    ['leaseMs', { leaseMs: 0 }, 'an integer of at least 100'],
    ['leaseMs', { leaseMs: 1.5 }, 'an integer of at least 100'],
    // The runner's own floor: one check, so the module cannot accept what the runner refuses.
    ['leaseMs', { leaseMs: 50 }, 'an integer of at least 100'],
    ['recoveryConcurrency', { recoveryConcurrency: -1 }, 'a positive integer'],
    ['maxRecoveryAttempts', { maxRecoveryAttempts: 0 }, 'a positive integer'],
    [
      'maxRecoveryAttempts',
      { maxRecoveryAttempts: '3' as unknown as number },
      'a positive integer',
    ],
  ])('refuses a bad %s (%j)', (option, extra, what) => {
    const resolve = () =>
      resolveDurableOptions({ store: { type: 'memory' }, ...extra });
    expect(resolve).toThrow(DurableSetupError);
    expect(resolve).toThrow(`DurableModule: "${option}" must be ${what}`);
  });

  it.each(['', 'w'.repeat(201)])(
    'refuses a workerId the runner refuses (%#: empty, 201 characters)',
    (workerId) => {
      expect(() =>
        resolveDurableOptions({ store: { type: 'memory' }, workerId }),
      ).toThrow(
        /^DurableModule: workerId must be a non-empty string of at most 200 characters/,
      );
    },
  );
});
