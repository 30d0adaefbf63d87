import { randomBytes } from 'node:crypto';
import { assertJson } from '../../exec/durable/canonical-json';
import type {
  AssistantMessage,
  ChatMessage,
  ChatModel,
  ChatRequest,
  FinishReason,
  JsonObject,
  TokenUsage,
  ToolCall,
} from '../chat-model';
import { ChatModelError, DurableSetupError } from '../../errors';
import { Messages } from '../../errors/messages';
import {
  argumentsOf,
  withRetries,
  type Attempted,
  excerptOf,
  redact,
  retryAfter,
  secretsOf,
  whyOf,
} from './model-calls';

/** @publicApi */
export interface OpenAIChatModelOptions {
  /**
   * The API's base URL, up to and including the version: `https://api.openai.com/v1`,
   * `http://localhost:11434/v1` (Ollama), `http://localhost:8000/v1` (vLLM).
   */
  baseUrl: string;
  /** The model name the server knows (`gpt-4o-mini`, `llama3.1`, ...). */
  model: string;
  /** Sent as `Authorization: Bearer <apiKey>`; local servers usually need none. Never in errors. */
  apiKey?: string;
  /** More request headers (an organisation, a gateway's key, ...). Their values are kept out of errors. */
  headers?: Record<string, string>;
  /** More fields of the request body (`temperature`, `max_tokens`, `tool_choice`, ...). */
  body?: JsonObject;
  /** How long one attempt may take. @default 60000 */
  timeoutMs?: number;
  /**
   * Attempts after the first one for answers worth retrying: no response (network, timeout) or
   * HTTP 408, 409, 429 and 5xx. `retry-after` is honoured (up to 30 s).
   * @default 2
   */
  maxRetries?: number;
  /** The fetch to use. @default globalThis.fetch */
  fetch?: typeof fetch;
}

const RETRY_STATUS = new Set([408, 409, 429]);

/**
 * A `ChatModel` for the OpenAI-compatible chat-completions HTTP API: OpenAI and the many hosted
 * services that copy it, and local servers such as Ollama, vLLM, llama.cpp or LM Studio. Uses
 * Node's `fetch`; tools are sent as `function` tools with their JSON schema.
 * @publicApi
 */
export class OpenAIChatModel implements ChatModel {
  private readonly url: string;
  private readonly secrets: string[];
  private readonly timeoutMs: number;
  private readonly maxRetries: number;
  private readonly fetch: typeof fetch;

  constructor(private readonly options: OpenAIChatModelOptions) {
    if (
      typeof options?.baseUrl !== 'string' ||
      !/^https?:\/\//.test(options.baseUrl)
    )
      throw new DurableSetupError(Messages.openAIOption('baseUrl'));
    if (typeof options.model !== 'string' || options.model === '')
      throw new DurableSetupError(Messages.openAIOption('model'));
    this.url = `${options.baseUrl.replace(/\/+$/, '')}/chat/completions`;
    this.timeoutMs = options.timeoutMs ?? 60_000;
    this.maxRetries = options.maxRetries ?? 2;
    if (!Number.isInteger(this.timeoutMs) || this.timeoutMs < 1)
      throw new DurableSetupError(Messages.openAIOption('timeoutMs'));
    if (!Number.isInteger(this.maxRetries) || this.maxRetries < 0)
      throw new DurableSetupError(Messages.openAIOption('maxRetries'));
    if (options.body !== undefined) assertJson(options.body, 'body');
    this.fetch = options.fetch ?? globalThis.fetch;
    // Whatever could authenticate is blanked out of anything an error repeats from the server.
    this.secrets = secretsOf([
      options.apiKey,
      ...Object.values(options.headers ?? {}),
    ]);
  }

  async complete(request: ChatRequest): Promise<AssistantMessage> {
    const body = JSON.stringify({
      ...this.options.body,
      model: this.options.model,
      messages: request.messages.map(toWire),
      ...(request.tools.length && {
        tools: request.tools.map((t) => ({
          type: 'function',
          function: {
            name: t.name,
            description: t.description,
            parameters: t.parameters,
          },
        })),
      }),
    });
    return withRetries(
      () => this.attempt(body, request.signal),
      this.maxRetries,
      request.signal,
    );
  }

  private async attempt(
    body: string,
    signal: AbortSignal | undefined,
  ): Promise<Attempted> {
    const timeout = AbortSignal.timeout(this.timeoutMs);
    let response: Response;
    let text: string;
    try {
      response = await this.fetch(this.url, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'application/json',
          ...this.options.headers,
          ...(this.options.apiKey && {
            authorization: `Bearer ${this.options.apiKey}`,
          }),
        },
        body,
        signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
      });
      text = await response.text();
    } catch (error) {
      if (signal?.aborted) throw signal.reason;
      const why = timeout.aborted
        ? Messages.openAINoAnswer(this.timeoutMs)
        : this.redact(whyOf(error));
      return {
        error: new ChatModelError(Messages.openAIPostFailed(this.url, why), {
          cause: error,
        }),
        retry: true,
      };
    }
    if (!response.ok) {
      const status = response.status;
      return {
        error: new ChatModelError(
          Messages.openAIStatus(
            this.url,
            status,
            response.statusText,
            this.excerpt(text),
          ),
          { status },
        ),
        retry: RETRY_STATUS.has(status) || status >= 500,
        ...retryAfter(response.headers.get('retry-after')),
      };
    }
    try {
      return { reply: fromWire(JSON.parse(text) as unknown) };
    } catch (error) {
      return {
        error: new ChatModelError(
          Messages.openAINotCompletion(
            this.url,
            whyOf(error),
            this.excerpt(text),
          ),
        ),
        retry: false,
      };
    }
  }

  private redact(text: string): string {
    return redact(text, this.secrets);
  }

  private excerpt(text: string): string {
    return excerptOf(text, this.secrets);
  }
}

/** A chat message in the API's shape. */
function toWire(m: ChatMessage): JsonObject {
  switch (m.role) {
    case 'tool':
      return { role: 'tool', tool_call_id: m.toolCallId, content: m.content };
    case 'assistant':
      return m.toolCalls?.length
        ? {
            role: 'assistant',
            content: m.content === '' ? null : m.content,
            tool_calls: m.toolCalls.map((c) => ({
              id: c.id,
              type: 'function',
              function: {
                name: c.name,
                arguments: c.invalidArguments ?? JSON.stringify(c.arguments),
              },
            })),
          }
        : { role: 'assistant', content: m.content };
    default:
      return { role: m.role, content: m.content };
  }
}

/** The first choice's message of a chat completion; throws if there is none. */
export function fromWire(completion: unknown): AssistantMessage {
  const choices = (completion as { choices?: unknown } | null)?.choices;
  const choice = Array.isArray(choices)
    ? (choices[0] as { message?: unknown; finish_reason?: unknown } | undefined)
    : undefined;
  const message = choice?.message;
  if (typeof message !== 'object' || message === null)
    throw new Error(Messages.completionNoMessage());
  const m = message as { content?: unknown; tool_calls?: unknown };
  const content = textOf(m.content);
  const facts = {
    ...finishOf(choice?.finish_reason),
    ...usageOf((completion as { usage?: unknown }).usage),
  };
  if (m.tool_calls === undefined || m.tool_calls === null)
    return { role: 'assistant', content, ...facts };
  if (!Array.isArray(m.tool_calls))
    throw new Error(Messages.completionToolCalls());
  const toolCalls = m.tool_calls.map((c: unknown, i) => toolCallOf(c, i));
  return {
    role: 'assistant',
    content,
    ...(toolCalls.length && { toolCalls }),
    ...facts,
  };
}

/** The API's finish reasons, in the AI SDK's words (which `AssistantMessage` uses). */
const FINISH: Readonly<Record<string, FinishReason>> = {
  stop: 'stop',
  length: 'length',
  tool_calls: 'tool-calls',
  function_call: 'tool-calls',
  content_filter: 'content-filter',
};

function finishOf(raw: unknown): Pick<AssistantMessage, 'finishReason'> {
  if (typeof raw !== 'string' || raw === '') return {};
  return { finishReason: FINISH[raw] ?? 'other' };
}

function usageOf(raw: unknown): Pick<AssistantMessage, 'usage'> {
  if (typeof raw !== 'object' || raw === null) return {};
  const { prompt_tokens: input, completion_tokens: output } = raw as {
    prompt_tokens?: unknown;
    completion_tokens?: unknown;
  };
  const count = (n: unknown) =>
    typeof n === 'number' && Number.isSafeInteger(n) && n >= 0;
  const usage: TokenUsage = {
    ...(count(input) && { inputTokens: input as number }),
    ...(count(output) && { outputTokens: output as number }),
  };
  return Object.keys(usage).length ? { usage } : {};
}

function toolCallOf(c: unknown, i: number): ToolCall {
  const call = (c ?? {}) as {
    id?: unknown;
    function?: { name?: unknown; arguments?: unknown };
  };
  const name = call.function?.name;
  if (typeof name !== 'string' || name === '')
    throw new Error(Messages.completionToolCallName(i));
  // Some servers leave the id out; the reply is checkpointed, so a random one stays fixed.
  const id =
    typeof call.id === 'string' && call.id !== ''
      ? call.id
      : `call_${randomBytes(9).toString('base64url')}`;
  return { id, name, ...argumentsOf(call.function?.arguments) };
}

function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  // Content as a list of parts: keep the text ones.
  if (Array.isArray(content)) {
    return content
      .map((p: unknown) =>
        typeof (p as { text?: unknown })?.text === 'string'
          ? (p as { text: string }).text
          : '',
      )
      .join('');
  }
  return '';
}
