/**
 * The example's HTTP API over every persistent store and every way of configuring DurableModule:
 * `forRoot` and the three `forRootAsync` variants, each on SQLite, on Postgres (reusing the
 * application's @nestjs/typeorm DataSource) and on Redis. Each POST runs the tickets flow to its
 * end through the real HTTP stack (supertest).
 */
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import {
  Inject,
  Injectable,
  Module,
  type DynamicModule,
  type InjectionToken,
  type INestApplication,
} from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import Redis from 'ioredis';
import request from 'supertest';
import { DataSource } from 'typeorm';
import { Test } from '@nestjs/testing';
import {
  RedisCheckpointStore,
  SQLCheckpointStore,
  SQLiteCheckpointStore,
  type CheckpointStore as Store,
} from 'agent-adapter';
import {
  CheckpointStore,
  DurableModule,
  RecoveryOrchestrator,
  type CheckpointStoreDescriptor,
  type DurableModuleOptions,
  type DurableOptionsFactory,
} from 'agent-adapter/nest';
import { AppModule } from '../../src/app.module';
import { EXAMPLE_CONFIG, runsDb, type ExampleConfig } from '../../src/config';
import { OrdersModule } from '../../src/orders/orders.module';
import { PaymentProvider } from '../../src/tickets/payment-provider';
import { TicketsModule } from '../../src/tickets/tickets.module';
import { Apps, CaptureLogger } from '../nest/utils';
import { dropPrefix } from '../utils/redis-keys';
import {
  DATABASE_URL,
  REDIS_URL,
  describeWithService,
  suiteId,
} from '../utils/services';
import { TestConfigModule, exampleConfig, ledgerLines } from './example-config';

/** How one backend is configured: statically, and from injected dependencies. */
interface Backend {
  /** Modules the application has anyway (e.g. its TypeORM connection). */
  appImports(): DynamicModule[];
  /** The descriptor `forRoot` is given. */
  direct(config: ExampleConfig): CheckpointStoreDescriptor;
  /** What the async variants inject besides the config, and the descriptor they build. */
  inject: InjectionToken[];
  fromInjected(
    config: ExampleConfig,
    ...deps: unknown[]
  ): CheckpointStoreDescriptor;
  /** The store class the module must have created. */
  store: abstract new (...args: never[]) => Store;
}

const VARIANTS = ['forRoot', 'useFactory', 'useClass', 'useExisting'] as const;
type Variant = (typeof VARIANTS)[number];

function durableModule(
  variant: Variant,
  backend: Backend,
  config: ExampleConfig,
): DynamicModule {
  const options = (store: CheckpointStoreDescriptor): DurableModuleOptions => ({
    store,
    key: config.checkpointKey,
    workerId: config.workerId,
  });
  const inject = [EXAMPLE_CONFIG, ...backend.inject];
  const build = (c: ExampleConfig, ...deps: unknown[]) =>
    options(backend.fromInjected(c, ...deps));
  switch (variant) {
    case 'forRoot':
      return DurableModule.forRoot(options(backend.direct(config)));
    case 'useFactory':
      return DurableModule.forRootAsync({ inject, useFactory: build });
    case 'useClass':
      return DurableModule.forRootAsync({
        useClass: optionsFactory(inject, build),
      });
    case 'useExisting': {
      const Factory = optionsFactory(inject, build);
      @Module({ providers: [Factory], exports: [Factory] })
      class DurableConfigModule {}
      return DurableModule.forRootAsync({
        imports: [DurableConfigModule],
        useExisting: Factory,
      });
    }
  }
}

/** A `DurableOptionsFactory` class whose constructor injects `inject`, as a user's would. */
function optionsFactory(
  inject: InjectionToken[],
  build: (...deps: never[]) => DurableModuleOptions,
): new (...deps: unknown[]) => DurableOptionsFactory {
  @Injectable()
  class DurableOptions implements DurableOptionsFactory {
    private readonly deps: unknown[];
    constructor(...deps: unknown[]) {
      this.deps = deps;
    }
    createDurableOptions(): DurableModuleOptions {
      return (build as (...deps: unknown[]) => DurableModuleOptions)(
        ...this.deps,
      );
    }
  }
  inject.forEach((token, index) =>
    (Inject(token) as ParameterDecorator)(DurableOptions, undefined, index),
  );
  return DurableOptions;
}

function httpSuite(
  name: string,
  backend: () => Backend,
  cleanup: () => Promise<void>,
) {
  const apps = new Apps();
  const dirs: string[] = [];
  afterEach(() => apps.closeAll());
  afterAll(async () => {
    await cleanup();
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  async function boot(variant: Variant) {
    const config = exampleConfig();
    dirs.push(config.dataDir);
    const b = backend();
    const app = await apps.boot([
      TestConfigModule.with(config),
      ...b.appImports(),
      durableModule(variant, b, config),
      TicketsModule,
      OrdersModule,
    ]);
    return { app, config };
  }

  const ledger = (config: ExampleConfig) =>
    readFileSync(join(config.dataDir, 'ledger.log'), 'utf8');

  async function placesAnOrder(app: INestApplication, config: ExampleConfig) {
    const expectedStore = backend().store;
    const placed = await request(app.getHttpServer())
      .post('/orders')
      .send({ show: 'Hamlet', seats: 2 })
      .expect(201);
    expect(placed.body).toMatchObject({
      status: 'done',
      step: 3,
      state: { show: 'Hamlet', seats: 2, note: 'tickets sent' },
    });
    // The provider's charge id, made once for the charge's idempotency key.
    expect(placed.body.state.payment).toMatch(/^ch_[0-9a-f]{16}$/);
    expect(app.get(PaymentProvider).all()).toEqual([
      expect.objectContaining({
        id: placed.body.state.payment,
        amount: '80 EUR',
      }),
    ]);
    const shown = await request(app.getHttpServer())
      .get(`/orders/${placed.body.runId as string}`)
      .expect(200);
    expect(shown.body).toEqual(placed.body);
    // Stored where the module was told to store it.
    const store = app.get(CheckpointStore);
    expect(store).toBeInstanceOf(expectedStore);
    await expect(store.head(placed.body.runId)).resolves.toMatchObject({
      status: 'done',
      step: 3,
    });
    for (const tool of ['hold_seats', 'charge_card', 'email_tickets'])
      expect(ledgerLines(ledger(config), tool)).toHaveLength(1);
    return placed.body.runId as string;
  }

  describe(`${name}: the example's HTTP API`, () => {
    for (const variant of VARIANTS) {
      it(`${variant}: POST /orders runs the tickets flow to its end`, async () => {
        const { app, config } = await boot(variant);
        await placesAnOrder(app, config);
      });
    }

    it('bad input is a 400 naming every violation, and nothing is stored', async () => {
      const { app, config } = await boot('forRoot');
      const server = app.getHttpServer();
      const runId = await placesAnOrder(app, config);
      const bad = await request(server)
        .post('/orders')
        .send({ show: '', seats: 11 })
        .expect(400);
      expect(bad.body.error).toBe('InvalidFlowState');
      expect(bad.body.violations).toEqual([
        { path: 'show', messages: [expect.stringMatching(/show/)] },
        { path: 'seats', messages: [expect.stringMatching(/seats/)] },
      ]);
      const listed = await request(server).get('/orders').expect(200);
      expect(listed.body.runs.map((r: { runId: string }) => r.runId)).toEqual([
        runId,
      ]);
      await request(server).get('/orders/no-such-order').expect(404);
      // An id no run can have (odd characters, too long): no order either, not a 500.
      for (const odd of ['%7Bodd%7D', 'x'.repeat(201), 'a%20b']) {
        await request(server).get(`/orders/${odd}`).expect(404);
        await request(server)
          .post(`/orders/${odd}/recover`)
          .send({})
          .expect(404);
      }
      await request(server).get('/orders?status=lost').expect(400);
      expect(ledgerLines(ledger(config), 'hold_seats')).toHaveLength(1);
    });

    it('an Idempotency-Key makes a retried order find its run (charged once); ?wait=false answers 202 with its URL', async () => {
      const { app, config } = await boot('forRoot');
      const server = app.getHttpServer();
      const order = { show: 'Hamlet', seats: 2 };
      const key = `order-${Date.now()}`;
      const first = await request(server)
        .post('/orders')
        .set('Idempotency-Key', key)
        .send(order)
        .expect(201);
      expect(first.body).toMatchObject({ runId: key, status: 'done' });
      // The client never heard back and sends the same request again.
      const retried = await request(server)
        .post('/orders')
        .set('Idempotency-Key', key)
        .send(order)
        .expect(201);
      expect(retried.body).toEqual(first.body);
      expect(ledgerLines(ledger(config), 'charge_card')).toHaveLength(1);
      // The same key for another order is a conflict that says so.
      const other = await request(server)
        .post('/orders')
        .set('Idempotency-Key', key)
        .send({ show: 'Hamlet', seats: 3 })
        .expect(409);
      expect(other.body.message).toMatch(/started from another input/);
      await request(server)
        .post('/orders')
        .set('Idempotency-Key', 'no spaces {please}')
        .send(order)
        .expect(400);
      await request(server).post('/orders?wait=maybe').send(order).expect(400);
      expect(ledgerLines(ledger(config), 'charge_card')).toHaveLength(1);

      const accepted = await request(server)
        .post('/orders?wait=false')
        .send({ show: 'Lear', seats: 1 })
        .expect(202);
      expect(accepted.body).toMatchObject({ status: 'running', step: 0 });
      expect(accepted.headers.location).toBe(
        `/orders/${accepted.body.runId as string}`,
      );
      let shown: { status: string } = { status: 'running' };
      for (let i = 0; i < 200 && shown.status !== 'done'; i++) {
        await new Promise((resolve) => setTimeout(resolve, 25));
        shown = (
          await request(server).get(accepted.headers.location!).expect(200)
        ).body as { status: string };
      }
      expect(shown).toMatchObject({
        status: 'done',
        state: { note: 'tickets sent' },
      });
      expect(ledgerLines(ledger(config), 'charge_card')).toHaveLength(2);
    });

    it('?queue=true answers 202 with the order URL at once; a worker takes it from the queue; a retried key finds it', async () => {
      const { app, config } = await boot('forRoot');
      const server = app.getHttpServer();
      const key = `queued-${Date.now()}`;
      const order = { show: 'Macbeth', seats: 1 };
      const accepted = await request(server)
        .post('/orders?queue=true')
        .set('Idempotency-Key', key)
        .send(order)
        .expect(202);
      expect(accepted.body).toEqual({ runId: key, queued: true });
      expect(accepted.headers.location).toBe(`/orders/${key}`);
      const retried = await request(server)
        .post('/orders?queue=true')
        .set('Idempotency-Key', key)
        .send(order)
        .expect(202);
      expect(retried.body).toEqual({ runId: key, queued: true });
      const second = await request(server)
        .post('/orders?queue=true')
        .send({ show: 'Macbeth', seats: 2 })
        .expect(202);
      await request(server).post('/orders?queue=maybe').send(order).expect(400);
      const done = async (url: string) => {
        for (let i = 0; i < 400; i++) {
          const shown = (await request(server).get(url).expect(200)).body as {
            status: string;
          };
          if (shown.status === 'done') return shown;
          await new Promise((resolve) => setTimeout(resolve, 25));
        }
        throw new Error(`${url} did not finish`);
      };
      await done(accepted.headers.location!);
      await done(second.headers.location!);
      // Two orders, each charged once; one show, one at a time (the queue's perKey: 1).
      expect(ledgerLines(ledger(config), 'charge_card')).toHaveLength(2);
      const heads = await Promise.all(
        [key, second.body.runId as string].map((id) =>
          app.get(CheckpointStore).head(id),
        ),
      );
      expect(heads.map((h) => h?.queue?.name)).toEqual(['tickets', 'tickets']);
      const [first, next] = heads.map((h) => h!.queue!.admittedAt!);
      expect(next! >= first! && heads[0]!.updatedAt <= next!).toBe(true);
    });
  });
}

describe('the example AppModule itself (so the example cannot rot)', () => {
  let app: INestApplication | undefined;
  const config = exampleConfig();
  afterAll(async () => {
    await app?.close();
    rmSync(config.dataDir, { recursive: true, force: true });
  });

  it('boots as main.ts boots it, takes an order over HTTP and lists it', async () => {
    const moduleRef = await Test.createTestingModule({ imports: [AppModule] })
      .overrideProvider(EXAMPLE_CONFIG)
      .useValue(config)
      .setLogger(new CaptureLogger())
      .compile();
    app = moduleRef.createNestApplication({ logger: new CaptureLogger() });
    await app.init();
    await app.get(RecoveryOrchestrator).waitUntilRecovered();
    const server = app.getHttpServer();
    const placed = await request(server)
      .post('/orders')
      .send({ show: 'Lear', seats: 1 })
      .expect(201);
    expect(placed.body).toMatchObject({ status: 'done', step: 3 });
    const listed = await request(server).get('/orders?status=done').expect(200);
    expect(listed.body.runs).toEqual([
      expect.objectContaining({ runId: placed.body.runId, flow: 'tickets' }),
    ]);
    // On the SQLite file of the configured data folder.
    expect(app.get(CheckpointStore)).toBeInstanceOf(SQLiteCheckpointStore);
    expect(readFileSync(join(config.dataDir, 'ledger.log'), 'utf8')).toMatch(
      /charge_card: charged 40 EUR for Lear/,
    );

    // The support agent (a durable tool loop on the same store) looks the order up...
    const orderId = placed.body.runId as string;
    const status = await request(server)
      .post('/support')
      .send({ message: `Where is my order ${orderId}?` })
      .expect(201);
    expect(status.body).toMatchObject({
      status: 'done',
      reply: { content: expect.stringContaining(`order ${orderId} is done`) },
      modelCalls: 2,
    });
    // ...and a refund waits for a person: the conversation pauses, nothing is refunded yet.
    const asked = await request(server)
      .post('/support')
      .send({ message: `Please refund order ${orderId}` })
      .expect(201);
    expect(asked.body).toMatchObject({
      status: 'paused',
      pending: { tool: 'refund_order', args: { orderId } },
    });
    const ledger = () =>
      readFileSync(join(config.dataDir, 'ledger.log'), 'utf8');
    expect(ledgerLines(ledger(), 'refund_order')).toHaveLength(0);
    const chat = asked.body.runId as string;
    await request(server)
      .post(`/support/${chat}/decision`)
      .send({ approved: 'yes' })
      .expect(400);
    const decided = await request(server)
      .post(`/support/${chat}/decision`)
      .send({ approved: true, by: 'ana' })
      .expect(201);
    expect(decided.body).toMatchObject({
      status: 'done',
      reply: { content: `Done: order ${orderId} was refunded.` },
    });
    // A second decision finds nothing waiting; the refund ran once.
    await request(server)
      .post(`/support/${chat}/decision`)
      .send({ approved: true, by: 'bob' })
      .expect(409);
    expect(ledgerLines(ledger(), 'refund_order')).toHaveLength(1);
  });
});

describe("the example's input: refused cleanly, logged as what it is", () => {
  const config = exampleConfig();
  const logger = new CaptureLogger();
  let app: INestApplication;
  let consoleError: jest.SpyInstance;
  beforeAll(async () => {
    const moduleRef = await Test.createTestingModule({ imports: [AppModule] })
      .overrideProvider(EXAMPLE_CONFIG)
      .useValue(config)
      .setLogger(logger)
      .compile();
    app = moduleRef.createNestApplication({ logger });
    // As under `npm start` (no NODE_ENV): jest's NODE_ENV=test would silence Express's own logging.
    const express = app.getHttpAdapter().getInstance() as {
      set(key: string, value: string): void;
    };
    express.set('env', 'development');
    await app.init();
    await app.get(RecoveryOrchestrator).waitUntilRecovered();
  });
  beforeEach(() => {
    logger.lines.length = 0;
    // Express prints errors of its own middleware (the body parser) with console.error.
    consoleError = jest.spyOn(console, 'error').mockImplementation(() => {});
  });
  afterEach(() => consoleError.mockRestore());
  afterAll(async () => {
    await app.close();
    rmSync(config.dataDir, { recursive: true, force: true });
  });

  const orders = async () =>
    (await request(app.getHttpServer()).get('/orders').expect(200)).body
      .runs as unknown[];
  /** Error-level lines, and any line that carries a stack. */
  const serverErrors = () => [
    ...logger.lines.filter((l) => l.level === 'error' || l.trace),
    ...consoleError.mock.calls,
  ];

  it('an unknown field is a 400 naming it, and nothing is stored', async () => {
    const refused = await request(app.getHttpServer())
      .post('/orders')
      .send({ show: 'Hamlet', seats: 2, discount: 100 })
      .expect(400);
    expect(refused.body.violations).toEqual([
      { path: 'discount', messages: [expect.stringMatching(/discount/)] },
    ]);
    expect(await orders()).toEqual([]);
    expect(serverErrors()).toEqual([]);
  });

  it('a string where a number belongs is one message for that field', async () => {
    const refused = await request(app.getHttpServer())
      .post('/orders')
      .send({ show: 'Hamlet', seats: 'x' })
      .expect(400);
    expect(refused.body.violations).toEqual([
      { path: 'seats', messages: ['seats must be an integer number'] },
    ]);
    expect(await orders()).toEqual([]);
    expect(serverErrors()).toEqual([]);
  });

  it("a run of another flow (the support agent's) is no order: 404", async () => {
    const server = app.getHttpServer();
    const chat = await request(server)
      .post('/support')
      .send({ message: 'Where is my order 42?' })
      .expect(201);
    const runId = chat.body.runId as string;
    const missing = await request(server).get(`/orders/${runId}`).expect(404);
    expect(missing.body.message).toBe(`no order ${runId}`);
    expect(serverErrors()).toEqual([]);
  });

  it('POST /orders/:id/resolve: its body is checked like the others (400, nothing stored); no order is a 404, an order that ended a 409', async () => {
    const server = app.getHttpServer();
    const placed = await request(server)
      .post('/orders')
      .send({ show: 'Hamlet', seats: 1 })
      .expect(201);
    const runId = placed.body.runId as string;
    const resolve = (id: string, body: object) =>
      request(server).post(`/orders/${id}/resolve`).send(body);

    const unknown = await resolve(runId, {
      call: 'pay#0',
      ran: false,
      force: true,
    }).expect(400);
    expect(unknown.body.violations).toEqual([
      { path: 'force', messages: ['property force should not exist'] },
    ]);
    const typed = await resolve(runId, { call: 'pay', ran: 'yes' }).expect(400);
    expect(typed.body.violations).toEqual([
      { path: 'call', messages: ['call must be a call id, node#index'] },
      { path: 'ran', messages: ['ran must be a boolean value'] },
    ]);
    const nested = await resolve(runId, {
      call: 'pay#0',
      ran: true,
      error: { name: 'Declined', code: 51 },
    }).expect(400);
    expect(nested.body.violations.map((v: { path: string }) => v.path)).toEqual(
      ['error.code', 'error.message'],
    );
    // The runner's own check (a call that did not run returned nothing): its message, a 400.
    const contradictory = await resolve(runId, {
      call: 'pay#0',
      ran: false,
      result: 'ch_1',
    }).expect(400);
    expect(contradictory.body.message).toMatch(/did not run has no result/);
    // An order that ended has nothing in doubt.
    const ended = await resolve(runId, { call: 'pay#0', ran: false });
    expect([ended.status, ended.body.message]).toEqual([
      409,
      expect.stringMatching(/done/),
    ]);
    const chat = await request(server)
      .post('/support')
      .send({ message: 'Where is my order 42?' })
      .expect(201);
    await resolve(chat.body.runId as string, {
      call: 'x#0',
      ran: false,
    }).expect(404);
    await resolve('no-such-order', { call: 'pay#0', ran: false }).expect(404);
    expect(
      (await request(server).get(`/orders/${runId}`).expect(200)).body,
    ).toEqual(placed.body); // nothing was stored
    expect(serverErrors()).toEqual([]);
  });

  it('a body too large is a 413, not logged as a server error', async () => {
    await request(app.getHttpServer())
      .post('/orders')
      .set('content-type', 'application/json')
      .send(JSON.stringify({ show: 'x'.repeat(200_000), seats: 1 }))
      .expect(413);
    expect(serverErrors()).toEqual([]);
  });
});

describe('SQLite file (the example default)', () => {
  httpSuite(
    'sqlite',
    () => ({
      appImports: () => [],
      direct: (config) => ({ type: 'sqlite', path: runsDb(config) }),
      inject: [],
      fromInjected: (config) => ({ type: 'sqlite', path: runsDb(config) }),
      store: SQLCheckpointStore,
    }),
    async () => undefined,
  );
});

describeWithService('postgres', 'Postgres through @nestjs/typeorm', () => {
  const schemas: string[] = [];
  const schema = () => {
    const s = suiteId('aa_http');
    schemas.push(s);
    return s;
  };
  httpSuite(
    'postgres',
    () => ({
      appImports: () => [
        TypeOrmModule.forRoot({ type: 'postgres', url: DATABASE_URL }),
      ],
      direct: () => ({ type: 'postgres', url: DATABASE_URL, schema: schema() }),
      inject: [DataSource],
      // Reusing the application's connection is one line:
      fromInjected: (_config, dataSource) => ({
        type: 'postgres',
        dataSource: dataSource as DataSource,
        schema: schema(),
      }),
      store: SQLCheckpointStore,
    }),
    async () => {
      const ds = new DataSource({ type: 'postgres', url: DATABASE_URL });
      await ds.initialize();
      for (const s of schemas)
        await ds.query(`DROP SCHEMA IF EXISTS "${s}" CASCADE`);
      await ds.destroy();
    },
  );
});

describeWithService('redis', 'Redis', () => {
  const prefixes: string[] = [];
  const prefix = () => {
    const p = suiteId('aa_http');
    prefixes.push(p);
    return p;
  };
  httpSuite(
    'redis',
    () => ({
      appImports: () => [],
      direct: () => ({ type: 'redis', url: REDIS_URL, prefix: prefix() }),
      inject: [],
      fromInjected: () => ({
        type: 'redis',
        client: () => new Redis(REDIS_URL),
        prefix: prefix(),
        ttlSeconds: 3600,
      }),
      store: RedisCheckpointStore,
    }),
    async () => {
      const client = new Redis(REDIS_URL);
      for (const p of prefixes) await dropPrefix(client, p);
      await client.quit();
    },
  );
});
