import type { NodeContext } from 'agent-adapter';
import { Flow, Node } from 'agent-adapter/nest';
import { Mail } from './mail.service';
import { Order } from './order.state';
import { Payments } from './payments.service';
import { Seats } from './seats.service';

/**
 * The spec's tickets flow: hold the seats, charge the card, mail the tickets. Each node returns
 * the state keys it changes; each step ends with a signed checkpoint. `pay` and `send` call their
 * tool before doing anything else (`callsFirst`), so the checkpoint before each goes out with that
 * call's `started` record: one store round trip per step, and one for the step's progress entry.
 */
@Flow('tickets', {
  state: Order,
  // Orders placed with `POST /orders?queue=true`: at most 4 charging at once across every worker
  // on the store, at most one at a time per show.
  queue: { concurrency: 4, perKey: 1 },
})
export class TicketsFlow {
  constructor(
    private readonly seats: Seats,
    private readonly payments: Payments,
    private readonly mail: Mail,
  ) {}

  // Each step publishes its progress to the order's stream (GET /orders/:id/stream): once, however
  // often the step runs (a recovery runs it again).
  @Node({ start: true, next: 'pay' })
  async hold(o: Order, ctx: NodeContext): Promise<Partial<Order>> {
    const note = await this.seats.hold({ show: o.show, seats: o.seats });
    await ctx.publish({ step: 'held', note });
    return { note };
  }

  @Node({ next: 'send', callsFirst: true })
  async pay(o: Order, ctx: NodeContext): Promise<Partial<Order>> {
    const payment = await this.payments.charge({
      show: o.show,
      seats: o.seats,
    });
    await ctx.publish({ step: 'paid', payment });
    return { payment, note: 'paid' };
  }

  @Node({ end: true, callsFirst: true })
  async send(o: Order, ctx: NodeContext): Promise<Partial<Order>> {
    const note = await this.mail.send({ show: o.show, seats: o.seats });
    await ctx.publish({ step: 'sent', note });
    return { note };
  }
}
