/** The tool loop and chat models (ChatModelError; a bad argument at call time is TypeError). */
export const LoopMessages = {
  maxSteps: (runId: string, maxSteps: number) =>
    `Run "${runId}": the model was called ${maxSteps} time(s), its maxSteps, and still asked for tools, so the loop stopped before another model call. The history so far is in the result: start a new run with it (and a higher maxSteps) to go on.`,
  loopNeedsModel: () => 'A tool loop needs a ChatModel (with complete()).',
  loopStreamOption: (got: unknown) =>
    `A tool loop's stream option must be true or false (got ${String(got)}).`,
  loopOtherMessages: (runId: string) =>
    `Run "${runId}" exists and started with other messages: a run id names one conversation. To go on from a finished run, start a new run (another id) with its messages and the new ones; to resume a paused one, pass the messages it started with (or none).`,
  loopRunning: (runId: string) =>
    `Run "${runId}" exists and is running: another worker drives it, or a crash cut it short. Recover it with recoverToolLoop (a worker on startup does), or use another run id.`,
  replyNotMessage: (why: string) =>
    `The model's reply is not a chat message: ${why}`,
  replyRole: (role: string) =>
    `The model's reply has role "${role}"; a reply is an assistant message.`,
  loopMaxSteps: (value: unknown) =>
    `maxSteps must be a positive integer, got ${String(value)}.`,
  loopNoMessages: () => 'messages: a new run needs at least one message.',
  openAIOption: (
    option: 'baseUrl' | 'model' | 'timeoutMs' | 'maxRetries',
  ): string =>
    `OpenAIChatModel: ${
      {
        baseUrl:
          'baseUrl must be an http(s) URL, e.g. "http://localhost:11434/v1"',
        model: 'model must be a model name',
        timeoutMs: 'timeoutMs must be a positive integer',
        maxRetries: 'maxRetries must be an integer ≥ 0',
      }[option]
    }.`,
  // Chat messages given to a loop or model (TypeError: the caller's bug at that call).
  chatMessagesArray: (where: string) =>
    `${where} must be an array of chat messages.`,
  chatObject: (where: string) => `${where} must be an object.`,
  chatRole: (where: string, role: unknown) =>
    `${where}.role must be "system", "user", "assistant" or "tool", got ${JSON.stringify(role)}.`,
  chatContent: (where: string) => `${where}.content must be a string.`,
  chatToolCallId: (where: string) =>
    `${where}.toolCallId must be the id of the call it answers.`,
  chatToolCalls: (where: string) => `${where}.toolCalls must be an array.`,
  chatCallField: (where: string, field: 'id' | 'name') =>
    `${where}.${field} must be a non-empty string.`,
  chatCallArguments: (where: string) => `${where}.arguments must be an object.`,
  chatFinishReason: (where: string, value: unknown, reasons: string[]) =>
    `${where}.finishReason must be one of ${reasons.map((r) => `"${r}"`).join(', ')}, got ${JSON.stringify(value)}.`,
  chatUsage: (where: string) =>
    `${where}.usage must be an object whose inputTokens and outputTokens, when given, are integers ≥ 0.`,
  // OpenAIChatModel's failures (ChatModelError: the model could not be reached or did not answer).
  openAIPostFailed: (url: string, why: string) =>
    `OpenAIChatModel: POST ${url} failed: ${why}.`,
  openAINoAnswer: (timeoutMs: number) => `no answer within ${timeoutMs} ms`,
  openAIStatus: (
    url: string,
    status: number,
    statusText: string,
    excerpt: string,
  ) =>
    `OpenAIChatModel: POST ${url} answered ${status}${statusText ? ` ${statusText}` : ''}: ${excerpt}`,
  openAINotCompletion: (url: string, why: string, excerpt: string) =>
    `OpenAIChatModel: the answer of ${url} is not a chat completion (${why}): ${excerpt}`,
  // Why a body is not a chat completion (put in openAINotCompletion).
  completionNoMessage: () => 'no choices[0].message',
  completionToolCalls: () => 'tool_calls is not a list',
  completionToolCallName: (i: number) =>
    `tool_calls[${i}] has no function name`,
} as const;
