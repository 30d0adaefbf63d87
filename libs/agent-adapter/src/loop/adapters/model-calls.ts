import type { ChatModelError } from '../../errors';
import { assertJson, type Json } from '../../exec/durable/canonical-json';
import type { AssistantMessage, ToolCall } from '../chat-model';

/*
 * What the chat-model adapters share: reading a tool call's arguments, redacting secrets out of
 * error text, and waiting between attempts.
 */

/**
 * A tool call's arguments as the model sent them (a JSON string, or an object from lenient
 * servers): a JSON object, else `{}` with the raw text kept as `invalidArguments`.
 */
export function argumentsOf(
  raw: unknown,
): Pick<ToolCall, 'arguments' | 'invalidArguments'> {
  if (raw === undefined || raw === null) return { arguments: {} };
  if (typeof raw === 'string' && raw.trim() === '') return { arguments: {} };
  let value: unknown = raw;
  if (typeof raw === 'string') {
    try {
      value = JSON.parse(raw);
    } catch {
      return { arguments: {}, invalidArguments: raw };
    }
  }
  const invalid = () => ({
    arguments: {},
    invalidArguments: typeof raw === 'string' ? raw : safeStringify(raw),
  });
  // Not an object, or not plain JSON: kept as invalid arguments for the model to see and retry.
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    return invalid();
  try {
    assertJson(value);
    return { arguments: value as { [key: string]: Json } };
  } catch {
    return invalid();
  }
}

function safeStringify(value: unknown): string {
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}

/** An error's message, with its cause's when it has one (fetch's "fetch failed" says little). */
export function whyOf(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const cause = (error as { cause?: unknown }).cause;
  return cause instanceof Error
    ? `${error.message} (${cause.message})`
    : error.message;
}

/** Secrets long enough to matter, longest first (so a key containing another is blanked whole). */
export function secretsOf(values: ReadonlyArray<string | undefined>): string[] {
  return values
    .filter((s): s is string => typeof s === 'string' && s.length >= 4)
    .sort((a, b) => b.length - a.length);
}

/** `text` with every secret blanked out. */
export function redact(text: string, secrets: readonly string[]): string {
  let out = text;
  for (const secret of secrets) out = out.split(secret).join('[redacted]');
  return out;
}

/** A one-line excerpt of a body (at most 500 characters), secrets blanked out. */
export function excerptOf(text: string, secrets: readonly string[]): string {
  const t = redact(text, secrets).replace(/\s+/g, ' ').trim();
  return t.length > 500 ? `${t.slice(0, 500)}…` : t || '(empty body)';
}

/** The wait a `retry-after` header asks for (seconds or a date), capped at 30 s. */
export function retryAfter(header: string | null | undefined): {
  delayMs?: number;
} {
  if (header === null || header === undefined) return {};
  const seconds = Number(header);
  const ms = Number.isFinite(seconds)
    ? seconds * 1000
    : Date.parse(header) - Date.now();
  return Number.isFinite(ms)
    ? { delayMs: Math.min(Math.max(ms, 0), 30_000) }
    : {};
}

/** What one attempt at the model came to: a reply, or an error and whether to try again. */
export type Attempted =
  | { reply: AssistantMessage }
  | { error: ChatModelError; retry: boolean; delayMs?: number };

/** Attempts until a reply, an error not to retry, or `maxRetries` retries (waiting between). */
export async function withRetries(
  attempt: () => Promise<Attempted>,
  maxRetries: number,
  signal: AbortSignal | undefined,
): Promise<AssistantMessage> {
  for (let n = 0; ; n++) {
    const outcome = await attempt();
    if ('reply' in outcome) return outcome.reply;
    if (!outcome.retry || n >= maxRetries) throw outcome.error;
    await sleep(outcome.delayMs ?? backoff(n), signal);
  }
}

/** Exponential backoff with jitter: about 250 ms, 500 ms, 1 s, ... up to 8 s. */
export function backoff(attempt: number): number {
  return Math.min(250 * 2 ** attempt, 8_000) * (0.5 + Math.random() / 2);
}

/** Waits `ms`, or rejects with the signal's reason when it aborts first. */
export function sleep(
  ms: number,
  signal: AbortSignal | undefined,
): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason as Error);
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason as Error);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
