import {
  BadRequestException,
  Body,
  Controller,
  Get,
  Param,
  Post,
  UseFilters,
} from '@nestjs/common';
import type { ToolLoopResult } from 'agent-adapter';
import { DurableHttpExceptionFilter } from 'agent-adapter/nest';
import { SupportAgent } from './support.agent';

@Controller('support')
@UseFilters(DurableHttpExceptionFilter)
export class SupportController {
  constructor(private readonly agent: SupportAgent) {}

  /** A question for the agent: `{"message": "..."}`. Answers with the conversation's run. */
  @Post()
  ask(@Body() body: { message?: unknown }): Promise<ToolLoopResult> {
    if (typeof body?.message !== 'string' || !body.message.trim())
      throw new BadRequestException('message must be a non-empty string');
    return this.agent.ask(body.message);
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
