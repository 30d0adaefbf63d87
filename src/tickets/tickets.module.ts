import { Module } from '@nestjs/common';
import { Ledger, Outbox } from './ledger';
import { Mail } from './mail.service';
import { Payments } from './payments.service';
import { Seats } from './seats.service';
import { TicketsFlow } from './tickets.flow';

/** The tickets feature: its tools and its flow. DurableModule discovers them. */
@Module({
  providers: [Ledger, Outbox, Seats, Payments, Mail, TicketsFlow],
  exports: [Ledger, Seats, Payments, Mail],
})
export class TicketsModule {}
