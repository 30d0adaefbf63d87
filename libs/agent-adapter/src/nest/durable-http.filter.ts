import {
  Catch,
  HttpStatus,
  Logger,
  type ArgumentsHost,
  type ExceptionFilter,
} from '@nestjs/common';
import {
  CheckpointConflict,
  CheckpointNotFound,
  WorkerDraining,
  StreamEntriesDropped,
  DurableError,
  InvalidFlowState,
  InvalidToolArguments,
  RecoveryNeedsDecision,
  RunAccessDenied,
  RunLeaseHeld,
  RunQueued,
} from '../errors';

/** The part of an HTTP response this filter uses (Express and Fastify both have it). */
interface JsonResponse {
  status(code: number): { json(body: unknown): void };
}

/**
 * The library's errors as HTTP answers: invalid input is a 400 naming every violation, an
 * unknown run a 404, someone else's run a 403, a run that is busy, ended or waiting for a
 * decision a 409 (with the calls in doubt, or the lease's owner). Anything else is a 500 (and
 * logged). Use it on your controllers: `@UseFilters(DurableHttpExceptionFilter)`.
 * @publicApi
 */
@Catch(DurableError)
export class DurableHttpExceptionFilter implements ExceptionFilter {
  private readonly logger = new Logger('DurableHttpExceptionFilter');

  catch(error: DurableError, host: ArgumentsHost): void {
    const response = host.switchToHttp().getResponse<JsonResponse>();
    const [status, extra]: [HttpStatus, Record<string, unknown>] =
      this.describe(error);
    if (status === HttpStatus.INTERNAL_SERVER_ERROR) {
      this.logger.error(error.message, error.stack);
    }
    response.status(status).json({
      statusCode: status,
      error: error.name,
      message: error.message,
      ...extra,
    });
  }

  private describe(error: DurableError): [HttpStatus, Record<string, unknown>] {
    if (
      error instanceof InvalidFlowState ||
      error instanceof InvalidToolArguments
    )
      return [HttpStatus.BAD_REQUEST, { violations: error.violations }];
    if (error instanceof CheckpointNotFound) return [HttpStatus.NOT_FOUND, {}];
    // A stream read from entries it no longer keeps: where to read on.
    if (error instanceof StreamEntriesDropped)
      return [HttpStatus.GONE, { first: error.first }];
    if (error instanceof RunAccessDenied) return [HttpStatus.FORBIDDEN, {}];
    if (error instanceof RecoveryNeedsDecision)
      return [
        HttpStatus.CONFLICT,
        { calls: error.calls.map(([tool, why]) => ({ tool, why })) },
      ];
    if (error instanceof RunLeaseHeld)
      return [HttpStatus.CONFLICT, { owner: error.owner, until: error.until }];
    // Not started yet: it waits on its queue.
    if (error instanceof RunQueued)
      return [HttpStatus.CONFLICT, { queue: error.queue }];
    if (error instanceof CheckpointConflict) return [HttpStatus.CONFLICT, {}];
    // The worker is shutting down; the run goes on elsewhere: ask again (at another worker).
    if (error instanceof WorkerDraining)
      return [HttpStatus.SERVICE_UNAVAILABLE, { runId: error.runId }];
    return [HttpStatus.INTERNAL_SERVER_ERROR, {}];
  }
}
