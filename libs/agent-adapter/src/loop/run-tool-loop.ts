import type { RecoverOptions } from '../flow/flow.interfaces';
import type { ToolRegistry } from '../exec/tool.registry';
import type { ChatMessage, ChatModel } from './chat-model';
import {
  ToolLoop,
  type ToolLoopOptions,
  type ToolLoopResult,
  type ToolLoopRunOptions,
} from './tool-loop';

/** One-call forms of `ToolLoop`: a loop made for the call and closed after it. */

/**
 * Runs an LLM tool loop durably (see `ToolLoop`): the history is checkpointed after each model
 * reply and after the tool results; `maxSteps` counts the model calls of the whole run. A loop
 * paused for an approval resumes through `runToolLoop` with the same `runId` and a `decision`.
 * @publicApi
 */
export async function runToolLoop(
  model: ChatModel,
  registry: ToolRegistry,
  messages: readonly ChatMessage[],
  options: ToolLoopOptions & ToolLoopRunOptions = {},
): Promise<ToolLoopResult> {
  const loop = new ToolLoop(model, registry, options);
  try {
    return await loop.run(messages, options);
  } finally {
    loop.close();
  }
}

/**
 * Recovers a tool loop's run after a crash, on any worker (see `ToolLoop.recover`).
 * @publicApi
 */
export async function recoverToolLoop(
  model: ChatModel,
  registry: ToolRegistry,
  runId: string,
  options: ToolLoopOptions & RecoverOptions = {},
): Promise<ToolLoopResult> {
  const loop = new ToolLoop(model, registry, options);
  try {
    return await loop.recover(runId, options);
  } finally {
    loop.close();
  }
}
