import { DurableError } from '../errors/durable.error';

/**
 * A model could not be asked, or its answer could not be read: an HTTP error (`status` set), no
 * answer in time, a network failure, or a reply that is not a chat message. The message names the
 * endpoint and, for HTTP errors, the status and an excerpt of the body; never the API key.
 * @publicApi
 */
export class ChatModelError extends DurableError {
  /** The HTTP status, when the server answered with an error. */
  readonly status?: number;

  constructor(
    message: string,
    options: { status?: number; cause?: unknown } = {},
  ) {
    super(
      message,
      undefined,
      options.cause === undefined ? undefined : { cause: options.cause },
    );
    if (options.status !== undefined) this.status = options.status;
  }
}

/**
 * A tool loop needed more model calls than its `maxSteps`. The run ends `failed` with this error;
 * its history (the last tool results included) is in the result, to go on from in a new run.
 * @publicApi
 */
export class MaxStepsExceeded extends DurableError {
  readonly maxSteps: number;

  constructor(runId: string, maxSteps: number) {
    super(
      `Run "${runId}": the model was called ${maxSteps} time(s), its maxSteps, and still asked for tools, so the loop stopped before another model call. The history so far is in the result: start a new run with it (and a higher maxSteps) to go on.`,
      runId,
    );
    this.maxSteps = maxSteps;
  }
}
