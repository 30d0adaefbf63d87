import { ToolRegistry } from 'agent-adapter';
import { fromWire } from './adapters/openai.chat-model';
import { chatTools, checkMessages } from './chat-model';

describe('chat messages', () => {
  it('keeps the known fields of each role and refuses malformed messages, naming where', () => {
    expect(
      checkMessages([
        { role: 'system', content: 's', extra: 1 },
        { role: 'assistant', content: null, toolCalls: [] },
        {
          role: 'assistant',
          content: 'x',
          toolCalls: [{ id: 'a', name: 't', arguments: { k: 1 } }],
        },
        { role: 'tool', toolCallId: 'a', content: 'r', isError: true },
      ]),
    ).toEqual([
      { role: 'system', content: 's' },
      { role: 'assistant', content: '' },
      {
        role: 'assistant',
        content: 'x',
        toolCalls: [{ id: 'a', name: 't', arguments: { k: 1 } }],
      },
      { role: 'tool', toolCallId: 'a', content: 'r', isError: true },
    ]);
    expect(() => checkMessages('hi')).toThrow(/array/);
    expect(() => checkMessages([{ role: 'user' }])).toThrow(
      /messages\[0\]\.content/,
    );
    expect(() => checkMessages([{ role: 'tool', content: 'r' }])).toThrow(
      /toolCallId/,
    );
    expect(() =>
      checkMessages([
        {
          role: 'assistant',
          content: '',
          toolCalls: [{ id: 'a', name: 't', arguments: [1] }],
        },
      ]),
    ).toThrow(/toolCalls\[0\]\.arguments must be an object/);
  });

  it("keeps a reply's finish reason and token counts (plain JSON), and refuses odd ones", () => {
    expect(
      checkMessages([
        {
          role: 'assistant',
          content: 'x',
          finishReason: 'stop',
          usage: { inputTokens: 3, outputTokens: 0, raw: { x: 1 } },
        },
        { role: 'assistant', content: 'y', finishReason: null, usage: {} },
      ]),
    ).toEqual([
      {
        role: 'assistant',
        content: 'x',
        finishReason: 'stop',
        usage: { inputTokens: 3, outputTokens: 0 },
      },
      { role: 'assistant', content: 'y', usage: {} },
    ]);
    const one = (m: object) => () =>
      checkMessages([{ role: 'assistant', content: '', ...m }]);
    expect(one({ finishReason: 'tool_calls' })).toThrow(
      /messages\[0\]\.finishReason must be one of "stop", .*got "tool_calls"/,
    );
    expect(one({ usage: 5 })).toThrow(/messages\[0\]\.usage must be/);
    expect(one({ usage: { inputTokens: -1 } })).toThrow(/usage must be/);
    expect(one({ usage: { outputTokens: 1.5 } })).toThrow(/usage must be/);
  });

  it('describes every registered tool for the model, with a default schema', () => {
    const registry = new ToolRegistry()
      .register('a', () => 1, {
        description: 'A',
        parameters: { type: 'object', properties: { x: { type: 'number' } } },
      })
      .register('b', () => 2);
    expect(chatTools(registry)).toEqual([
      {
        name: 'a',
        description: 'A',
        parameters: { type: 'object', properties: { x: { type: 'number' } } },
      },
      {
        name: 'b',
        description: '',
        parameters: { type: 'object', properties: {} },
      },
    ]);
  });
});

describe('reading a chat completion', () => {
  const completion = (message: unknown) => ({ choices: [{ message }] });

  it('gives missing tool call ids a random one, accepts arguments sent as an object, joins text parts', () => {
    const reply = fromWire(
      completion({
        content: [
          { type: 'text', text: 'a' },
          { type: 'text', text: 'b' },
        ],
        tool_calls: [
          { type: 'function', function: { name: 't', arguments: { k: 1 } } },
        ],
      }),
    );
    expect(reply.content).toBe('ab');
    expect(reply.toolCalls).toEqual([
      {
        id: expect.stringMatching(/^call_.+/) as string,
        name: 't',
        arguments: { k: 1 },
      },
    ]);
  });

  it('refuses a completion without a message, or a tool call without a name', () => {
    expect(() => fromWire({})).toThrow(/choices/);
    expect(() =>
      fromWire(completion({ tool_calls: [{ function: {} }] })),
    ).toThrow(/function name/);
  });

  it('keeps numbers JSON cannot store as invalid arguments', () => {
    const reply = fromWire(
      completion({
        tool_calls: [
          { id: 'x', function: { name: 't', arguments: '{"n": 1e999}' } },
        ],
      }),
    );
    expect(reply.toolCalls?.[0]).toEqual({
      id: 'x',
      name: 't',
      arguments: {},
      invalidArguments: '{"n": 1e999}',
    });
  });
});
