/**
 * OpenAIChatModel against a real local HTTP server speaking chat completions (test/utils/
 * chat-server.ts): the request it sends, the replies it reads (tool calls included), and its
 * errors, which name the status and body but never the API key.
 */
import { ChatModelError, OpenAIChatModel, type ChatTool } from 'agent-adapter';
import { ChatServer, callTools, say } from '../utils/chat-server';

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

describe('OpenAIChatModel (chat-completions over HTTP)', () => {
  let server: ChatServer;
  beforeEach(async () => {
    server = await ChatServer.start();
  });
  afterEach(async () => {
    await server.close();
  });

  const model = (
    extra: Partial<ConstructorParameters<typeof OpenAIChatModel>[0]> = {},
  ) =>
    new OpenAIChatModel({
      baseUrl: server.baseUrl,
      model: 'llama3.1',
      maxRetries: 0,
      ...extra,
    });

  it('posts model, messages and function tools to {baseUrl}/chat/completions, with the key as a bearer token', async () => {
    server.script(
      say('Hello!', {
        usage: { prompt_tokens: 12, completion_tokens: 3, total_tokens: 15 },
      }),
    );
    const reply = await model({
      apiKey: 'sk-test-123456',
      headers: { 'x-org': 'acme' },
      body: { temperature: 0 },
    }).complete({
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'Hi' },
      ],
      tools: TOOLS,
    });
    expect(reply).toEqual({
      role: 'assistant',
      content: 'Hello!',
      finishReason: 'stop',
      usage: { inputTokens: 12, outputTokens: 3 },
    });
    const [req] = server.requests;
    expect(req!.path).toBe('/v1/chat/completions');
    expect(req!.headers.authorization).toBe('Bearer sk-test-123456');
    expect(req!.headers['x-org']).toBe('acme');
    expect(req!.body).toEqual({
      model: 'llama3.1',
      temperature: 0,
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'Hi' },
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

  it('sends no tools field and no authorization header when there are none (local servers)', async () => {
    server.script(say('ok'));
    await model({ baseUrl: `${server.baseUrl}/` }).complete({
      messages: [{ role: 'user', content: 'x' }],
      tools: [],
    });
    const [req] = server.requests;
    expect(req!.body).not.toHaveProperty('tools');
    expect(req!.headers).not.toHaveProperty('authorization');
  });

  it('reads tool calls, their JSON-string arguments parsed into objects', async () => {
    server.script(
      callTools([
        { name: 'weather', arguments: { city: 'Oslo' }, id: 'call_a' },
        { name: 'weather', arguments: { city: 'Rome' }, id: 'call_b' },
      ]),
    );
    const reply = await model().complete({
      messages: [{ role: 'user', content: 'Oslo and Rome?' }],
      tools: TOOLS,
    });
    expect(reply).toEqual({
      role: 'assistant',
      content: '',
      toolCalls: [
        { id: 'call_a', name: 'weather', arguments: { city: 'Oslo' } },
        { id: 'call_b', name: 'weather', arguments: { city: 'Rome' } },
      ],
      finishReason: 'tool-calls',
      usage: { inputTokens: 1, outputTokens: 1 },
    });
  });

  it("reads the finish reason in the AI SDK's words, and usage only when the server counts it", async () => {
    server.script(
      say('cut', { finish: 'length', usage: null }),
      say('odd', { finish: 'eos_token', usage: { prompt_tokens: 4 } }),
      say('none', { finish: null, usage: null }),
    );
    const ask = () =>
      model().complete({
        messages: [{ role: 'user', content: 'x' }],
        tools: [],
      });
    expect(await ask()).toEqual({
      role: 'assistant',
      content: 'cut',
      finishReason: 'length',
    });
    expect(await ask()).toEqual({
      role: 'assistant',
      content: 'odd',
      finishReason: 'other',
      usage: { inputTokens: 4 },
    });
    expect(await ask()).toEqual({ role: 'assistant', content: 'none' });
  });

  it('sends a history with tool calls and tool results in the API shape', async () => {
    server.script(say('Sunny.'));
    await model().complete({
      messages: [
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
              invalidArguments: '{city: Oslo',
            },
          ],
        },
        { role: 'tool', toolCallId: 'c1', name: 'weather', content: 'sun' },
        {
          role: 'tool',
          toolCallId: 'c2',
          content: 'Error: bad',
          isError: true,
        },
      ],
      tools: TOOLS,
    });
    expect(server.requests[0]!.body.messages).toEqual([
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
          // What the model wrote goes back as it wrote it.
          {
            id: 'c2',
            type: 'function',
            function: { name: 'weather', arguments: '{city: Oslo' },
          },
        ],
      },
      { role: 'tool', tool_call_id: 'c1', content: 'sun' },
      { role: 'tool', tool_call_id: 'c2', content: 'Error: bad' },
    ]);
  });

  it('keeps arguments that are not a JSON object as invalidArguments instead of throwing', async () => {
    server.script(
      callTools([
        { name: 'weather', arguments: '{"city": "Oslo"', id: 'bad_json' },
        { name: 'weather', arguments: '[1,2]', id: 'not_object' },
        { name: 'weather', arguments: '', id: 'empty' },
      ]),
    );
    const reply = await model().complete({
      messages: [{ role: 'user', content: 'x' }],
      tools: TOOLS,
    });
    expect(reply.toolCalls).toEqual([
      {
        id: 'bad_json',
        name: 'weather',
        arguments: {},
        invalidArguments: '{"city": "Oslo"',
      },
      {
        id: 'not_object',
        name: 'weather',
        arguments: {},
        invalidArguments: '[1,2]',
      },
      { id: 'empty', name: 'weather', arguments: {} },
    ]);
  });

  it('an HTTP error is a ChatModelError naming the status and the body, never the API key', async () => {
    const key = 'sk-secret-abcdef0123456789';
    server.script(() => ({
      status: 401,
      json: { error: { message: `Incorrect API key provided: ${key}` } },
    }));
    const err = await model({ apiKey: key })
      .complete({ messages: [{ role: 'user', content: 'x' }], tools: [] })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ChatModelError);
    const e = err as ChatModelError;
    expect(e.status).toBe(401);
    expect(e.message).toContain('401');
    expect(e.message).toContain('Incorrect API key provided');
    expect(e.message).toContain(server.baseUrl);
    expect(e.message).not.toContain(key);
    expect(JSON.stringify(e)).not.toContain(key);
    expect(server.requests).toHaveLength(1); // a 401 is not retried
  });

  it('retries 429/5xx (honouring retry-after), and gives up after maxRetries', async () => {
    server.script(
      { status: 503, headers: { 'retry-after': '0' }, raw: 'busy' },
      {
        status: 429,
        headers: { 'retry-after': '0' },
        json: { error: 'slow down' },
      },
      say('finally'),
    );
    const reply = await model({ maxRetries: 2 }).complete({
      messages: [{ role: 'user', content: 'x' }],
      tools: [],
    });
    expect(reply.content).toBe('finally');
    expect(server.requests).toHaveLength(3);

    server.requests.length = 0;
    server.handler = () => ({
      status: 500,
      headers: { 'retry-after': '0' },
      raw: 'boom',
    });
    const err = await model({ maxRetries: 1 })
      .complete({ messages: [{ role: 'user', content: 'x' }], tools: [] })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ChatModelError);
    expect((err as Error).message).toMatch(/500.*boom/);
    expect(server.requests).toHaveLength(2);
  });

  it('a body that is not a chat completion is a ChatModelError', async () => {
    server.script(
      { raw: '<html>proxy login</html>' },
      { json: { choices: [] } },
    );
    await expect(
      model().complete({
        messages: [{ role: 'user', content: 'x' }],
        tools: [],
      }),
    ).rejects.toThrow(/not a chat completion.*proxy login/);
    await expect(
      model().complete({
        messages: [{ role: 'user', content: 'x' }],
        tools: [],
      }),
    ).rejects.toThrow(/no choices\[0\]\.message/);
  });

  it('no answer in time, or no server, is a ChatModelError', async () => {
    server.script({ ...say('late'), delayMs: 1000 });
    await expect(
      model({ timeoutMs: 100 }).complete({
        messages: [{ role: 'user', content: 'x' }],
        tools: [],
      }),
    ).rejects.toThrow(/no answer within 100 ms/);

    // The new server binds first, so it cannot get the old one's port.
    const fresh = await ChatServer.start();
    const gone = server.baseUrl;
    await server.close();
    server = fresh;
    await expect(
      model({ baseUrl: gone }).complete({
        messages: [{ role: 'user', content: 'x' }],
        tools: [],
      }),
    ).rejects.toBeInstanceOf(ChatModelError);
  });

  it('refuses a base URL that is not http(s)', () => {
    expect(
      () => new OpenAIChatModel({ baseUrl: 'localhost:11434', model: 'm' }),
    ).toThrow(/baseUrl/);
  });
});
