import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** A chat-completions request as the server received it. */
export interface ReceivedRequest {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  body: WireRequest;
}

/** The parts of the request body the tests look at. */
export interface WireRequest {
  model: string;
  messages: Array<{
    role: string;
    content: string | null;
    tool_call_id?: string;
    tool_calls?: Array<{
      id: string;
      type: string;
      function: { name: string; arguments: string };
    }>;
  }>;
  tools?: Array<{
    type: string;
    function: { name: string; description: string; parameters: unknown };
  }>;
  [key: string]: unknown;
}

/** What the server answers: a JSON body (a completion, an error) or raw text. */
export interface WireReply {
  status?: number;
  headers?: Record<string, string>;
  json?: unknown;
  raw?: string;
  /** Wait this long before answering. */
  delayMs?: number;
}

export type ChatHandler = (
  request: ReceivedRequest,
  n: number,
) => WireReply | Promise<WireReply>;

/**
 * A small, real HTTP server speaking the OpenAI chat-completions protocol
 * (`POST /v1/chat/completions`), scripted by each test. Every request is kept in `requests`.
 */
export class ChatServer {
  readonly requests: ReceivedRequest[] = [];
  baseUrl = '';

  private constructor(
    private readonly server: Server,
    public handler: ChatHandler,
  ) {}

  static async start(
    handler: ChatHandler = () => ({
      status: 500,
      json: { error: 'no script' },
    }),
  ): Promise<ChatServer> {
    const server = createServer();
    const chat = new ChatServer(server, handler);
    server.on('request', (req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        void (async () => {
          let reply: WireReply;
          try {
            if (req.method !== 'POST' || req.url !== '/v1/chat/completions') {
              reply = {
                status: 404,
                json: { error: { message: `no route ${req.url}` } },
              };
            } else {
              const received: ReceivedRequest = {
                method: req.method,
                path: req.url,
                headers: req.headers,
                body: JSON.parse(
                  Buffer.concat(chunks).toString('utf8'),
                ) as WireRequest,
              };
              chat.requests.push(received);
              reply = await chat.handler(received, chat.requests.length);
            }
          } catch (error) {
            reply = {
              status: 500,
              json: { error: { message: `script failed: ${String(error)}` } },
            };
          }
          if (reply.delayMs)
            await new Promise((r) => setTimeout(r, reply.delayMs));
          if (res.destroyed) return;
          const text =
            reply.raw ??
            (reply.json === undefined ? '' : JSON.stringify(reply.json));
          res.writeHead(reply.status ?? 200, {
            'content-type':
              reply.raw === undefined ? 'application/json' : 'text/plain',
            ...reply.headers,
          });
          res.end(text);
        })();
      });
    });
    await new Promise<void>((resolve) =>
      server.listen(0, '127.0.0.1', resolve),
    );
    const { port } = server.address() as AddressInfo;
    chat.baseUrl = `http://127.0.0.1:${port}/v1`;
    return chat;
  }

  /** Answers with `replies` in turn; a request beyond the script fails (HTTP 500). */
  script(...replies: Array<WireReply | ChatHandler>): this {
    let i = 0;
    this.handler = (request, n) => {
      const next = replies[i++];
      if (next === undefined)
        return {
          status: 500,
          json: { error: { message: `unscripted request ${n}` } },
        };
      return typeof next === 'function' ? next(request, n) : next;
    };
    return this;
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

/**
 * What a completion says besides its message: `finish_reason` (`null`: none) and `usage` (`null`:
 * none). By default `stop` / `tool_calls` and one prompt and one completion token.
 */
export interface CompletionFacts {
  finish?: string | null;
  usage?: {
    prompt_tokens?: number;
    completion_tokens?: number;
    total_tokens?: number;
  } | null;
}

/** A chat completion whose message says `content`. */
export function say(content: string, facts: CompletionFacts = {}): WireReply {
  return { json: completion({ role: 'assistant', content }, 'stop', facts) };
}

/** A chat completion asking for tool calls (`arguments` given as an object is sent as a string). */
export function callTools(
  calls: Array<{ name: string; arguments: unknown; id?: string }>,
  content: string | null = null,
  facts: CompletionFacts = {},
): WireReply {
  return {
    json: completion(
      {
        role: 'assistant',
        content,
        tool_calls: calls.map((c, i) => ({
          id: c.id ?? `call_${i + 1}`,
          type: 'function',
          function: {
            name: c.name,
            arguments:
              typeof c.arguments === 'string'
                ? c.arguments
                : JSON.stringify(c.arguments),
          },
        })),
      },
      'tool_calls',
      facts,
    ),
  };
}

function completion(
  message: object,
  finish: string,
  facts: CompletionFacts,
): object {
  const usage =
    facts.usage === undefined
      ? { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 }
      : facts.usage;
  return {
    id: `chatcmpl-${Math.random().toString(36).slice(2)}`,
    object: 'chat.completion',
    created: Math.floor(Date.now() / 1000),
    model: 'test-model',
    choices: [
      {
        index: 0,
        message,
        finish_reason: facts.finish === undefined ? finish : facts.finish,
      },
    ],
    ...(usage !== null && { usage }),
  };
}

/** The tool results (role "tool") of a request, by tool call id. */
export function toolResults(request: ReceivedRequest): Record<string, string> {
  const out: Record<string, string> = {};
  for (const m of request.body.messages)
    if (m.role === 'tool' && m.tool_call_id)
      out[m.tool_call_id] = m.content ?? '';
  return out;
}
