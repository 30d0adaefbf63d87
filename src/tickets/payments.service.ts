import { Injectable } from '@nestjs/common';
import { idempotencyKey } from 'agent-adapter';
import { Tool } from 'agent-adapter/nest';
import { Ledger } from './ledger';
import { ChargeArgs } from './order.state';

@Injectable()
export class Payments {
  constructor(private readonly ledger: Ledger) {}

  /**
   * Not idempotent: a charge that may or may not have happened stops recovery until someone
   * checks. A real payment API would take `idempotencyKey()` as its Idempotency-Key header.
   */
  @Tool({
    name: 'charge_card',
    args: ChargeArgs,
    description: 'Charges the customer 40 EUR per seat.',
  })
  async charge(a: ChargeArgs): Promise<string> {
    const amount = `${a.seats * 40} EUR`;
    await this.ledger.act('charge_card', `charged ${amount} for ${a.show}`);
    return `payment ${idempotencyKey().slice(0, 8)}: ${amount}`;
  }
}
