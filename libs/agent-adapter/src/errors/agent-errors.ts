import { DurableError } from './durable.error';
import { Messages } from './messages';

/* The errors of what an agent touches: calls outside a run, the model, MCP tools, run streams. */

/**
 * `idempotencyKey()` was called outside a durable run's tool call (a `@Tool` method called
 * directly, a node's own code, a script): there is no durable key, and none is made up. Check
 * `inRun()` first and pass the caller's own key outside a run. Also `publish()` outside a run.
 * @publicApi
 */
export class NotInRun extends DurableError {
  constructor(message: string = Messages.notInRun()) {
    super(message);
  }
}

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
  constructor(
    runId: string,
    readonly maxSteps: number,
  ) {
    super(Messages.maxSteps(runId, maxSteps), runId);
  }
}

/**
 * An MCP tool answered with `isError: true`: the message is the text of its result. Inside a run
 * the node sees it wrapped in `ToolFailed` (`errorName` "McpToolError"), sealed like any tool's
 * error. @publicApi
 */
export class McpToolError extends DurableError {
  constructor(
    readonly tool: string,
    text: string,
  ) {
    super(Messages.mcpToolFailed(text));
  }
}

/**
 * A stream was read from an offset whose entries were dropped (a run keeps its newest
 * `streamRetention` entries). `first` is the oldest offset still kept: read on from there.
 * @publicApi
 */
export class StreamEntriesDropped extends DurableError {
  constructor(
    runId: string,
    readonly from: number,
    readonly first: number,
  ) {
    super(Messages.streamDropped(runId, from, first), runId);
  }
}
