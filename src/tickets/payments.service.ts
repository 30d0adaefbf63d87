import { Injectable } from '@nestjs/common';
import { idempotencyKey } from 'agent-adapter';
import { Tool } from 'agent-adapter/nest';
import { Ledger } from './ledger';
import { ChargeArgs } from './order.state';
import { PaymentProvider } from './payment-provider';

@Injectable()
export class Payments {
  constructor(
    private readonly ledger: Ledger,
    private readonly provider: PaymentProvider,
  ) {}

  /**
   * Not idempotent as far as the library knows: a charge that may or may not have happened stops
   * recovery until someone checks (at the provider, by its idempotency key) and says what it did.
   * The provider is given `idempotencyKey()`, so even a charge run again is charged once.
   * Returns the provider's charge id.
   */
  @Tool({
    name: 'charge_card',
    args: ChargeArgs,
    description: 'Charges the customer 40 EUR per seat.',
  })
  async charge(a: ChargeArgs): Promise<string> {
    const amount = `${a.seats * 40} EUR`;
    let id = '';
    await this.ledger.act('charge_card', () => {
      const { charge, created } = this.provider.charge(
        idempotencyKey(),
        amount,
        `${a.seats} seats for ${a.show}`,
      );
      id = charge.id;
      return created
        ? `charged ${amount} for ${a.show} (${charge.id})`
        : `the provider returned ${charge.id}, made with this key before; not charged again`;
    });
    return id;
  }
}
