import type { ToolCall, ToolMessage } from './chat-model';
import type { ToolLoopState } from './tool-loop.interfaces';

/** How the loop reads tool calls from the history and writes tool results into it. */

export function toolCallsOf(state: ToolLoopState): ToolCall[] {
  const last = state.messages[state.messages.length - 1];
  return last?.role === 'assistant' ? (last.toolCalls ?? []) : [];
}

export function failed(call: ToolCall, why: string): ToolMessage {
  return {
    role: 'tool',
    toolCallId: call.id,
    name: call.name,
    content: `Error: ${why}`,
    isError: true,
  };
}

export function contentOf(value: unknown): string {
  if (typeof value === 'string') return value;
  try {
    return JSON.stringify(value ?? null) ?? 'null';
  } catch {
    return String(value);
  }
}

export function excerpt(text: string, max = 200): string {
  const t = JSON.stringify(text);
  return t.length > max ? `${t.slice(0, max)}…` : t;
}
