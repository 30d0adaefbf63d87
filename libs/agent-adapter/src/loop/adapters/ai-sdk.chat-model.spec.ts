import {
  APICallError,
  type LanguageModelV3,
  type LanguageModelV3CallOptions,
  type LanguageModelV4,
  type LanguageModelV4CallOptions,
  type LanguageModelV4GenerateResult,
} from '@ai-sdk/provider';
import type { LanguageModel } from 'ai';
import {
  AiSdkChatModel,
  ChatModelError,
  DurableSetupError,
  type AiSdkCallOptions,
  type AiSdkGenerateResult,
  type AiSdkLanguageModel,
  type ChatTool,
} from 'agent-adapter';

/*
 * The adapter's structural types against the AI SDK's own (checked by the compiler: tsc and
 * ts-jest fail here if a specification change breaks the fit). What the adapter sends must be a
 * valid call of a v4 (ai 7) and a v3 (ai 6) model, what they answer must be readable, and the
 * models themselves (ai 7's LanguageModel, but the id string and v2) must be accepted.
 */
const sends: LanguageModelV4CallOptions = {} as AiSdkCallOptions;
const sendsV3: LanguageModelV3CallOptions = {} as AiSdkCallOptions;
const reads: AiSdkGenerateResult = {} as LanguageModelV4GenerateResult;
const takesV4: AiSdkLanguageModel = {} as LanguageModelV4;
const takesV3: AiSdkLanguageModel = {} as LanguageModelV3;
const takesAi7: AiSdkLanguageModel = {} as Extract<
  LanguageModel,
  { specificationVersion: 'v3' | 'v4' }
>;
void [sends, sendsV3, reads, takesV4, takesV3, takesAi7];

const usage = (input: number, output: number) => ({
  inputTokens: {
    total: input,
    noCache: undefined,
    cacheRead: undefined,
    cacheWrite: undefined,
  },
  outputTokens: { total: output, text: undefined, reasoning: undefined },
});

/** A hand-made v4 model: answers from a script and keeps what it was given. */
function scripted(
  ...answers: Array<
    | LanguageModelV4GenerateResult
    | Error
    | ((
        o: LanguageModelV4CallOptions,
      ) => Promise<LanguageModelV4GenerateResult>)
  >
) {
  const calls: LanguageModelV4CallOptions[] = [];
  const model: LanguageModelV4 = {
    specificationVersion: 'v4',
    provider: 'hand.made',
    modelId: 'm-1',
    supportedUrls: {},
    doGenerate: (options) => {
      calls.push(options);
      const next = answers.shift();
      if (next === undefined) throw new Error('unscripted call');
      if (next instanceof Error) return Promise.reject(next);
      return typeof next === 'function' ? next(options) : Promise.resolve(next);
    },
    doStream: () => Promise.reject(new Error('not streamed')),
  };
  return { model, calls };
}

const TOOLS: ChatTool[] = [
  {
    name: 'weather',
    description: 'The weather in a city',
    parameters: { type: 'object', properties: { city: { type: 'string' } } },
  },
  { name: 'now', description: '', parameters: { type: 'object' } },
];

describe('AiSdkChatModel (an AI SDK language model as a ChatModel)', () => {
  it('sends the history as the prompt (tool results grouped, named after their call) and the tools as function tools', async () => {
    const { model, calls } = scripted({
      content: [{ type: 'text', text: 'Sunny.' }],
      finishReason: { unified: 'stop', raw: 'stop' },
      usage: usage(20, 2),
      warnings: [],
    });
    await new AiSdkChatModel(model, {
      settings: { temperature: 0, providerOptions: { x: { y: 1 } } },
    }).complete({
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'Oslo?' },
        {
          role: 'assistant',
          content: 'Looking.',
          toolCalls: [
            { id: 'c1', name: 'weather', arguments: { city: 'Oslo' } },
            {
              id: 'c2',
              name: 'weather',
              arguments: {},
              invalidArguments: '{city',
            },
          ],
        },
        { role: 'tool', toolCallId: 'c1', content: 'rain' },
        { role: 'tool', toolCallId: 'c2', content: 'bad', isError: true },
        { role: 'assistant', content: '' },
      ],
      tools: TOOLS,
    });
    expect(calls).toHaveLength(1);
    const { abortSignal, ...sent } = calls[0]!;
    expect(abortSignal).toBeInstanceOf(AbortSignal);
    expect(sent).toEqual({
      temperature: 0,
      providerOptions: { x: { y: 1 } },
      prompt: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: [{ type: 'text', text: 'Oslo?' }] },
        {
          role: 'assistant',
          content: [
            { type: 'text', text: 'Looking.' },
            {
              type: 'tool-call',
              toolCallId: 'c1',
              toolName: 'weather',
              input: { city: 'Oslo' },
            },
            {
              type: 'tool-call',
              toolCallId: 'c2',
              toolName: 'weather',
              input: {},
            },
          ],
        },
        {
          role: 'tool',
          content: [
            {
              type: 'tool-result',
              toolCallId: 'c1',
              toolName: 'weather',
              output: { type: 'text', value: 'rain' },
            },
            {
              type: 'tool-result',
              toolCallId: 'c2',
              toolName: 'weather',
              output: { type: 'error-text', value: 'bad' },
            },
          ],
        },
        { role: 'assistant', content: [{ type: 'text', text: '' }] },
      ],
      tools: [
        {
          type: 'function',
          name: 'weather',
          description: 'The weather in a city',
          inputSchema: TOOLS[0]!.parameters,
        },
        { type: 'function', name: 'now', inputSchema: { type: 'object' } },
      ],
    });
  });

  it('reads text, tool calls (input parsed), finish reason and usage; leaves out reasoning and provider-executed calls', async () => {
    const { model } = scripted(
      {
        content: [
          { type: 'reasoning', text: 'hmm' },
          { type: 'text', text: 'Let me ' },
          { type: 'text', text: 'check.' },
          {
            type: 'tool-call',
            toolCallId: 'a',
            toolName: 'weather',
            input: '{"city":"Oslo"}',
          },
          { type: 'tool-call', toolCallId: 'b', toolName: 'now', input: '' },
          {
            type: 'tool-call',
            toolCallId: 'c',
            toolName: 'weather',
            input: '"Rome"',
          },
          {
            type: 'tool-call',
            toolCallId: 'd',
            toolName: 'web_search',
            input: '{}',
            providerExecuted: true,
          },
        ],
        finishReason: { unified: 'tool-calls', raw: 'tool_calls' },
        usage: usage(30, 9),
        warnings: [],
      },
      {
        content: [{ type: 'text', text: 'cut' }],
        finishReason: { unified: 'length', raw: 'length' },
        usage: {
          inputTokens: {
            total: undefined,
            noCache: undefined,
            cacheRead: undefined,
            cacheWrite: undefined,
          },
          outputTokens: {
            total: undefined,
            text: undefined,
            reasoning: undefined,
          },
        },
        warnings: [],
      },
    );
    const chat = new AiSdkChatModel(model);
    const ask = () =>
      chat.complete({
        messages: [{ role: 'user', content: '?' }],
        tools: TOOLS,
      });
    expect(await ask()).toEqual({
      role: 'assistant',
      content: 'Let me check.',
      toolCalls: [
        { id: 'a', name: 'weather', arguments: { city: 'Oslo' } },
        { id: 'b', name: 'now', arguments: {} },
        {
          id: 'c',
          name: 'weather',
          arguments: {},
          invalidArguments: '"Rome"',
        },
      ],
      finishReason: 'tool-calls',
      usage: { inputTokens: 30, outputTokens: 9 },
    });
    expect(await ask()).toEqual({
      role: 'assistant',
      content: 'cut',
      finishReason: 'length',
    });
  });

  it('refuses a model id string, a non-model and another specification version, naming what is wrong', () => {
    const make = (m: unknown) => () =>
      new AiSdkChatModel(m as AiSdkLanguageModel);
    expect(make('openai/gpt-4o')).toThrow(DurableSetupError);
    expect(make('openai/gpt-4o')).toThrow(/got the model id "openai\/gpt-4o"/);
    expect(make({ modelId: 'x' })).toThrow(/needs an AI SDK language model/);
    const v2 = { ...scripted().model, specificationVersion: 'v2' };
    expect(make(v2)).toThrow(
      /hand\.made\/m-1 implements specification version "v2"; this adapter speaks "v4" and "v3"/,
    );
    const { model } = scripted();
    expect(() => new AiSdkChatModel(model, { timeoutMs: 0 })).toThrow(
      /timeoutMs must be a positive integer/,
    );
    expect(() => new AiSdkChatModel(model, { maxRetries: -1 })).toThrow(
      /maxRetries/,
    );
    expect(
      () =>
        new AiSdkChatModel(model, {
          settings: { temperature: NaN },
        }),
    ).toThrow(/settings must be plain JSON/);
    const v3 = { ...model, specificationVersion: 'v3' as const };
    expect(new AiSdkChatModel(v3)).toBeInstanceOf(AiSdkChatModel);
  });

  it('turns provider errors into ChatModelError (status kept, secrets blanked), retrying only what the provider marks retryable', async () => {
    const apiError = (status: number, retryable: boolean) =>
      new APICallError({
        message: `Incorrect API key sk-live-secret-1 (status ${status})`,
        url: 'https://api.example/v1/chat/completions',
        requestBodyValues: {},
        statusCode: status,
        responseHeaders: { 'retry-after-ms': '1' },
        isRetryable: retryable,
      });
    const ok = {
      content: [{ type: 'text' as const, text: 'ok' }],
      finishReason: { unified: 'stop' as const, raw: 'stop' },
      usage: usage(1, 1),
      warnings: [],
    };
    const flaky = scripted(apiError(503, true), apiError(429, true), ok);
    const chat = new AiSdkChatModel(flaky.model, {
      secrets: ['sk-live-secret-1'],
    });
    const ask = (c: AiSdkChatModel) =>
      c.complete({ messages: [{ role: 'user', content: '?' }], tools: [] });
    await expect(ask(chat)).resolves.toMatchObject({ content: 'ok' });
    expect(flaky.calls).toHaveLength(3);

    const denied = scripted(apiError(401, false), ok);
    const error = (await ask(
      new AiSdkChatModel(denied.model, { secrets: ['sk-live-secret-1'] }),
    ).catch((e: unknown) => e)) as ChatModelError;
    expect(error).toBeInstanceOf(ChatModelError);
    expect(error.status).toBe(401);
    expect(error.message).toBe(
      'AiSdkChatModel: the call to hand.made/m-1 failed with HTTP 401: Incorrect API key [redacted] (status 401)',
    );
    expect(denied.calls).toHaveLength(1);

    const down = scripted(apiError(500, true), apiError(500, true));
    await expect(
      ask(new AiSdkChatModel(down.model, { maxRetries: 1 })),
    ).rejects.toThrow(/failed with HTTP 500/);
    expect(down.calls).toHaveLength(2);

    const odd = scripted({ ...ok, content: 'nope' as never });
    await expect(ask(new AiSdkChatModel(odd.model))).rejects.toThrow(
      /the answer of hand\.made\/m-1 cannot be read \(it has no content list\)/,
    );
  });

  it("passes the caller's abort signal through and gives up on it; a model with no answer in time is a ChatModelError", async () => {
    const hanging = (o: LanguageModelV4CallOptions) =>
      new Promise<LanguageModelV4GenerateResult>((_, reject) =>
        o.abortSignal!.addEventListener('abort', () =>
          reject(new Error('aborted by signal')),
        ),
      );
    const { model, calls } = scripted(hanging, hanging, hanging);
    const controller = new AbortController();
    const asked = new AiSdkChatModel(model).complete({
      messages: [{ role: 'user', content: '?' }],
      tools: [],
      signal: controller.signal,
    });
    controller.abort(new Error('shutdown'));
    await expect(asked).rejects.toThrow('shutdown');
    expect(calls[0]!.abortSignal!.aborted).toBe(true);

    await expect(
      new AiSdkChatModel(model, { timeoutMs: 20, maxRetries: 1 }).complete({
        messages: [{ role: 'user', content: '?' }],
        tools: [],
      }),
    ).rejects.toThrow(
      'AiSdkChatModel: the call to hand.made/m-1 failed: no answer within 20 ms',
    );
    expect(calls).toHaveLength(3); // one attempt, then one retry
  });
});
