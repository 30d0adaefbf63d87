import { Injectable } from '@nestjs/common';
import { idempotencyKey } from 'agent-adapter';
import { Tool } from 'agent-adapter/nest';
import { Ledger, Outbox } from './ledger';

@Injectable()
export class Mail {
  constructor(
    private readonly ledger: Ledger,
    private readonly outbox: Outbox,
  ) {}

  /**
   * Made idempotent with `idempotencyKey()`: the key is the same on every worker and after every
   * recovery, and the mail provider sends one message per key. So a crash inside this call is
   * recovered by running it again, and the customer still gets one mail.
   */
  @Tool({
    name: 'email_tickets',
    idempotent: true,
    description: 'Mails the tickets to the customer.',
  })
  async send(a: { show: string; seats: number }): Promise<string> {
    await this.ledger.act('email_tickets', () =>
      this.outbox.sendOnce(
        idempotencyKey(),
        `Your ${a.seats} tickets for ${a.show}.\n`,
      )
        ? `mailed the tickets for ${a.show}`
        : `the provider already sent this mail; not sent again`,
    );
    return 'tickets sent';
  }
}
