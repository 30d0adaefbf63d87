import {
  BadRequestException,
  Body,
  Controller,
  Get,
  Headers,
  NotFoundException,
  type PipeTransform,
  Param,
  ParseIntPipe,
  Post,
  Query,
  Res,
  Sse,
  UseFilters,
  DefaultValuePipe,
  ValidationPipe,
  type MessageEvent,
} from '@nestjs/common';
import type { Observable } from 'rxjs';
import {
  CheckpointNotFound,
  InvalidFlowState,
  type CallFinding,
  type RunPage,
  type RunResult,
  type RunStatus,
} from 'agent-adapter';
import {
  CheckpointStore,
  DurableHttpExceptionFilter,
  FlowRunner,
  streamEvents,
  streamOffset,
} from 'agent-adapter/nest';
import type { ValidationError } from 'class-validator';
import { Order } from '../tickets/order.state';
import { TicketsFlow } from '../tickets/tickets.flow';
import { ResolveBody } from './resolve.body';

const STATUSES: readonly RunStatus[] = [
  'running',
  'paused',
  'sleeping',
  'done',
  'failed',
];

/** A run id the library takes (see `checkRunId`): a client's key is checked before it is used. */
const ORDER_KEY = /^[A-Za-z0-9_.:@-]{1,200}$/;

/**
 * An order id in a URL: one that no run id can be (odd characters, too long) is no order, a 404,
 * before the runner would refuse it as a caller's bug (a TypeError, so a 500).
 */
const orderId: PipeTransform<string, string> = {
  transform(id: string): string {
    if (!ORDER_KEY.test(id)) throw new NotFoundException(`no order ${id}`);
    return id;
  },
};

/** What `place` needs of (Express's) response to answer 202 with a `Location`. */
interface Accepted {
  status(code: number): unknown;
  setHeader(name: string, value: string): unknown;
}

/** `POST /orders?queue=true`'s answer: the order is stored on its queue. */
interface Queued {
  runId: string;
  queued: true;
}

/** The flow whose runs are orders (`@Flow('tickets')`); other runs on the store are not orders. */
const FLOW = 'tickets';

/**
 * `POST /orders` bodies, checked before the flow sees them: a field `Order` does not declare is
 * refused (not stored along), and each field gets its first failure only. Refusals are the
 * library's `InvalidFlowState`, so every 400 of this controller has the same shape (`violations`).
 */
const bodyOf = (expectedType: typeof Order | typeof ResolveBody) =>
  new ValidationPipe({
    expectedType,
    whitelist: true,
    forbidNonWhitelisted: true,
    stopAtFirstError: true,
    exceptionFactory: (errors: ValidationError[]) =>
      new InvalidFlowState(FLOW, violations(errors)),
  });

/** Each field's messages, nested fields (`error.name`) by their path. */
function violations(
  errors: ValidationError[],
  prefix = '',
): Array<{ path: string; messages: string[] }> {
  return errors.flatMap((e) => [
    ...(e.constraints
      ? [
          {
            path: prefix + e.property,
            messages: Object.values(e.constraints),
          },
        ]
      : []),
    ...violations(e.children ?? [], `${prefix}${e.property}.`),
  ]);
}

const ORDER_BODY = bodyOf(Order);
/** `POST /orders/:id/resolve` bodies: the same rules (whitelist, unknown fields refused). */
const RESOLVE_BODY = bodyOf(ResolveBody);

@Controller('orders')
@UseFilters(DurableHttpExceptionFilter)
export class OrdersController {
  constructor(
    private readonly runner: FlowRunner,
    private readonly store: CheckpointStore,
  ) {}

  /**
   * Places an order: runs the tickets flow to its end and answers with the run (201). The body is
   * validated against `Order` first (400 naming every violation, one per field, and any field
   * `Order` lacks; nothing is stored).
   *
   * An `Idempotency-Key` header is the run's id: a client that retries after a dropped connection
   * gets its order as it is now (nothing is charged twice); the same key with another order is a
   * 409. `?wait=false` answers 202 with the order's URL (`Location`) once it is stored, and the
   * flow goes on in the background here. `?queue=true` answers 202 with the order's URL once it is
   * stored on the tickets queue: any worker on the store starts it under the queue's limits (see
   * `TicketsFlow`), one order per show at a time.
   */
  @Post()
  async place(
    @Body(ORDER_BODY) order: Partial<Order>,
    @Res({ passthrough: true }) res: Accepted,
    @Headers('idempotency-key') key?: string,
    @Query('wait') wait?: string,
    @Query('queue') queue?: string,
  ): Promise<RunResult<Order> | Queued> {
    if (key !== undefined && !ORDER_KEY.test(key))
      throw new BadRequestException(
        'Idempotency-Key must be 1-200 letters, digits, "_", ".", ":", "@" or "-".',
      );
    for (const [name, value] of [
      ['wait', wait],
      ['queue', queue],
    ] as const)
      if (value !== undefined && value !== 'true' && value !== 'false')
        throw new BadRequestException(`${name} must be true or false`);
    const runId = key !== undefined ? { runId: key } : {};
    if (queue === 'true') {
      const queued = await this.runner.enqueue<Order>(TicketsFlow, order, {
        ...runId,
        key: String(order.show),
      });
      return this.accepted<Queued>(res, { runId: queued.runId, queued: true });
    }
    const background = wait === 'false';
    const placed = await this.runner.start<Order>(TicketsFlow, order, {
      ...runId,
      ...(background && { wait: false }),
    });
    return background ? this.accepted(res, placed) : placed;
  }

  /** 202 with the order's URL: it is stored and goes on without this request. */
  private accepted<T extends { runId: string }>(res: Accepted, body: T): T {
    res.status(202);
    res.setHeader('Location', `/orders/${body.runId}`);
    return body;
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
      flow: FLOW,
      limit,
      ...(status !== undefined && { status: status as RunStatus }),
      ...(before !== undefined && { before }),
    });
  }

  /**
   * An order's latest checkpoint: status, step and state. An order whose worker died inside the
   * charge reads `running` with `needsDecision`: the calls to check at the provider (tool,
   * arguments, idempotency key, when it started) and the worker that held it. An unknown id, or a
   * run of another flow on the same store (a support conversation), is no order: 404.
   */
  @Get(':id')
  async get(@Param('id', orderId) id: string): Promise<RunResult<Order>> {
    try {
      return await this.runner.get<Order>(id, { flow: TicketsFlow });
    } catch (error) {
      if (error instanceof CheckpointNotFound)
        throw new NotFoundException(`no order ${id}`);
      throw error;
    }
  }

  /**
   * An order's progress as server-sent events (`curl -N`): held, paid, sent, each once and in
   * order, until the order ends, whichever worker drives it. A client that reconnects sends the
   * last event id back (Last-Event-ID, as EventSource does) and goes on from there; `?from=N`
   * starts at offset N.
   */
  @Sse(':id/stream')
  async stream(
    @Param('id', orderId) id: string,
    @Headers('last-event-id') last?: string,
    @Query('from') from?: string,
  ): Promise<Observable<MessageEvent>> {
    const offset = streamOffset(last, from);
    await this.get(id); // 404 unless it is an order
    return streamEvents((signal) =>
      this.runner.stream(TicketsFlow, id, { from: offset, signal }),
    );
  }

  /**
   * For operators: goes on with an order that bootstrap recovery left (409 with the calls in
   * doubt if one needs a decision). After checking those calls at their system, send
   * `{"rerunInDoubt": true, "by": "ann", "reason": "no charge at the provider"}` to run them
   * again; who and why are sealed with the decision (`runs show`, the viewer).
   */
  @Post(':id/recover')
  recover(
    @Param('id', orderId) id: string,
    @Body()
    body: { rerunInDoubt?: unknown; by?: unknown; reason?: unknown } = {},
  ): Promise<RunResult<Order>> {
    if (
      body.rerunInDoubt !== undefined &&
      typeof body.rerunInDoubt !== 'boolean'
    )
      throw new BadRequestException('rerunInDoubt must be true or false');
    for (const key of ['by', 'reason'] as const) {
      const value = body[key];
      if (
        value !== undefined &&
        (typeof value !== 'string' || value.length > 200)
      )
        throw new BadRequestException(
          `${key} must be a string of at most 200 characters`,
        );
    }
    return this.runner.recover<Order>(TicketsFlow, id, {
      rerunInDoubt: body.rerunInDoubt === true,
      ...(typeof body.by === 'string' && { by: body.by }),
      ...(typeof body.reason === 'string' && { reason: body.reason }),
    });
  }

  /**
   * For operators: says what a call in doubt really did, found at its system (the charge at the
   * payment provider, by its idempotency key), then goes on with the order. `{"call": "pay#0",
   * "ran": true, "result": "ch_...", "by": "ann", "reason": "..."}`: the charge is recorded with
   * that result and never run again; `{"call": "pay#0", "ran": false, ...}`: it runs now, once,
   * with the same idempotency key. A bad finding is a 400 with nothing stored; a run already
   * decided or ended, a 409.
   */
  @Post(':id/resolve')
  async resolve(
    @Param('id', orderId) id: string,
    @Body(RESOLVE_BODY) body: ResolveBody,
  ): Promise<RunResult<Order>> {
    await this.get(id); // 404 unless it is an order
    // As sent (the pipe gives every declared field, unset ones undefined): the runner refuses a
    // result or error beside ran: false, or both.
    const finding = {
      call: body.call,
      ran: body.ran,
      ...(body.result !== undefined && { result: body.result }),
      ...(body.error !== undefined && { error: body.error }),
    } as CallFinding;
    try {
      return await this.runner.resolve<Order>(TicketsFlow, id, {
        calls: [finding],
        ...(body.by !== undefined && { by: body.by }),
        ...(body.reason !== undefined && { reason: body.reason }),
      });
    } catch (error) {
      // The runner's refusal of the finding, before it stored anything.
      if (error instanceof TypeError)
        throw new BadRequestException(error.message);
      throw error;
    }
  }
}
