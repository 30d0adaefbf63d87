/**
 * A `@Tool` method called outside a run is a plain method call (DESIGN), so the README's
 * `Payments.charge` pattern must work there too (issue 15, item 5): `inRun() ? idempotencyKey() :
 * a.key` charges with the controller's own key when called directly, and with the durable key
 * when a node calls it inside a run. A bare `idempotencyKey()` called directly throws `NotInRun`
 * instead of making a key up.
 */
import { Body, Controller, Headers, Injectable, Post } from '@nestjs/common';
import {
  NotInRun,
  currentCall,
  idempotencyKey,
  inRun,
  type CurrentCall,
} from 'agent-adapter';
import {
  DurableModule,
  Flow,
  FlowRunner,
  Node,
  Tool,
} from 'agent-adapter/nest';
import request from 'supertest';
import { KEY } from './fixtures/tickets.fixtures';
import { Apps } from './utils';

interface Charge {
  show: string;
  seats: number;
  key: string;
  call?: CurrentCall;
}

/** The payment API: it takes an idempotency key and never gets a made-up one. */
const charges: Charge[] = [];

@Injectable()
class Payments {
  /** The README's pattern: the durable key in a run, the caller's own key called directly. */
  @Tool({ name: 'charge_card' })
  async charge(a: { show: string; seats: number; key?: string }) {
    const key = inRun() ? idempotencyKey() : a.key;
    if (key === undefined) throw new Error('no idempotency key');
    const call = currentCall();
    charges.push({ show: a.show, seats: a.seats, key, ...(call && { call }) });
    return `charged ${a.seats * 40} EUR`;
  }

  /** Without the check: fine in a run, NotInRun when called directly. */
  @Tool({ name: 'charge_bare' })
  async bare(a: { seats: number }) {
    return `charged ${a.seats * 40} EUR with ${idempotencyKey()}`;
  }
}

interface Order {
  show: string;
  seats: number;
  note?: string;
}

@Flow('tickets')
class TicketsFlow {
  constructor(private readonly payments: Payments) {}

  @Node({ start: true, end: true })
  async pay(o: Order) {
    return {
      note: await this.payments.charge({ show: o.show, seats: o.seats }),
    };
  }
}

@Controller('orders')
class OrdersController {
  constructor(
    private readonly runner: FlowRunner,
    private readonly payments: Payments,
  ) {}

  /** Inside a run: the flow charges. */
  @Post()
  async start(@Body() o: Order) {
    const r = await this.runner.start<Order>(TicketsFlow, o);
    return { runId: r.runId, note: r.state.note };
  }

  /** Outside a run: the tool method called directly, with the client's Idempotency-Key. */
  @Post('charge')
  async charge(@Body() o: Order, @Headers('idempotency-key') key: string) {
    return {
      inRun: inRun(),
      note: await this.payments.charge({ show: o.show, seats: o.seats, key }),
    };
  }

  @Post('charge-bare')
  async bare(@Body() o: Order) {
    try {
      return { note: await this.payments.bare({ seats: o.seats }) };
    } catch (e) {
      return {
        error: (e as Error).name,
        notInRun: e instanceof NotInRun,
        message: (e as Error).message,
      };
    }
  }
}

describe('idempotencyKey() in a @Tool method called outside a run (Nest)', () => {
  const apps = new Apps();
  afterEach(() => apps.closeAll());
  beforeEach(() => (charges.length = 0));

  const boot = () =>
    apps.boot(
      [DurableModule.forRoot({ store: { type: 'memory' }, key: KEY })],
      {
        providers: [Payments, TicketsFlow],
        controllers: [OrdersController],
      },
    );

  it('called directly from a controller, the README pattern charges with the caller’s key', async () => {
    const app = await boot();
    const res = await request(app.getHttpServer())
      .post('/orders/charge')
      .set('Idempotency-Key', 'client-key-1')
      .send({ show: 'Hamlet', seats: 2 })
      .expect(201);
    expect(res.body).toEqual({ inRun: false, note: 'charged 80 EUR' });
    expect(charges).toEqual([
      { show: 'Hamlet', seats: 2, key: 'client-key-1' },
    ]);
  });

  it('called by a node inside a run, the same method charges with the durable key', async () => {
    const app = await boot();
    const res = await request(app.getHttpServer())
      .post('/orders')
      .send({ show: 'Hamlet', seats: 2 })
      .expect(201);
    expect(res.body.note).toBe('charged 80 EUR');
    expect(charges).toHaveLength(1);
    const [charge] = charges;
    expect(charge!.call).toEqual({
      runId: res.body.runId,
      superstep: expect.any(Number),
      node: 'pay',
      index: 0,
      tool: 'charge_card',
    });
    expect(typeof charge!.key).toBe('string');
    expect(charge!.key.length).toBeGreaterThanOrEqual(32);
    // Not derivable from the run id, and another run gets another key.
    expect(charge!.key).not.toContain(res.body.runId);
    await request(app.getHttpServer())
      .post('/orders')
      .send({ show: 'Hamlet', seats: 2 })
      .expect(201);
    expect(charges[1]!.key).not.toBe(charge!.key);
  });

  it('a bare idempotencyKey() in a method called directly throws NotInRun, not a made-up key', async () => {
    const app = await boot();
    const res = await request(app.getHttpServer())
      .post('/orders/charge-bare')
      .send({ show: 'Hamlet', seats: 2 })
      .expect(201);
    expect(res.body.error).toBe('NotInRun');
    expect(res.body.notInRun).toBe(true);
    expect(res.body.message).toMatch(/outside a durable run's tool call/);
    expect(res.body.message).toMatch(/inRun\(\)/);
  });
});
