import { Module } from '@nestjs/common';
import { Ledger, Outbox } from './ledger';
import { Mail } from './mail.service';
import { PaymentProvider } from './payment-provider';
import { Payments } from './payments.service';
import { Seats } from './seats.service';
import { TicketsFlow } from './tickets.flow';

/** The tickets feature: its tools and its flow. DurableModule discovers them. */
@Module({
  providers: [
    Ledger,
    Outbox,
    PaymentProvider,
    Seats,
    Payments,
    Mail,
    TicketsFlow,
  ],
  exports: [Ledger, PaymentProvider, Seats, Payments, Mail],
})
export class TicketsModule {}
