import { randomBytes } from 'node:crypto';
import { assertJson } from '../../exec/durable/canonical-json';
import {
  isFinishReason,
  type AssistantMessage,
  type ChatMessage,
  type ChatModel,
  type ChatRequest,
  type ChatTool,
  type TokenUsage,
  type ToolCall,
} from '../chat-model';
import { ChatModelError, DurableSetupError } from '../../errors';
import { Messages } from '../../errors/messages';
import type {
  AiSdkCallOptions,
  AiSdkCallSettings,
  AiSdkChatModelOptions,
  AiSdkFunctionTool,
  AiSdkGenerateResult,
  AiSdkLanguageModel,
  AiSdkPromptMessage,
  AiSdkTextPart,
  AiSdkToolCallPart,
  AiSdkToolResultPart,
} from './ai-sdk.types';
import {
  argumentsOf,
  withRetries,
  type Attempted,
  excerptOf,
  retryAfter,
  secretsOf,
  whyOf,
} from './model-calls';

const SPEC_VERSIONS: readonly string[] = ['v4', 'v3'];

/**
 * A `ChatModel` over any AI SDK language model: every provider package of the AI SDK
 * (`@ai-sdk/openai`, `@ai-sdk/anthropic`, `@ai-sdk/google`, `@ai-sdk/openai-compatible`, ...) as
 * a tool loop's model. Calls the model's `doGenerate` (no streaming) with the history as the
 * prompt and the tools as function tools; reads text, tool calls, finish reason and usage back.
 * Provider-defined tools are not offered, and provider-executed calls are not kept: the loop runs
 * only its own tools, each logged.
 * @publicApi
 */
export class AiSdkChatModel implements ChatModel {
  private readonly name: string;
  private readonly settings: AiSdkCallSettings;
  private readonly timeoutMs: number;
  private readonly maxRetries: number;
  private readonly secrets: string[];

  constructor(
    private readonly model: AiSdkLanguageModel,
    options: AiSdkChatModelOptions = {},
  ) {
    const given: unknown = model;
    if (typeof given === 'string')
      throw new DurableSetupError(Messages.aiSdkModelId(given));
    if (
      typeof given !== 'object' ||
      given === null ||
      typeof (given as { doGenerate?: unknown }).doGenerate !== 'function'
    )
      throw new DurableSetupError(Messages.aiSdkNotModel(given));
    this.name = `${String(model.provider)}/${String(model.modelId)}`;
    if (!SPEC_VERSIONS.includes(model.specificationVersion))
      throw new DurableSetupError(
        Messages.aiSdkSpecVersion(
          this.name,
          model.specificationVersion,
          SPEC_VERSIONS,
        ),
      );
    this.timeoutMs = options.timeoutMs ?? 60_000;
    this.maxRetries = options.maxRetries ?? 2;
    if (!Number.isInteger(this.timeoutMs) || this.timeoutMs < 1)
      throw new DurableSetupError(Messages.aiSdkOption('timeoutMs'));
    if (!Number.isInteger(this.maxRetries) || this.maxRetries < 0)
      throw new DurableSetupError(Messages.aiSdkOption('maxRetries'));
    this.settings = options.settings ?? {};
    try {
      assertJson(this.settings);
    } catch {
      throw new DurableSetupError(Messages.aiSdkOption('settings'));
    }
    this.secrets = secretsOf([
      ...(options.secrets ?? []),
      ...Object.values(this.settings.headers ?? {}),
    ]);
  }

  async complete(request: ChatRequest): Promise<AssistantMessage> {
    const call: AiSdkCallOptions = {
      ...this.settings,
      prompt: toPrompt(request.messages),
      ...(request.tools.length && { tools: request.tools.map(toFunctionTool) }),
    };
    return withRetries(
      () => this.attempt(call, request.signal),
      this.maxRetries,
      request.signal,
    );
  }

  private async attempt(
    call: AiSdkCallOptions,
    signal: AbortSignal | undefined,
  ): Promise<Attempted> {
    const timeout = AbortSignal.timeout(this.timeoutMs);
    let result: AiSdkGenerateResult;
    try {
      result = await this.model.doGenerate({
        ...call,
        abortSignal: signal ? AbortSignal.any([signal, timeout]) : timeout,
      });
    } catch (error) {
      if (signal?.aborted) throw signal.reason;
      return this.failure(error, timeout.aborted);
    }
    try {
      return { reply: replyOf(result) };
    } catch (error) {
      return {
        error: new ChatModelError(
          Messages.aiSdkNotResult(this.name, whyOf(error)),
        ),
        retry: false,
      };
    }
  }

  /** A provider's error (an `APICallError` when HTTP answered) as a ChatModelError. */
  private failure(
    error: unknown,
    timedOut: boolean,
  ): { error: ChatModelError; retry: boolean; delayMs?: number } {
    const e = (typeof error === 'object' && error !== null ? error : {}) as {
      statusCode?: unknown;
      isRetryable?: unknown;
      responseHeaders?: unknown;
    };
    // An answer the provider could not read comes with the 200 it had: not an HTTP error.
    const status =
      typeof e.statusCode === 'number' && e.statusCode >= 400
        ? e.statusCode
        : undefined;
    const why = timedOut
      ? Messages.openAINoAnswer(this.timeoutMs)
      : excerptOf(whyOf(error), this.secrets);
    const headers = (e.responseHeaders ?? {}) as Record<string, unknown>;
    const afterMs = Number(headers['retry-after-ms']);
    return {
      error: new ChatModelError(
        Messages.aiSdkCallFailed(this.name, status, why),
        { ...(status !== undefined && { status }), cause: error },
      ),
      retry: timedOut || e.isRetryable === true,
      ...(Number.isFinite(afterMs) && afterMs >= 0
        ? { delayMs: Math.min(afterMs, 30_000) }
        : retryAfter(
            typeof headers['retry-after'] === 'string'
              ? headers['retry-after']
              : undefined,
          )),
    };
  }
}

function toFunctionTool(tool: ChatTool): AiSdkFunctionTool {
  return {
    type: 'function',
    name: tool.name,
    ...(tool.description !== '' && { description: tool.description }),
    inputSchema: tool.parameters,
  };
}

/** The history as an AI SDK prompt; consecutive tool results make one tool message. */
export function toPrompt(
  messages: readonly ChatMessage[],
): AiSdkPromptMessage[] {
  // A result's tool name is its call's (some APIs, Gemini's, need it; ours may leave it out).
  const names = new Map<string, string>();
  const prompt: AiSdkPromptMessage[] = [];
  for (const m of messages) {
    switch (m.role) {
      case 'system':
        prompt.push({ role: 'system', content: m.content });
        break;
      case 'user':
        prompt.push({ role: 'user', content: [text(m.content)] });
        break;
      case 'assistant': {
        const calls = (m.toolCalls ?? []).map((c): AiSdkToolCallPart => {
          names.set(c.id, c.name);
          // Unparsable arguments are sent as {} (APIs such as Anthropic's refuse anything but an
          // object); the call's error result quotes what the model wrote.
          return {
            type: 'tool-call',
            toolCallId: c.id,
            toolName: c.name,
            input: c.arguments,
          };
        });
        const parts = [
          ...(m.content !== '' ? [text(m.content)] : []),
          ...calls,
        ];
        prompt.push({
          role: 'assistant',
          content: parts.length ? parts : [text('')],
        });
        break;
      }
      case 'tool': {
        const part: AiSdkToolResultPart = {
          type: 'tool-result',
          toolCallId: m.toolCallId,
          toolName: names.get(m.toolCallId) ?? m.name ?? '',
          output: { type: m.isError ? 'error-text' : 'text', value: m.content },
        };
        const last = prompt[prompt.length - 1];
        if (last?.role === 'tool') last.content.push(part);
        else prompt.push({ role: 'tool', content: [part] });
      }
    }
  }
  return prompt;
}

function text(value: string): AiSdkTextPart {
  return { type: 'text', text: value };
}

/**
 * A `doGenerate` result as a reply: its text parts joined, its tool calls (input parsed), the
 * finish reason and usage. Reasoning, sources, files and provider-executed calls are left out.
 */
export function replyOf(result: unknown): AssistantMessage {
  const r = result as {
    content?: unknown;
    finishReason?: unknown;
    usage?: unknown;
  } | null;
  if (typeof r !== 'object' || r === null || !Array.isArray(r.content))
    throw new Error(Messages.aiSdkNoContent());
  let content = '';
  const toolCalls: ToolCall[] = [];
  r.content.forEach((part: unknown, i) => {
    const p = (part ?? {}) as Record<string, unknown>;
    if (p.type === 'text' && typeof p.text === 'string') content += p.text;
    else if (p.type === 'tool-call' && p.providerExecuted !== true)
      toolCalls.push(toolCallOf(p, i));
  });
  const usage = usageOf(r.usage);
  return {
    role: 'assistant',
    content,
    ...(toolCalls.length && { toolCalls }),
    ...finishOf(r.finishReason),
    ...(usage && { usage }),
  };
}

function toolCallOf(part: Record<string, unknown>, i: number): ToolCall {
  const name = part.toolName;
  if (typeof name !== 'string' || name === '')
    throw new Error(Messages.aiSdkToolCallName(i));
  // An id is the provider's; one made up here is checkpointed with the reply, so it stays fixed.
  const id =
    typeof part.toolCallId === 'string' && part.toolCallId !== ''
      ? part.toolCallId
      : `call_${randomBytes(9).toString('base64url')}`;
  return { id, name, ...argumentsOf(part.input) };
}

function finishOf(raw: unknown): Pick<AssistantMessage, 'finishReason'> {
  const reason =
    typeof raw === 'object' && raw !== null
      ? (raw as { unified?: unknown }).unified
      : raw;
  if (reason === undefined || reason === null) return {};
  return { finishReason: isFinishReason(reason) ? reason : 'other' };
}

function usageOf(raw: unknown): TokenUsage | undefined {
  if (typeof raw !== 'object' || raw === null) return undefined;
  const u = raw as { inputTokens?: unknown; outputTokens?: unknown };
  const usage: TokenUsage = {};
  const input = countOf(u.inputTokens);
  const output = countOf(u.outputTokens);
  if (input !== undefined) usage.inputTokens = input;
  if (output !== undefined) usage.outputTokens = output;
  return Object.keys(usage).length ? usage : undefined;
}

/** A token count: `{ total }` (v3, v4) or a number (older specifications). */
function countOf(raw: unknown): number | undefined {
  const n =
    typeof raw === 'object' && raw !== null
      ? (raw as { total?: unknown }).total
      : raw;
  return typeof n === 'number' && Number.isSafeInteger(n) && n >= 0
    ? n
    : undefined;
}
