import {
  BadRequestException,
  Body,
  Controller,
  Get,
  Param,
  ParseIntPipe,
  Post,
  Query,
  UseFilters,
  DefaultValuePipe,
} from '@nestjs/common';
import type { RunPage, RunResult, RunStatus } from 'agent-adapter';
import {
  CheckpointStore,
  DurableHttpExceptionFilter,
  FlowRunner,
} from 'agent-adapter/nest';
import { Order } from '../tickets/order.state';
import { TicketsFlow } from '../tickets/tickets.flow';

const STATUSES: readonly RunStatus[] = ['running', 'paused', 'done', 'failed'];

@Controller('orders')
@UseFilters(DurableHttpExceptionFilter)
export class OrdersController {
  constructor(
    private readonly runner: FlowRunner,
    private readonly store: CheckpointStore,
  ) {}

  /**
   * Places an order: runs the tickets flow to its end and answers with the run. The body is
   * validated against `Order` first (400 naming every violation; nothing is stored).
   */
  @Post()
  place(@Body() order: Partial<Order>): Promise<RunResult<Order>> {
    return this.runner.start<Order>(TicketsFlow, order);
  }

  /** Recent orders, newest first; `?status=running&limit=20&before=<next>` to filter and page. */
  @Get()
  list(
    @Query('status') status?: string,
    @Query('limit', new DefaultValuePipe(20), ParseIntPipe) limit = 20,
    @Query('before') before?: string,
  ): Promise<RunPage> {
    if (status !== undefined && !STATUSES.includes(status as RunStatus)) {
      throw new BadRequestException(
        `status must be one of ${STATUSES.join(', ')}`,
      );
    }
    if (limit < 1 || limit > 100)
      throw new BadRequestException('limit must be between 1 and 100');
    return this.store.list({
      flow: 'tickets',
      limit,
      ...(status !== undefined && { status: status as RunStatus }),
      ...(before !== undefined && { before }),
    });
  }

  /** An order's latest checkpoint: status, step and state. */
  @Get(':id')
  get(@Param('id') id: string): Promise<RunResult<Order>> {
    return this.runner.get<Order>(id);
  }

  /**
   * For operators: goes on with an order that bootstrap recovery left (409 with the calls in
   * doubt if one needs a decision). After checking those calls at their system, send
   * `{"rerunInDoubt": true}` to run them again.
   */
  @Post(':id/recover')
  recover(
    @Param('id') id: string,
    @Body() body: { rerunInDoubt?: unknown } = {},
  ): Promise<RunResult<Order>> {
    if (
      body.rerunInDoubt !== undefined &&
      typeof body.rerunInDoubt !== 'boolean'
    )
      throw new BadRequestException('rerunInDoubt must be true or false');
    return this.runner.recover<Order>(TicketsFlow, id, {
      rerunInDoubt: body.rerunInDoubt === true,
    });
  }
}
