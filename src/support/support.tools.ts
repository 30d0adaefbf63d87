import { Injectable } from '@nestjs/common';
import { CheckpointNotFound } from 'agent-adapter';
import { FlowRunner, Tool } from 'agent-adapter/nest';
import { IsString, Matches } from 'class-validator';
import { Ledger } from '../tickets/ledger';
import type { Order } from '../tickets/order.state';

/** The arguments of both support tools: validated, and the JSON schema the model sees. */
export class OrderRef {
  @IsString()
  @Matches(/^[0-9a-f]{32}$/, {
    message: 'orderId must be an order id (32 hex digits)',
  })
  orderId!: string;
}

@Injectable()
export class SupportTools {
  constructor(
    private readonly orders: FlowRunner,
    private readonly ledger: Ledger,
  ) {}

  /** Reads only: after a crash it simply runs again. */
  @Tool({
    name: 'order_status',
    readOnly: true,
    args: OrderRef,
    description:
      'Looks up a ticket order: its status, show, seats and what happened last.',
  })
  async status({ orderId }: OrderRef): Promise<string> {
    try {
      const run = await this.orders.get<Order>(orderId);
      const { show, seats, note } = run.state;
      return `order ${orderId} is ${run.status}: ${seats} seat(s) for ${show}${note ? ` (${note})` : ''}`;
    } catch (error) {
      if (error instanceof CheckpointNotFound)
        return `there is no order ${orderId}`;
      throw error;
    }
  }

  /**
   * Money goes back to the customer: a person approves each refund. The run pauses until
   * `POST /support/:id/decision`, and the approved refund runs once.
   */
  @Tool({
    name: 'refund_order',
    approval: true,
    args: OrderRef,
    description: 'Refunds a ticket order to the card it was paid with.',
  })
  async refund({ orderId }: OrderRef): Promise<string> {
    await this.ledger.act('refund_order', `refunded order ${orderId}`);
    return `order ${orderId} was refunded`;
  }
}
