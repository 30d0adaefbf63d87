import type { Json } from '../exec/durable/canonical-json';
import type { JsonSchema, ToolRegistry } from '../exec/tool.registry';
import { Messages } from '../errors/messages';

/** A JSON object (tool arguments). @publicApi */
export type JsonObject = { [key: string]: Json };

/**
 * A tool call the model asked for. Plain JSON, like every message: the history is sealed into
 * checkpoints.
 * @publicApi
 */
export type ToolCall = {
  /** The model's id for the call; the tool's result message refers to it. */
  id: string;
  name: string;
  arguments: JsonObject;
  /**
   * Set when the model's arguments were not a JSON object: its raw text (kept so the history says
   * what the model wrote). `arguments` is then `{}`, and the loop answers the call with an error
   * result instead of running the tool.
   */
  invalidArguments?: string;
};

/** @publicApi */
export type SystemMessage = { role: 'system'; content: string };
/** @publicApi */
export type UserMessage = { role: 'user'; content: string };
/**
 * Why a model stopped answering, in the AI SDK's words: `stop` (done), `tool-calls` (it waits for
 * tool results), `length` (out of tokens), `content-filter`, `error`, `interrupted` (the answer may
 * be cut short) or `other`.
 * @publicApi
 */
export type FinishReason =
  | 'stop'
  | 'length'
  | 'content-filter'
  | 'tool-calls'
  | 'error'
  | 'interrupted'
  | 'other';

/** Tokens one model call used, as the provider counted them (a count it did not give is absent). @publicApi */
export type TokenUsage = { inputTokens?: number; outputTokens?: number };

/** A model's reply: text, tool calls, or both. @publicApi */
export type AssistantMessage = {
  role: 'assistant';
  content: string;
  toolCalls?: ToolCall[];
  /** Why the model stopped, when the adapter knows (the built-in adapters do). */
  finishReason?: FinishReason;
  /** What the call that made this reply used, when the provider says. */
  usage?: TokenUsage;
};
/** A tool's result, fed back to the model. @publicApi */
export type ToolMessage = {
  role: 'tool';
  toolCallId: string;
  /** The tool's name (for readers of the history; not sent to every API). */
  name?: string;
  content: string;
  /** The call failed (or was refused); `content` says why, in words the model can act on. */
  isError?: boolean;
};
/** @publicApi */
export type ChatMessage =
  SystemMessage | UserMessage | AssistantMessage | ToolMessage;

/** A tool as a model sees it. @publicApi */
export interface ChatTool {
  name: string;
  description: string;
  /** JSON schema of the arguments object. */
  parameters: JsonSchema;
}

/** @publicApi */
export interface ChatRequest {
  messages: readonly ChatMessage[];
  tools: readonly ChatTool[];
  signal?: AbortSignal;
}

/**
 * The port a tool loop talks to a model through. `complete` returns the model's next message;
 * it is not a tool call (it is not logged), so after a crash during it, it is made again.
 * @publicApi
 */
export interface ChatModel {
  complete(request: ChatRequest): Promise<AssistantMessage>;
}

/** The registry's tools described for a model (every tool is offered). */
export function chatTools(registry: ToolRegistry): ChatTool[] {
  return registry.list().map((t) => ({
    name: t.name,
    description: t.description ?? '',
    parameters: t.parameters ?? { type: 'object', properties: {} },
  }));
}

const ROLES = new Set(['system', 'user', 'assistant', 'tool']);
/** Whether `value` is one of the finish reasons (an adapter maps any other to `other`). */
export function isFinishReason(value: unknown): value is FinishReason {
  return typeof value === 'string' && FINISH_REASONS.has(value);
}

const FINISH_REASONS: ReadonlySet<string> = new Set<FinishReason>([
  'stop',
  'length',
  'content-filter',
  'tool-calls',
  'error',
  'interrupted',
  'other',
]);

/**
 * Checks messages are well-formed plain data (throws `TypeError` naming the first problem), and
 * returns copies holding only the known fields.
 */
export function checkMessages(
  messages: unknown,
  where = 'messages',
): ChatMessage[] {
  if (!Array.isArray(messages))
    throw new TypeError(Messages.chatMessagesArray(where));
  return messages.map((m, i) => checkMessage(m, `${where}[${i}]`));
}

export function checkMessage(m: unknown, where: string): ChatMessage {
  if (typeof m !== 'object' || m === null || Array.isArray(m))
    throw new TypeError(Messages.chatObject(where));
  const msg = m as Record<string, unknown>;
  const role = msg.role;
  if (typeof role !== 'string' || !ROLES.has(role)) {
    throw new TypeError(Messages.chatRole(where, role));
  }
  const content = msg.content ?? (role === 'assistant' ? '' : undefined);
  if (typeof content !== 'string')
    throw new TypeError(Messages.chatContent(where));
  switch (role) {
    case 'system':
    case 'user':
      return { role, content };
    case 'tool': {
      if (typeof msg.toolCallId !== 'string' || msg.toolCallId === '')
        throw new TypeError(Messages.chatToolCallId(where));
      return {
        role,
        toolCallId: msg.toolCallId,
        ...(typeof msg.name === 'string' && { name: msg.name }),
        content,
        ...(msg.isError === true && { isError: true }),
      };
    }
    default: {
      const about = replyFacts(msg, where);
      if (msg.toolCalls === undefined || msg.toolCalls === null)
        return { role: 'assistant', content, ...about };
      if (!Array.isArray(msg.toolCalls))
        throw new TypeError(Messages.chatToolCalls(where));
      const toolCalls = msg.toolCalls.map((c, i) =>
        checkToolCall(c, `${where}.toolCalls[${i}]`),
      );
      return {
        role: 'assistant',
        content,
        ...(toolCalls.length && { toolCalls }),
        ...about,
      };
    }
  }
}

/** A reply's finish reason and usage, checked (they are sealed into checkpoints as plain JSON). */
function replyFacts(
  msg: Record<string, unknown>,
  where: string,
): Pick<AssistantMessage, 'finishReason' | 'usage'> {
  const { finishReason, usage } = msg;
  const out: Pick<AssistantMessage, 'finishReason' | 'usage'> = {};
  if (finishReason !== undefined && finishReason !== null) {
    if (!isFinishReason(finishReason))
      throw new TypeError(
        Messages.chatFinishReason(where, finishReason, [...FINISH_REASONS]),
      );
    out.finishReason = finishReason;
  }
  if (usage !== undefined && usage !== null) {
    if (typeof usage !== 'object' || Array.isArray(usage))
      throw new TypeError(Messages.chatUsage(where));
    const counts: TokenUsage = {};
    for (const field of ['inputTokens', 'outputTokens'] as const) {
      const n = (usage as Record<string, unknown>)[field];
      if (n === undefined || n === null) continue;
      if (typeof n !== 'number' || !Number.isSafeInteger(n) || n < 0)
        throw new TypeError(Messages.chatUsage(where));
      counts[field] = n;
    }
    out.usage = counts;
  }
  return out;
}

function checkToolCall(c: unknown, where: string): ToolCall {
  if (typeof c !== 'object' || c === null)
    throw new TypeError(Messages.chatObject(where));
  const call = c as Record<string, unknown>;
  if (typeof call.id !== 'string' || call.id === '')
    throw new TypeError(Messages.chatCallField(where, 'id'));
  if (typeof call.name !== 'string' || call.name === '')
    throw new TypeError(Messages.chatCallField(where, 'name'));
  const args = call.arguments;
  if (typeof args !== 'object' || args === null || Array.isArray(args))
    throw new TypeError(Messages.chatCallArguments(where));
  return {
    id: call.id,
    name: call.name,
    arguments: args as JsonObject,
    ...(typeof call.invalidArguments === 'string' && {
      invalidArguments: call.invalidArguments,
    }),
  };
}
