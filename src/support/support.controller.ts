import {
  BadRequestException,
  Body,
  Controller,
  Get,
  Headers,
  Param,
  Post,
  Query,
  Res,
  Sse,
  UseFilters,
  type MessageEvent,
} from '@nestjs/common';
import type { Observable } from 'rxjs';
import type { ToolLoopResult } from 'agent-adapter';
import {
  DurableHttpExceptionFilter,
  streamEvents,
  streamOffset,
} from 'agent-adapter/nest';
import { SupportAgent } from './support.agent';

/** What `ask` needs of (Express's) response to answer 202 with a `Location`. */
interface Accepted {
  status(code: number): unknown;
  setHeader(name: string, value: string): unknown;
}

@Controller('support')
@UseFilters(DurableHttpExceptionFilter)
export class SupportController {
  constructor(private readonly agent: SupportAgent) {}

  /**
   * A question for the agent: `{"message": "..."}`. Answers with the conversation's run once it
   * ends; `?wait=false` answers 202 at once with its stream's URL (`Location`), and the agent goes
   * on here in the background.
   */
  @Post()
  async ask(
    @Body() body: { message?: unknown },
    @Res({ passthrough: true }) res: Accepted,
    @Query('wait') wait?: string,
  ): Promise<ToolLoopResult> {
    if (typeof body?.message !== 'string' || !body.message.trim())
      throw new BadRequestException('message must be a non-empty string');
    if (wait !== undefined && wait !== 'true' && wait !== 'false')
      throw new BadRequestException('wait must be true or false');
    const background = wait === 'false';
    const r = await this.agent.ask(body.message, { wait: !background });
    if (background) {
      res.status(202);
      res.setHeader('Location', `/support/${r.runId}/stream`);
    }
    return r;
  }

  /**
   * The conversation as server-sent events, each saved message once, in order, until it ends
   * (`curl -N`). A client that reconnects sends the last event id back (Last-Event-ID) and goes on
   * from there, whichever worker it reaches; `?from=N` starts at offset N.
   */
  @Sse(':id/stream')
  stream(
    @Param('id') id: string,
    @Headers('last-event-id') last?: string,
    @Query('from') from?: string,
  ): Observable<MessageEvent> {
    const offset = streamOffset(last, from);
    return streamEvents((signal) =>
      this.agent.loop.stream(id, { from: offset, signal }),
    );
  }

  /** A conversation's latest checkpoint: its messages, status, and what awaits a decision. */
  @Get(':id')
  get(@Param('id') id: string): Promise<ToolLoopResult> {
    return this.agent.loop.get(id);
  }

  /**
   * Decides the call a paused conversation waits for (a refund): `{"approved": true, "by": "ana"}`.
   * Of two decisions at once one wins; the other is a 409.
   */
  @Post(':id/decision')
  decide(
    @Param('id') id: string,
    @Body() body: { approved?: unknown; by?: unknown; reason?: unknown },
  ): Promise<ToolLoopResult> {
    if (typeof body?.approved !== 'boolean')
      throw new BadRequestException('approved must be true or false');
    for (const key of ['by', 'reason'] as const) {
      if (body[key] !== undefined && typeof body[key] !== 'string')
        throw new BadRequestException(`${key} must be a string`);
    }
    return this.agent.loop.run([], {
      runId: id,
      decision: {
        approved: body.approved,
        ...(typeof body.by === 'string' && { by: body.by }),
        ...(typeof body.reason === 'string' && { reason: body.reason }),
      },
    });
  }
}
