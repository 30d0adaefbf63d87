import {
  BadRequestException,
  Body,
  Controller,
  DefaultValuePipe,
  Get,
  Header,
  Param,
  ParseIntPipe,
  Post,
  Query,
  UseFilters,
  UseGuards,
  type Type,
} from '@nestjs/common';
import type { RunStatus } from '../../exec/checkpoints/checkpoint-store';
import { DurableHttpExceptionFilter } from '../durable-http.filter';
import type { ViewerConfig } from './viewer.config';
import { ViewerSecurityGuard } from './viewer.guard';
import { PAGE_CSP, viewerPage } from './viewer.page';
import { ViewerService } from './viewer.service';

const STATUSES: readonly RunStatus[] = ['running', 'paused', 'done', 'failed'];

/**
 * The viewer's controller, mounted at `config.path`: the viewer's own guard (headers, `Host`)
 * runs first, then the application's `config.guard` (both known at forRoot time).
 * @internal
 */
export function createViewerController(config: ViewerConfig): Type<unknown> {
  @Controller(config.path)
  @UseGuards(ViewerSecurityGuard, ...(config.guard ? [config.guard] : []))
  @UseFilters(DurableHttpExceptionFilter)
  class DurableViewerController {
    constructor(private readonly viewer: ViewerService) {}

    @Get()
    @Header('content-type', 'text/html; charset=utf-8')
    @Header('content-security-policy', PAGE_CSP)
    page(): string {
      return viewerPage();
    }

    @Get('api/meta')
    meta() {
      return this.viewer.meta();
    }

    @Get('api/runs')
    runs(
      @Query('flow') flow?: string,
      @Query('status') status?: string,
      @Query('before') before?: string,
      @Query('limit', new DefaultValuePipe(20), ParseIntPipe) limit = 20,
    ) {
      if (status && !STATUSES.includes(status as RunStatus))
        throw new BadRequestException(
          `status must be one of ${STATUSES.join(', ')}`,
        );
      if (limit < 1 || limit > 50)
        throw new BadRequestException('limit must be between 1 and 50');
      return this.viewer.list({
        limit,
        ...(flow && { flow }),
        ...(status && { status: status as RunStatus }),
        ...(before && { before }),
      });
    }

    @Get('api/runs/:id')
    run(@Param('id') id: string) {
      return this.viewer.run(id);
    }

    @Post('api/runs/:id/approve')
    approve(@Param('id') id: string, @Body() body: DecisionBody = {}) {
      return this.viewer.decide(id, { approved: true, ...decisionOf(body) });
    }

    @Post('api/runs/:id/deny')
    deny(@Param('id') id: string, @Body() body: DecisionBody = {}) {
      return this.viewer.decide(id, { approved: false, ...decisionOf(body) });
    }

    @Post('api/runs/:id/rerun-in-doubt')
    rerun(@Param('id') id: string) {
      return this.viewer.rerunInDoubt(id);
    }
  }
  return DurableViewerController;
}

interface DecisionBody {
  by?: unknown;
  reason?: unknown;
}

function decisionOf(body: DecisionBody): { by?: string; reason?: string } {
  const out: { by?: string; reason?: string } = {};
  for (const key of ['by', 'reason'] as const) {
    const value = body?.[key];
    if (value === undefined || value === '') continue;
    if (typeof value !== 'string' || value.length > 200)
      throw new BadRequestException(
        `${key} must be a string of at most 200 characters`,
      );
    out[key] = value;
  }
  return out;
}
