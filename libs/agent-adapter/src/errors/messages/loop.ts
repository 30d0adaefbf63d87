/** The tool loop and chat models (ChatModelError; a bad argument at call time is TypeError). */
export const LoopMessages = {
  maxSteps: (runId: string, maxSteps: number) =>
    `Run "${runId}": the model was called ${maxSteps} time(s), its maxSteps, and still asked for tools, so the loop stopped before another model call. The history so far is in the result: start a new run with it (and a higher maxSteps) to go on.`,
  loopNeedsModel: () => 'A tool loop needs a ChatModel (with complete()).',
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
} as const;
