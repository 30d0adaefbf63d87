/**
 * AiSdkChatModel over a real AI SDK provider package, `@ai-sdk/openai-compatible`, against the real
 * local chat-completions server (test/utils/chat-server.ts) over HTTP: the request the provider
 * sends for our history and tools, the replies it reads back (tool calls, finish reason, usage),
 * its errors as ChatModelError, and a durable tool loop run end to end with it.
 */
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { defaultSettingsMiddleware, wrapLanguageModel } from 'ai';
import {
  AiSdkChatModel,
  ChatModelError,
  MemoryCheckpointStore,
  ToolRegistry,
  runToolLoop,
  type AiSdkChatModelOptions,
  type ChatTool,
} from 'agent-adapter';
import { KEY } from 'agent-adapter/testing/fixtures';
import { ChatServer, callTools, say, toolResults } from '../utils/chat-server';

const TOOLS: ChatTool[] = [
  {
    name: 'weather',
    description: 'The weather in a city',
    parameters: {
      type: 'object',
      properties: { city: { type: 'string' } },
      required: ['city'],
    },
  },
];

describe('AiSdkChatModel through @ai-sdk/openai-compatible (chat completions over HTTP)', () => {
  let server: ChatServer;
  beforeEach(async () => {
    server = await ChatServer.start();
  });
  afterEach(() => server.close());

  const provider = (apiKey?: string) =>
    createOpenAICompatible({
      name: 'local',
      baseURL: server.baseUrl,
      ...(apiKey && { apiKey }),
    });
  const model = (options: AiSdkChatModelOptions = {}, apiKey?: string) =>
    new AiSdkChatModel(provider(apiKey).chatModel('llama3.1'), {
      maxRetries: 0,
      ...options,
    });

  it('posts the history (tool calls and results included) and the function tools; the key goes as a bearer token', async () => {
    server.script(say('Rain in Oslo.'));
    await model({ settings: { temperature: 0 } }, 'sk-test-123456').complete({
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'Oslo?' },
        {
          role: 'assistant',
          content: '',
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
        { role: 'tool', toolCallId: 'c1', name: 'weather', content: 'rain' },
        {
          role: 'tool',
          toolCallId: 'c2',
          content: 'not JSON',
          isError: true,
        },
      ],
      tools: TOOLS,
    });
    const [req] = server.requests;
    expect(req!.path).toBe('/v1/chat/completions');
    expect(req!.headers.authorization).toBe('Bearer sk-test-123456');
    expect(req!.body).toEqual({
      model: 'llama3.1',
      temperature: 0,
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'Oslo?' },
        {
          role: 'assistant',
          content: null,
          tool_calls: [
            {
              id: 'c1',
              type: 'function',
              function: { name: 'weather', arguments: '{"city":"Oslo"}' },
            },
            {
              id: 'c2',
              type: 'function',
              function: { name: 'weather', arguments: '{}' },
            },
          ],
        },
        { role: 'tool', tool_call_id: 'c1', content: 'rain' },
        { role: 'tool', tool_call_id: 'c2', content: 'not JSON' },
      ],
      tools: [
        {
          type: 'function',
          function: {
            name: 'weather',
            description: 'The weather in a city',
            parameters: TOOLS[0]!.parameters,
          },
        },
      ],
    });
  });

  it('reads tool calls (arguments parsed; unparsable ones kept as invalidArguments), finish reason and usage', async () => {
    server.script(
      callTools(
        [
          { name: 'weather', arguments: { city: 'Oslo' }, id: 'call_a' },
          { name: 'weather', arguments: '{city: Rome', id: 'call_b' },
        ],
        'Checking.',
        {
          usage: { prompt_tokens: 42, completion_tokens: 7, total_tokens: 49 },
        },
      ),
      say('Done.', { finish: 'length', usage: null }),
    );
    const chat = model();
    const ask = () =>
      chat.complete({
        messages: [{ role: 'user', content: 'Oslo and Rome?' }],
        tools: TOOLS,
      });
    expect(await ask()).toEqual({
      role: 'assistant',
      content: 'Checking.',
      toolCalls: [
        { id: 'call_a', name: 'weather', arguments: { city: 'Oslo' } },
        {
          id: 'call_b',
          name: 'weather',
          arguments: {},
          invalidArguments: '{city: Rome',
        },
      ],
      finishReason: 'tool-calls',
      usage: { inputTokens: 42, outputTokens: 7 },
    });
    expect(await ask()).toEqual({
      role: 'assistant',
      content: 'Done.',
      finishReason: 'length',
    });
  });

  it("an HTTP error is a ChatModelError with its status and the server's words, never the key; retryable ones are retried", async () => {
    server.script(
      {
        status: 401,
        json: { error: { message: 'bad key sk-test-123456', type: 'auth' } },
      },
      { status: 503, json: { error: { message: 'overloaded' } } },
      say('back'),
    );
    const error = (await model(
      { secrets: ['sk-test-123456'] },
      'sk-test-123456',
    )
      .complete({ messages: [{ role: 'user', content: 'x' }], tools: [] })
      .catch((e: unknown) => e)) as ChatModelError;
    expect(error).toBeInstanceOf(ChatModelError);
    expect(error.status).toBe(401);
    expect(error.message).toBe(
      'AiSdkChatModel: the call to local.chat/llama3.1 failed with HTTP 401: bad key [redacted]',
    );
    expect(server.requests).toHaveLength(1); // 401 is not retried

    const reply = await model({ maxRetries: 1 }).complete({
      messages: [{ role: 'user', content: 'x' }],
      tools: [],
    });
    expect(reply.content).toBe('back');
    expect(server.requests).toHaveLength(3);
  });

  it('no server, or a body that is not a completion, is a ChatModelError naming the model', async () => {
    const gone = new AiSdkChatModel(
      createOpenAICompatible({
        name: 'gone',
        baseURL: 'http://127.0.0.1:9/v1',
      }).chatModel('m'),
      { maxRetries: 0 },
    );
    await expect(
      gone.complete({ messages: [{ role: 'user', content: 'x' }], tools: [] }),
    ).rejects.toThrow(/^AiSdkChatModel: the call to gone\.chat\/m failed: /);

    server.script({ json: { nothing: true } });
    const error = await model()
      .complete({ messages: [{ role: 'user', content: 'x' }], tools: [] })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ChatModelError);
    expect((error as Error).message).toMatch(
      /^AiSdkChatModel: the call to local\.chat\/llama3\.1 failed: Invalid JSON response .*"nothing":true.* "path": \[ "choices" \]/,
    );
    expect((error as ChatModelError).status).toBeUndefined();
  });

  it('runs a durable tool loop end to end: tools run, results go back over HTTP, the reply is the final answer', async () => {
    server.script(
      callTools([{ name: 'weather', arguments: { city: 'Oslo' }, id: 'w1' }]),
      (request) => say(`It is ${toolResults(request).w1}.`),
    );
    const ran: string[] = [];
    const registry = new ToolRegistry().register(
      'weather',
      (a: { city: string }) => {
        ran.push(a.city);
        return `rain in ${a.city}`;
      },
      {
        description: 'The weather in a city',
        parameters: TOOLS[0]!.parameters,
      },
    );
    // ai 7's own middleware wraps the provider's model: still a v4 model for the adapter.
    const wrapped = wrapLanguageModel({
      model: provider().chatModel('llama3.1'),
      middleware: defaultSettingsMiddleware({ settings: { temperature: 0.5 } }),
    });
    const store = new MemoryCheckpointStore();
    const r = await runToolLoop(
      new AiSdkChatModel(wrapped),
      registry,
      [{ role: 'user', content: 'Weather in Oslo?' }],
      { checkpoints: store, checkpointKey: KEY, runId: 'weather-1' },
    );
    expect(r).toMatchObject({
      status: 'done',
      modelCalls: 2,
      reply: {
        role: 'assistant',
        content: 'It is rain in Oslo.',
        finishReason: 'stop',
        usage: { inputTokens: 1, outputTokens: 1 },
      },
    });
    expect(ran).toEqual(['Oslo']);
    expect(server.requests).toHaveLength(2);
    expect(server.requests[0]!.body.temperature).toBe(0.5);
    expect(server.requests[0]!.body.tools?.map((t) => t.function.name)).toEqual(
      ['weather'],
    );
    expect(toolResults(server.requests[1]!)).toEqual({ w1: 'rain in Oslo' });
    // The reply with its tool call was checkpointed, finish reason and usage included.
    expect(r.messages[1]).toEqual({
      role: 'assistant',
      content: '',
      toolCalls: [{ id: 'w1', name: 'weather', arguments: { city: 'Oslo' } }],
      finishReason: 'tool-calls',
      usage: { inputTokens: 1, outputTokens: 1 },
    });
  });
});
