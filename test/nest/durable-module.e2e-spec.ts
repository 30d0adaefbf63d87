import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Inject, Injectable, Module } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import {
  CheckpointKeyError,
  CheckpointNotFound,
  FlowError,
  InvalidFlowState,
  SQLCheckpointStore,
  SQLiteCheckpointStore,
  type CheckpointSavedEvent,
} from 'agent-adapter';
import {
  CheckpointStore,
  DurableEvents,
  DurableModule,
  DurableSetupError,
  Flow,
  FlowRegistry,
  FlowRunner,
  InvalidToolArguments,
  Node,
  RecoveryOrchestrator,
  ToolLoopRunner,
  ToolRegistry,
  type DurableModuleOptions,
  type DurableOptionsFactory,
} from 'agent-adapter/nest';
import {
  KEY,
  Ledger,
  Mail,
  Order,
  Payments,
  Seats,
  TicketsFlow,
  TicketsModule,
} from './fixtures/tickets.fixtures';
import { Apps } from './utils';

/** A consumer that injects the runner by type, as an application's service or controller does. */
@Injectable()
class OrdersService {
  constructor(readonly runner: FlowRunner) {}

  place(order: Partial<Order>) {
    return this.runner.start<Order>(TicketsFlow, order);
  }
}

@Module({ providers: [OrdersService] })
class OrdersModule {}

/** Stands in for ConfigModule: the async variants read their options from it. */
const CONFIG = Symbol('CONFIG');
interface AppConfig {
  runsDb: string;
  key: string;
}

@Injectable()
class DurableConfig implements DurableOptionsFactory {
  constructor(@Inject(CONFIG) private readonly config: AppConfig) {}

  createDurableOptions(): DurableModuleOptions {
    return {
      store: { type: 'sqlite', path: this.config.runsDb },
      key: this.config.key,
    };
  }
}

describe('DurableModule (e2e)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'aa-nest-'));
  let n = 0;
  const dbFile = () => join(dir, `runs-${++n}.db`);
  const apps = new Apps();
  afterEach(() => apps.closeAll());
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  function configModule(config: AppConfig) {
    @Module({
      providers: [{ provide: CONFIG, useValue: config }, DurableConfig],
      exports: [CONFIG, DurableConfig],
    })
    class ConfigModule {}
    return ConfigModule;
  }

  /** Runs the tickets flow to the end through the injected runner and checks what ran. */
  async function runsTickets(
    app: Awaited<ReturnType<Apps['boot']>>,
    ledger: Ledger,
  ) {
    const orders = app.get(OrdersService);
    const result = await orders.place({ show: 'Hamlet', seats: 2 });
    expect(result).toMatchObject({
      status: 'done',
      state: { note: 'sent Hamlet', receipt: 'receipt for Hamlet' },
    });
    expect(result.state).toBeInstanceOf(Order);
    for (const tool of [
      'hold_seats',
      'charge_card',
      'print_receipt',
      'email_tickets',
    ]) {
      expect(ledger.count(tool)).toBe(1);
    }
    // Every tool ran inside the run: idempotencyKey() was available to each.
    expect(ledger.entries.every((e) => typeof e.key === 'string')).toBe(true);
    await expect(orders.runner.get(result.runId)).resolves.toMatchObject({
      status: 'done',
      step: 3,
    });
    // An odd run id is refused as run refuses it, before the store is read.
    await expect(orders.runner.get('a{b}')).rejects.toThrow(
      /^Run id "a\{b\}" is invalid: use 1-200 letters/,
    );
    return result;
  }

  describe('forRoot', () => {
    it('memory store: a flow of three @Node methods runs to done through the injected FlowRunner', async () => {
      const ledger = new Ledger();
      const app = await apps.boot([
        DurableModule.forRoot({ store: { type: 'memory' } }),
        TicketsModule.with(ledger),
        OrdersModule,
      ]);
      await runsTickets(app, ledger);
    });

    it('sqlite store (temp file): the run is stored in the file', async () => {
      const ledger = new Ledger();
      const app = await apps.boot([
        DurableModule.forRoot({
          store: { type: 'sqlite', path: dbFile() },
          key: KEY,
        }),
        TicketsModule.with(ledger),
        OrdersModule,
      ]);
      const { runId } = await runsTickets(app, ledger);
      const store = app.get(CheckpointStore);
      await expect(store.head(runId)).resolves.toMatchObject({
        flow: 'tickets',
        status: 'done',
      });
      expect(app.get(FlowRunner).store).toBe(store);
    });

    it('starts a flow by name and reads any run back with get(runId)', async () => {
      const app = await apps.boot([
        DurableModule.forRoot({ store: { type: 'memory' } }),
        TicketsModule.with(new Ledger()),
      ]);
      const runner = app.get(FlowRunner);
      expect(runner.flowNames()).toEqual(['tickets']);
      const r = await runner.start<Order>(
        'tickets',
        { show: 'Lear', seats: 1 },
        { runId: 'order-7', ctx: { user: 'u1' } },
      );
      expect(r.runId).toBe('order-7');
      await expect(runner.get<Order>('order-7')).resolves.toMatchObject({
        status: 'done',
        state: { note: 'sent Lear' },
      });
    });

    it('provides the FlowRegistry that FlowRunner looks flows up in', async () => {
      const app = await apps.boot([
        DurableModule.forRoot({ store: { type: 'memory' } }),
        TicketsModule.with(new Ledger()),
      ]);
      const flows = app.get(FlowRegistry);
      expect(flows.names()).toEqual(['tickets']);
      const tickets = flows.get(TicketsFlow);
      expect(tickets).toBe(flows.get('tickets'));
      expect(tickets?.where).toBe('TicketsFlow (TicketsModule)');
      expect(app.get(FlowRunner).flow(TicketsFlow)).toBe(tickets?.flow);
    });

    it('is global by default: a module that does not import it injects FlowRunner', async () => {
      const app = await apps.boot([
        DurableModule.forRoot({ store: { type: 'memory' } }),
        OrdersModule,
      ]);
      expect(app.get(OrdersService).runner).toBeInstanceOf(FlowRunner);
    });

    it('isGlobal: false keeps it to the modules that import it', async () => {
      await expect(
        Test.createTestingModule({
          imports: [
            DurableModule.forRoot({
              store: { type: 'memory' },
              isGlobal: false,
            }),
            OrdersModule,
          ],
        }).compile(),
      ).rejects.toThrow(/OrdersService/);
    });
  });

  describe('forRootAsync', () => {
    it('useFactory with imports and inject', async () => {
      const ledger = new Ledger();
      const config = { runsDb: dbFile(), key: KEY };
      const app = await apps.boot([
        DurableModule.forRootAsync({
          imports: [configModule(config)],
          inject: [CONFIG],
          useFactory: (c: AppConfig) => ({
            store: { type: 'sqlite', path: c.runsDb },
            key: c.key,
          }),
        }),
        TicketsModule.with(ledger),
        OrdersModule,
      ]);
      await runsTickets(app, ledger);
    });

    it('useClass', async () => {
      const ledger = new Ledger();
      const app = await apps.boot([
        DurableModule.forRootAsync({
          imports: [configModule({ runsDb: dbFile(), key: KEY })],
          useClass: DurableConfig,
        }),
        TicketsModule.with(ledger),
        OrdersModule,
      ]);
      await runsTickets(app, ledger);
    });

    it('useExisting', async () => {
      const ledger = new Ledger();
      const app = await apps.boot([
        DurableModule.forRootAsync({
          imports: [configModule({ runsDb: dbFile(), key: KEY })],
          useExisting: DurableConfig,
        }),
        TicketsModule.with(ledger),
        OrdersModule,
      ]);
      await runsTickets(app, ledger);
    });

    it('refuses options with no variant, with a clear error', () => {
      expect(() => DurableModule.forRootAsync({ imports: [] })).toThrow(
        DurableSetupError,
      );
      expect(() => DurableModule.forRootAsync({})).toThrow(
        /useFactory, useClass or useExisting/,
      );
    });

    it('takes the extras (recoverOnBoot) from the async options too', async () => {
      const app = await apps.boot([
        DurableModule.forRootAsync({
          useFactory: () => ({ store: { type: 'memory' as const } }),
          recoverOnBoot: false,
        }),
      ]);
      const orchestrator = app.get(RecoveryOrchestrator);
      await expect(orchestrator.waitUntilRecovered()).resolves.toBeUndefined();
    });
  });

  describe('shutdown', () => {
    it('closes a store it created, not one the application passed', async () => {
      const close = jest.spyOn(SQLCheckpointStore.prototype, 'close');
      const own = await apps.boot([
        DurableModule.forRoot({
          store: { type: 'sqlite', path: dbFile() },
          key: KEY,
        }),
      ]);
      await own.close();
      expect(close).toHaveBeenCalledTimes(1);

      const given = new SQLiteCheckpointStore(dbFile());
      const app = await apps.boot([
        DurableModule.forRoot({ store: given, key: KEY }),
      ]);
      await app.close();
      expect(close).toHaveBeenCalledTimes(1);
      await given.close();
      close.mockRestore();
    });

    it('closes a store it created from forRootAsync options, not an instance the factory returned', async () => {
      const close = jest.spyOn(SQLCheckpointStore.prototype, 'close');
      const own = await apps.boot([
        DurableModule.forRootAsync({
          useFactory: () => ({
            store: { type: 'sqlite' as const, path: dbFile() },
            key: KEY,
          }),
        }),
      ]);
      await own.close();
      expect(close).toHaveBeenCalledTimes(1);

      const given = new SQLiteCheckpointStore(dbFile());
      const app = await apps.boot([
        DurableModule.forRootAsync({
          useFactory: () => ({ store: given, key: KEY }),
        }),
      ]);
      await app.close();
      expect(close).toHaveBeenCalledTimes(1);
      await given.close();
      close.mockRestore();
    });

    it('closes its store only after every lease renewal has stopped', async () => {
      const order: string[] = [];
      const closeStore = SQLCheckpointStore.prototype.close;
      const close = jest
        .spyOn(SQLCheckpointStore.prototype, 'close')
        .mockImplementation(function (this: SQLCheckpointStore) {
          order.push('store closed');
          return closeStore.call(this);
        });
      const app = await apps.boot([
        DurableModule.forRoot({
          store: { type: 'sqlite', path: dbFile() },
          key: KEY,
        }),
      ]);
      const core = app.get(FlowRunner).core;
      const drainRunner = core.drain.bind(core);
      jest.spyOn(core, 'drain').mockImplementation(async (options) => {
        const left = await drainRunner(options);
        order.push('runner drained, leases stopped');
        return left;
      });
      const loops = app.get(ToolLoopRunner);
      const drainLoops = loops.drain.bind(loops);
      jest.spyOn(loops, 'drain').mockImplementation((ms) => {
        order.push('loops draining');
        return drainLoops(ms);
      });
      await app.close();
      expect(order).toEqual([
        'loops draining',
        'runner drained, leases stopped',
        'store closed',
      ]);
      close.mockRestore();
    });

    it('drains the runner (drainMs, default 10 s) before shutdown', async () => {
      const app = await apps.boot([
        DurableModule.forRoot({ store: { type: 'memory' }, drainMs: 2_500 }),
      ]);
      const drain = jest.spyOn(app.get(FlowRunner).core, 'drain');
      await app.close();
      expect(drain).toHaveBeenCalledWith({ deadlineMs: 2_500 });
    });
  });

  describe('bootstrap errors', () => {
    const compile = (options: DurableModuleOptions) =>
      Test.createTestingModule({
        imports: [DurableModule.forRoot(options)],
      }).compile();

    it('a shared store without a key', async () => {
      await expect(
        compile({ store: { type: 'sqlite', path: dbFile() } }),
      ).rejects.toThrow(/"key" is required.*at least 32 bytes/);
    });

    it('a key shorter than 32 bytes', async () => {
      await expect(
        compile({ store: { type: 'sqlite', path: dbFile() }, key: 'short' }),
      ).rejects.toThrow(CheckpointKeyError);
    });

    it('an unknown store type, naming the valid ones', async () => {
      await expect(
        compile({
          store: { type: 'mongo' } as unknown as DurableModuleOptions['store'],
        }),
      ).rejects.toThrow(
        'unknown store type "mongo". Valid types: "memory", "sqlite", "postgres", "redis"',
      );
    });

    it('a missing store', async () => {
      await expect(compile({} as DurableModuleOptions)).rejects.toThrow(
        /"store" option is missing/,
      );
    });

    it('a bad leaseMs', async () => {
      await expect(
        compile({ store: { type: 'memory' }, leaseMs: 0 }),
      ).rejects.toThrow(/"leaseMs" must be an integer of at least 100/);
    });
  });

  describe('in the running application', () => {
    let ledger: Ledger;
    let app: Awaited<ReturnType<Apps['boot']>>;
    beforeEach(async () => {
      ledger = new Ledger();
      app = await apps.boot([
        DurableModule.forRoot({ store: { type: 'memory' } }),
        TicketsModule.with(ledger),
      ]);
    });

    it('a @Tool method called outside a run is a plain call: nothing is logged', async () => {
      const seats = app.get(Seats);
      // Synchronous method, synchronous result: not routed through the executor.
      expect(seats.left({ show: 'Hamlet' })).toBe(42);
      await expect(app.get(Mail).send({ show: 'Lear' })).resolves.toBe(
        'sent Lear',
      );
      expect(ledger.entries).toEqual([
        { tool: 'seats_left' },
        { tool: 'email_tickets' },
      ]);
      await expect(app.get(CheckpointStore).list()).resolves.toEqual({
        runs: [],
      });
    });

    it('validates a tool DTO outside a run (every violation named) and passes an instance', async () => {
      const payments = app.get(Payments);
      const refused = payments.charge({ show: '', seats: 0 });
      await expect(refused).rejects.toThrow(InvalidToolArguments);
      await expect(refused).rejects.toMatchObject({
        tool: 'charge_card',
        violations: [
          { path: 'show', messages: [expect.stringMatching(/empty/)] },
          { path: 'seats', messages: [expect.stringMatching(/1/)] },
        ],
      });
      expect(ledger.count('charge_card')).toBe(0);
      await expect(payments.charge({ show: 'Lear', seats: 1 })).resolves.toBe(
        'charged 1',
      );
    });

    it('refuses invalid input with every violation named, before anything is stored', async () => {
      const runner = app.get(FlowRunner);
      const refused = runner.start(TicketsFlow, { show: '', seats: 0 });
      await expect(refused).rejects.toThrow(InvalidFlowState);
      await expect(refused).rejects.toThrow(/show: .*\| seats: /);
      await expect(app.get(CheckpointStore).list()).resolves.toEqual({
        runs: [],
      });
      expect(ledger.entries).toEqual([]);
    });

    it('names the known flows when given one it does not know', () => {
      const runner = app.get(FlowRunner);
      expect(() => runner.flow('nope')).toThrow(FlowError);
      expect(() => runner.flow(OrdersService)).toThrow(
        /Class OrdersService is not a discovered @Flow. Known flows: "tickets"/,
      );
    });

    it('provides the ToolRegistry the decorators filled', () => {
      const registry = app.get(ToolRegistry);
      expect(registry.list().map((t) => t.name)).toEqual(
        expect.arrayContaining([
          'hold_seats',
          'seats_left',
          'charge_card',
          'print_receipt',
          'email_tickets',
        ]),
      );
      expect(registry.get('charge_card')).toMatchObject({
        idempotent: false,
        readOnly: false,
        description: 'Charges the card once per order.',
      });
      expect(registry.get('seats_left')).toMatchObject({
        idempotent: true,
        readOnly: true,
      });
    });

    it('emits checkpoint.saved on the injectable DurableEvents bus', async () => {
      const saved: CheckpointSavedEvent[] = [];
      const off = app
        .get(DurableEvents)
        .on('checkpoint.saved', (e) => saved.push(e));
      const { runId } = await app
        .get(FlowRunner)
        .start(TicketsFlow, { show: 'Hamlet', seats: 2 });
      off();
      expect(saved.map((e) => [e.runId, e.step, e.status])).toEqual([
        [runId, 0, 'running'],
        [runId, 1, 'running'],
        [runId, 2, 'running'],
        [runId, 3, 'done'],
      ]);
    });
  });

  it('validates tool arguments inside a run too: the node fails, nothing is logged', async () => {
    @Flow('refund')
    class RefundFlow {
      constructor(private readonly payments: Payments) {}

      @Node({ start: true, end: true })
      async refund(): Promise<Record<string, unknown>> {
        return {
          note: await this.payments.charge({ show: '', seats: 0 }),
        };
      }
    }
    const ledger = new Ledger();
    const app = await apps.boot(
      [
        DurableModule.forRoot({ store: { type: 'memory' } }),
        TicketsModule.with(ledger),
      ],
      { providers: [RefundFlow] },
    );
    const result = await app.get(FlowRunner).start(RefundFlow, {});
    expect(result).toMatchObject({
      status: 'failed',
      error: { name: 'InvalidToolArguments', node: 'refund' },
    });
    expect(ledger.entries).toEqual([]);
    const history = await app.get(CheckpointStore).history(result.runId);
    expect(history.calls).toEqual([]);
    // get with a flow: a run of another flow is not found, as an unknown id.
    const runner = app.get(FlowRunner);
    await expect(
      runner.get(result.runId, { flow: RefundFlow }),
    ).resolves.toMatchObject({ status: 'failed' });
    await expect(
      runner.get(result.runId, { flow: TicketsFlow }),
    ).rejects.toBeInstanceOf(CheckpointNotFound);
  });
});
