import type { PendingApproval } from '../exec/durable/records';
import type { RunResult } from '../flow/flow.interfaces';
import type { ToolCall, ToolMessage } from './chat-model';
import type {
  ToolLoopPending,
  ToolLoopResult,
  ToolLoopState,
} from './tool-loop.interfaces';

/** How the loop reads tool calls from the history, writes tool results into it, and reports a run. */

export function toolCallsOf(state: ToolLoopState): ToolCall[] {
  const last = state.messages[state.messages.length - 1];
  return last?.role === 'assistant' ? (last.toolCalls ?? []) : [];
}

/** The history ends with the model's answer: a reply without tool calls. */
export function answered(state: ToolLoopState): boolean {
  const last = state.messages[state.messages.length - 1];
  return last?.role === 'assistant' && !last.toolCalls?.length;
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

/** A run's result as the loop reports it: its history, its answer, what it waits for. */
export function loopResult(r: RunResult<ToolLoopState>): ToolLoopResult {
  const { messages, modelCalls, maxSteps } = r.state;
  const last = messages[messages.length - 1];
  return {
    runId: r.runId,
    status: r.status,
    step: r.step,
    messages,
    ...(r.status === 'done' && last?.role === 'assistant' && { reply: last }),
    modelCalls,
    maxSteps,
    ...(r.error && { error: r.error }),
    ...(r.pending && { pending: pendingOf(r.pending, r.state) }),
    ...(r.needsDecision && { needsDecision: r.needsDecision }),
  };
}

/** The waiting call's tool call id: a call's index is its position in the reply. */
function pendingOf(
  pending: PendingApproval,
  state: ToolLoopState,
): ToolLoopPending {
  const call = toolCallsOf(state)[pending.index];
  return {
    ...pending,
    ...(call?.name === pending.tool && { toolCallId: call.id }),
  };
}
