import { Injectable } from '@nestjs/common';
import { Tool } from 'agent-adapter/nest';
import { Ledger } from './ledger';

@Injectable()
export class Seats {
  constructor(private readonly ledger: Ledger) {}

  /** Holding the same seats twice holds them once, so a call in doubt may simply run again. */
  @Tool({
    name: 'hold_seats',
    idempotent: true,
    description: 'Holds seats for a show until the order is paid.',
  })
  async hold(a: { show: string; seats: number }): Promise<string> {
    await this.ledger.act('hold_seats', `held ${a.seats} seats for ${a.show}`);
    return `held ${a.seats} seats for ${a.show}`;
  }
}
