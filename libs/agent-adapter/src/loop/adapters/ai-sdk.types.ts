import type { JsonSchema } from '../../exec/tool.registry';
import type { JsonObject } from '../chat-model';

/*
 * The AI SDK's language model specification, written out structurally: the adapter calls the
 * model's own `doGenerate`, so neither `ai` nor `@ai-sdk/provider` is loaded, and these typings
 * compile without them. Only what the adapter sends and reads is declared; a model made by a
 * provider package (`LanguageModelV4` of ai 7, `LanguageModelV3` of ai 6) fits.
 */

/** A text part of a prompt message. @publicApi */
export type AiSdkTextPart = { type: 'text'; text: string };

/** A tool call of an assistant message in a prompt (`input`: the arguments object). @publicApi */
export type AiSdkToolCallPart = {
  type: 'tool-call';
  toolCallId: string;
  toolName: string;
  input: JsonObject;
};

/** A tool's result in a prompt. @publicApi */
export type AiSdkToolResultPart = {
  type: 'tool-result';
  toolCallId: string;
  toolName: string;
  output: { type: 'text' | 'error-text'; value: string };
};

/** A message of the prompt `doGenerate` is given. @publicApi */
export type AiSdkPromptMessage =
  | { role: 'system'; content: string }
  | { role: 'user'; content: AiSdkTextPart[] }
  | { role: 'assistant'; content: Array<AiSdkTextPart | AiSdkToolCallPart> }
  | { role: 'tool'; content: AiSdkToolResultPart[] };

/** A tool offered to the model (a function tool: name, description, JSON schema). @publicApi */
export type AiSdkFunctionTool = {
  type: 'function';
  name: string;
  description?: string;
  inputSchema: JsonSchema;
};

/** How the model may pick tools. `required` or `tool` on every call never lets a loop end. @publicApi */
export type AiSdkToolChoice =
  | { type: 'auto' }
  | { type: 'none' }
  | { type: 'required' }
  | { type: 'tool'; toolName: string };

/** Call settings sent with every call of an `AiSdkChatModel` (the AI SDK's names). @publicApi */
export interface AiSdkCallSettings {
  maxOutputTokens?: number;
  temperature?: number;
  topP?: number;
  topK?: number;
  presencePenalty?: number;
  frequencyPenalty?: number;
  stopSequences?: string[];
  seed?: number;
  toolChoice?: AiSdkToolChoice;
  /** More HTTP headers (HTTP providers). Their values are kept out of errors. */
  headers?: Record<string, string>;
  /** Provider-specific options, by provider name (`{ openai: { ... } }`). */
  providerOptions?: Record<string, JsonObject>;
}

/** What `AiSdkChatModel` gives `doGenerate`. @publicApi */
export interface AiSdkCallOptions extends AiSdkCallSettings {
  prompt: AiSdkPromptMessage[];
  tools?: AiSdkFunctionTool[];
  abortSignal?: AbortSignal;
}

/**
 * What `doGenerate` answers, as far as the adapter reads it: the content parts (text and
 * tool calls are kept), the finish reason and the usage.
 * @publicApi
 */
export interface AiSdkGenerateResult {
  /** Text parts (`{ type: 'text', text }`) and tool calls (`{ type: 'tool-call', toolCallId, toolName, input }`) are read. */
  content: ReadonlyArray<{
    readonly type: string;
    readonly [key: string]: unknown;
  }>;
  finishReason: { unified: string; raw?: string | undefined } | string;
  usage?: {
    inputTokens?: { total?: number | undefined } | number | undefined;
    outputTokens?: { total?: number | undefined } | number | undefined;
  };
}

/**
 * An AI SDK language model, as a provider package makes one (`createOpenAI(...)('gpt-4o-mini')`,
 * `anthropic('claude-...')`, `createOpenAICompatible(...).chatModel(...)`): specification `v4`
 * (the `ai` 7 packages) or `v3` (`ai` 6). A bare model id string is not one.
 * @publicApi
 */
export interface AiSdkLanguageModel {
  readonly specificationVersion: 'v3' | 'v4';
  readonly provider: string;
  readonly modelId: string;
  doGenerate(options: AiSdkCallOptions): PromiseLike<AiSdkGenerateResult>;
}

/** @publicApi */
export interface AiSdkChatModelOptions {
  /** Sent with every call: temperature, maxOutputTokens, toolChoice, headers, providerOptions. */
  settings?: AiSdkCallSettings;
  /** How long one attempt may take. @default 60000 */
  timeoutMs?: number;
  /**
   * Attempts after the first one for errors the provider marks retryable (`isRetryable`: 408,
   * 409, 429, 5xx, no response) and for timeouts; `retry-after` is honoured (up to 30 s).
   * @default 2
   */
  maxRetries?: number;
  /**
   * Strings blanked out of error messages (errors are sealed into checkpoints). The provider
   * holds the API key, so the adapter cannot know it: name it here if its errors could repeat it.
   */
  secrets?: readonly string[];
}
