import { Module } from '@nestjs/common';
import { TicketsModule } from '../tickets/tickets.module';
import { SupportAgent } from './support.agent';
import { SupportController } from './support.controller';
import { SupportTools } from './support.tools';

/** The support agent: a tool loop over the orders, with a person approving refunds. */
@Module({
  imports: [TicketsModule],
  providers: [SupportTools, SupportAgent],
  controllers: [SupportController],
})
export class SupportModule {}
