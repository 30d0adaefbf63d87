import { Flow, Node } from 'agent-adapter/nest';
import { Mail } from './mail.service';
import { Order } from './order.state';
import { Payments } from './payments.service';
import { Seats } from './seats.service';

/**
 * The spec's tickets flow: hold the seats, charge the card, mail the tickets. Each node returns
 * the state keys it changes; each step ends with a signed checkpoint.
 */
@Flow('tickets', { state: Order })
export class TicketsFlow {
  constructor(
    private readonly seats: Seats,
    private readonly payments: Payments,
    private readonly mail: Mail,
  ) {}

  @Node({ start: true, next: 'pay' })
  async hold(o: Order): Promise<Partial<Order>> {
    return { note: await this.seats.hold({ show: o.show, seats: o.seats }) };
  }

  @Node({ next: 'send' })
  async pay(o: Order): Promise<Partial<Order>> {
    const payment = await this.payments.charge({
      show: o.show,
      seats: o.seats,
    });
    return { payment, note: 'paid' };
  }

  @Node({ end: true })
  async send(o: Order): Promise<Partial<Order>> {
    return { note: await this.mail.send({ show: o.show, seats: o.seats }) };
  }
}
