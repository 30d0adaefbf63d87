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
export function runToolLoop(
  model: ChatModel,
  registry: ToolRegistry,
  messages: readonly ChatMessage[],
  options: ToolLoopOptions & ToolLoopRunOptions = {},
): Promise<ToolLoopResult> {
  return withLoop(model, registry, options, (loop) =>
    loop.run(messages, options),
  );
}

/**
 * Recovers a tool loop's run after a crash, on any worker (see `ToolLoop.recover`).
 * @publicApi
 */
export function recoverToolLoop(
  model: ChatModel,
  registry: ToolRegistry,
  runId: string,
  options: ToolLoopOptions & RecoverOptions = {},
): Promise<ToolLoopResult> {
  return withLoop(model, registry, options, (loop) =>
    loop.recover(runId, options),
  );
}

/** A loop made for one call and closed after it, however the call ends. */
async function withLoop(
  model: ChatModel,
  registry: ToolRegistry,
  options: ToolLoopOptions,
  use: (loop: ToolLoop) => Promise<ToolLoopResult>,
): Promise<ToolLoopResult> {
  const loop = new ToolLoop(model, registry, options);
  try {
    return await use(loop);
  } finally {
    loop.close();
  }
}
