import { shown } from './text';

/** `AiSdkChatModel`'s messages (DurableSetupError when it is built, ChatModelError when it is asked). */
export const AiSdkMessages = {
  aiSdkModelId: (id: string) =>
    `AiSdkChatModel needs a language model object, got the model id ${JSON.stringify(id)}. Make the model with its provider package, e.g. createOpenAI({ apiKey })('gpt-4o-mini') from @ai-sdk/openai (a bare id would go through the AI Gateway of the "ai" package, which this adapter does not load).`,
  aiSdkNotModel: (value: unknown) =>
    `AiSdkChatModel needs an AI SDK language model (an object with specificationVersion and doGenerate(), as a provider package makes one), got ${shown(value)}.`,
  aiSdkSpecVersion: (
    model: string,
    version: unknown,
    supported: readonly string[],
  ) =>
    `AiSdkChatModel: the language model ${model} implements specification version ${shown(version)}; this adapter speaks ${supported.map((v) => `"${v}"`).join(' and ')} (the "ai" 7 and 6 provider packages). Install a current version of the provider package.`,
  aiSdkOption: (option: 'timeoutMs' | 'maxRetries' | 'settings') =>
    `AiSdkChatModel: ${
      {
        timeoutMs: 'timeoutMs must be a positive integer',
        maxRetries: 'maxRetries must be an integer ≥ 0',
        settings:
          'settings must be plain JSON (numbers, strings, objects: temperature, maxOutputTokens, toolChoice, headers, providerOptions, ...)',
      }[option]
    }.`,
  aiSdkCallFailed: (model: string, status: number | undefined, why: string) =>
    `AiSdkChatModel: the call to ${model} failed${status === undefined ? '' : ` with HTTP ${status}`}: ${why}`,
  aiSdkNotResult: (model: string, why: string) =>
    `AiSdkChatModel: the answer of ${model} cannot be read (${why}).`,
  // Why a doGenerate result cannot be read (put in aiSdkNotResult).
  aiSdkNoContent: () => 'it has no content list',
  aiSdkToolCallName: (i: number) =>
    `content[${i}] is a tool call without a toolName`,
} as const;
