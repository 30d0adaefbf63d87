import {
  BadRequestException,
  Controller,
  DefaultValuePipe,
  Get,
  Header,
  Param,
  ParseIntPipe,
  Post,
  Query,
  Req,
  Res,
  UseFilters,
  UseGuards,
  createParamDecorator,
  type ExecutionContext,
  type Type,
} from '@nestjs/common';
import { RUN_STATUSES } from '../../cli/due-time';
import {
  CheckpointStore,
  type RunStatus,
} from '../../exec/checkpoints/checkpoint-store';
import type { CallFinding } from '../../flow/runner/resolve';
import { DurableFlowRunner } from '../durable-flow.runner';
import { DurableHttpExceptionFilter } from '../durable-http.filter';
import { NestMessages } from '../durable.messages';
import { ViewerActions } from './viewer.actions';
import type { ViewerConfig } from './viewer.config';
import { ViewerCsrf } from './viewer.csrf';
import {
  ViewerSecurityGuard,
  schemeOf,
  type ViewerRequest,
  type ViewerResponse,
} from './viewer.guard';
import { PAGE_CSP, viewerPage } from './viewer.page';
import { changeViewerSchedule, viewerSchedules } from './viewer.schedules';
import { ViewerService } from './viewer.service';

const STATUSES = RUN_STATUSES;

/**
 * The viewer's controller, mounted at `config.path`: the viewer's own guard (headers, `Host`,
 * CSRF) runs first, then the application's `config.guard` (both known at forRoot time).
 * @internal
 */
export function createViewerController(config: ViewerConfig): Type<unknown> {
  @Controller(config.path)
  @UseGuards(ViewerSecurityGuard, ...(config.guard ? [config.guard] : []))
  @UseFilters(DurableHttpExceptionFilter)
  class DurableViewerController {
    constructor(
      private readonly viewer: ViewerService,
      private readonly actions: ViewerActions,
      private readonly csrf: ViewerCsrf,
      private readonly runner: DurableFlowRunner,
      private readonly store: CheckpointStore,
    ) {}

    /** The page, with a fresh CSRF token in it and in a cookie for the viewer's path. */
    @Get()
    @Header('content-type', 'text/html; charset=utf-8')
    @Header('content-security-policy', PAGE_CSP)
    page(
      @Req() req: ViewerRequest,
      @Res({ passthrough: true }) res: ViewerResponse,
    ): string {
      const token = this.csrf.issue();
      res.header(
        'set-cookie',
        this.csrf.cookie(
          token,
          cookiePath(req, config.path),
          schemeOf(req) === 'https',
        ),
      );
      return viewerPage(token);
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
        throw new BadRequestException(NestMessages.viewerStatus(STATUSES));
      if (limit < 1 || limit > 50)
        throw new BadRequestException(NestMessages.viewerLimit());
      return this.viewer.list({
        limit,
        ...(flow && { flow }),
        ...(status && { status: status as RunStatus }),
        ...(before && { before }),
      });
    }

    @Get('api/headless')
    headless(@Query('cursor') cursor?: string) {
      return this.viewer.headless(cursor || undefined);
    }

    @Get('api/runs/:id')
    run(@Param('id') id: string) {
      return this.viewer.run(id);
    }

    /** Every stored schedule, with its next tick (read-only). */
    @Get('api/schedules')
    schedules() {
      return viewerSchedules(this.runner, this.store);
    }

    @Post('api/schedules/:name/pause')
    pauseSchedule(
      @Param('name') name: string,
      @ActionBody('pause') body: Record<string, unknown>,
    ) {
      return changeViewerSchedule(this.runner, name, 'pause', decisionOf(body));
    }

    @Post('api/schedules/:name/resume')
    resumeSchedule(
      @Param('name') name: string,
      @ActionBody('resume') body: Record<string, unknown>,
    ) {
      return changeViewerSchedule(
        this.runner,
        name,
        'resume',
        decisionOf(body),
      );
    }

    @Post('api/runs/:id/approve')
    approve(
      @Param('id') id: string,
      @ActionBody('approve') body: Record<string, unknown>,
    ) {
      return this.actions.decide(id, { approved: true, ...decisionOf(body) });
    }

    @Post('api/runs/:id/deny')
    deny(
      @Param('id') id: string,
      @ActionBody('deny') body: Record<string, unknown>,
    ) {
      return this.actions.decide(id, { approved: false, ...decisionOf(body) });
    }

    @Post('api/runs/:id/rerun-in-doubt')
    // The body is required so that no request without one (which any page can send) reaches an
    // action; its `by` and `reason` are sealed with the decision.
    rerun(
      @Param('id') id: string,
      @ActionBody('rerun-in-doubt') body: Record<string, unknown>,
    ) {
      return this.actions.rerunInDoubt(id, decisionOf(body));
    }

    @Post('api/runs/:id/resolve')
    // What one call in doubt really did: { call, ran: true, result | error } or { call, ran: false },
    // with by and reason. The runner checks the finding (a 400 with its message, nothing stored).
    resolve(
      @Param('id') id: string,
      @ActionBody('resolve') body: Record<string, unknown>,
    ) {
      return this.actions.resolve(id, findingOf(body), decisionOf(body));
    }
  }
  return DurableViewerController;
}

/**
 * The path the page was served at (the global prefix included), for its cookie; the configured
 * path if the request's is anything but plain URL path characters.
 */
function cookiePath(req: ViewerRequest, fallback: string): string {
  let path = `/${fallback.replace(/^\/+/, '')}`;
  try {
    const served = new URL(req.originalUrl ?? req.url, 'http://viewer')
      .pathname;
    if (/^\/[A-Za-z0-9._~\-/%]*$/.test(served)) path = served;
  } catch {
    // not a URL path: the configured one
  }
  return path.replace(/\/+$/, '') || '/';
}

/**
 * An action's body: a JSON object that was really sent (Express parses an empty JSON body as {}),
 * or a 400. Its content type was checked by the viewer's guard.
 */
const ActionBody = createParamDecorator(
  (action: string, ctx: ExecutionContext): Record<string, unknown> => {
    const req = ctx
      .switchToHttp()
      .getRequest<ViewerRequest & { body?: unknown }>();
    const length = req.headers['content-length'];
    const sent =
      req.headers['transfer-encoding'] !== undefined ||
      (length !== undefined && length !== '0');
    const body = req.body;
    if (
      !sent ||
      typeof body !== 'object' ||
      body === null ||
      Array.isArray(body)
    )
      throw new BadRequestException(NestMessages.viewerBody(action));
    return body as Record<string, unknown>;
  },
);

const RESOLVE_FIELDS = new Set([
  'call',
  'ran',
  'result',
  'error',
  'by',
  'reason',
]);

/**
 * A resolve body's finding, as sent: an unknown field is refused here (it would be dropped
 * silently otherwise), the rest is the runner's to check (its TypeError names what is wrong).
 */
function findingOf(body: Record<string, unknown>): CallFinding {
  for (const key of Object.keys(body))
    if (!RESOLVE_FIELDS.has(key))
      throw new BadRequestException(NestMessages.viewerResolveField(key));
  const { call, ran } = body;
  return {
    call,
    ran,
    ...('result' in body && { result: body.result }),
    ...('error' in body && { error: body.error }),
  } as CallFinding;
}

function decisionOf(body: Record<string, unknown>): {
  by?: string;
  reason?: string;
} {
  const out: { by?: string; reason?: string } = {};
  for (const key of ['by', 'reason'] as const) {
    const value = body[key];
    if (value === undefined || value === '') continue;
    if (typeof value !== 'string' || value.length > 200)
      throw new BadRequestException(NestMessages.viewerDecisionField(key));
    out[key] = value;
  }
  return out;
}
