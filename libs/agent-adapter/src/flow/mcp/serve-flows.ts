import { createHash } from 'node:crypto';
import {
  CheckpointNotFound,
  DurableError,
  DurableSetupError,
} from '../../errors';
import { Messages } from '../../errors/messages';
import type { Json } from '../../exec/durable/canonical-json';
import type { RunIdentity } from '../../exec/durable/records';
import type { JsonSchema } from '../../exec/tool.registry';
import { requirePackage } from '../../peers/optional-packages';
import type { Flow } from '../flow.builder';
import type { RunResult } from '../flow.interfaces';
import type { FlowRunner } from '../runner/flow-runner';

/**
 * The part of an MCP server (`Server` of `@modelcontextprotocol/sdk/server/index.js`, created with
 * `capabilities: { tools: {} }`) that `serveFlowsOverMcp` uses. @publicApi
 */
export interface McpServerLike {
  // Typed loosely on purpose: the SDK's generic signature (a request schema, then a handler of that
  // schema's requests) is the SDK's own; the handlers given here follow it.
  setRequestHandler(...args: never[]): unknown;
}

/** What a tool call's handler is given by the SDK (the part used here). @publicApi */
export interface McpRequestExtra {
  readonly signal: AbortSignal;
  readonly authInfo?: unknown;
  readonly sessionId?: string;
  sendNotification(notification: {
    method: 'notifications/progress';
    params: {
      progressToken: string | number;
      progress: number;
      message?: string;
    };
  }): Promise<void>;
}

/** @publicApi */
export interface FlowToolsOptions {
  /** Put before each flow's tool name (and `get_run`). @default '' */
  prefix?: string;
  /**
   * How long a call follows its run, sending each stream entry as a progress notification (when
   * the client asked for progress), before it answers with the run as it stands then.
   * @default 60000
   */
  waitMs?: number;
  /** The run identity a request acts as (from its `authInfo`), checked like any ctx. */
  ctx?: (extra: McpRequestExtra) => RunIdentity | undefined;
  /** Per flow: what the calling agent reads about it, and the JSON schema of its input. */
  describe?: Readonly<
    Record<string, { description?: string; input?: JsonSchema }>
  >;
}

interface CallRequest {
  params: {
    name: string;
    arguments?: Record<string, unknown>;
    _meta?: { progressToken?: string | number; idempotencyKey?: unknown };
  };
}

const TOOL_NAME = /^[A-Za-z0-9_.-]{1,128}$/;

/**
 * Serves flows as MCP tools, so another agent can start a durable flow and follow it: one tool per
 * flow (`<prefix><flow>`: `{ input, runId? }`), and `<prefix>get_run` (`{ runId, from? }`). A call
 * starts the run (or finds it: the same `runId`, or the same idempotency key in the request's
 * `_meta`, as `registerMcpTools` sends, is the same run, so a caller retrying after its own crash
 * starts nothing twice), follows it for up to `waitMs` sending its stream entries as progress, and
 * answers with the run: `runId`, `status`, `step`, `state`, `error`, `pending`. A run still going
 * on is followed with `get_run`; it is durable like any run of `runner` (recovered by any worker).
 * @publicApi
 */
export function serveFlowsOverMcp<States extends readonly object[]>(
  server: McpServerLike,
  runner: FlowRunner,
  served: { readonly [K in keyof States]: Flow<States[K]> },
  options: FlowToolsOptions = {},
): void {
  // Each flow has its own state type; serving one needs only the flow itself.
  const flows = served as readonly Flow<object>[];
  const { prefix = '', waitMs = 60_000 } = options;
  const byTool = new Map<string, Flow<object>>();
  for (const flow of flows) {
    const name = `${prefix}${flow.name}`;
    if (!TOOL_NAME.test(name))
      throw new DurableSetupError(Messages.flowToolName(name));
    if (byTool.has(name) || name === `${prefix}get_run`)
      throw new DurableSetupError(Messages.flowToolTwice(name));
    byTool.set(name, flow);
  }
  const sdk = requirePackage<{
    ListToolsRequestSchema: unknown;
    CallToolRequestSchema: unknown;
  }>('@modelcontextprotocol/sdk/types.js', 'mcp', 'serveFlowsOverMcp');
  const getRun = `${prefix}get_run`;
  const tools = [
    ...[...byTool].map(([name, flow]) => ({
      name,
      description:
        options.describe?.[flow.name]?.description ??
        `Starts the durable flow "${flow.name}" (or finds the run with this runId) and follows it.`,
      inputSchema: {
        type: 'object',
        properties: {
          input: options.describe?.[flow.name]?.input ?? { type: 'object' },
          runId: { type: 'string', description: 'Start or find this run.' },
        },
        required: ['input'],
      },
      annotations: { idempotentHint: true },
    })),
    {
      name: getRun,
      description:
        'Follows a run started here until it ends, and answers with it.',
      inputSchema: {
        type: 'object',
        properties: {
          runId: { type: 'string' },
          from: {
            type: 'integer',
            minimum: 0,
            description: 'First stream offset to send.',
          },
        },
        required: ['runId'],
      },
      annotations: { readOnlyHint: true },
    },
  ];
  const handle = async (request: CallRequest, extra: McpRequestExtra) => {
    const { name, arguments: args = {}, _meta } = request.params;
    try {
      const ctx = options.ctx?.(extra);
      const follow = (flow: Flow<object>, runId: string, from: number) =>
        followRun(runner, flow, runId, { from, waitMs, ctx, extra, _meta });
      if (name === getRun) {
        const runId = stringArg(name, args, 'runId');
        const head = await runner.store.head(runId);
        const flow = flows.find((f) => f.name === head?.flow);
        if (!flow)
          throw new CheckpointNotFound(runId, Messages.flowToolNoRun(runId));
        return answer(await follow(flow, runId, offsetArg(name, args)));
      }
      const flow = byTool.get(name);
      if (!flow)
        throw new TypeError(
          Messages.flowToolUnknown(name, [...byTool.keys(), getRun]),
        );
      const input = args.input;
      if (typeof input !== 'object' || input === null || Array.isArray(input))
        throw new TypeError(
          Messages.flowToolArgs(name, 'input must be an object'),
        );
      const key = _meta?.idempotencyKey;
      const runId =
        args.runId !== undefined
          ? stringArg(name, args, 'runId')
          : typeof key === 'string'
            ? `mcp-${createHash('sha256').update(`${flow.name}\n${key}`).digest('hex').slice(0, 32)}`
            : undefined;
      const started = await runner.run(flow, input, {
        ...(runId !== undefined && { runId }),
        ...(ctx && { ctx }),
        wait: false,
      });
      return answer(await follow(flow, started.runId, 0));
    } catch (error) {
      if (!(error instanceof DurableError) && !(error instanceof TypeError))
        throw error;
      return {
        content: [{ type: 'text', text: `${error.name}: ${error.message}` }],
        isError: true,
      };
    }
  };
  const on = server.setRequestHandler.bind(server) as (
    schema: unknown,
    handler: (request: CallRequest, extra: McpRequestExtra) => unknown,
  ) => unknown;
  on(sdk.ListToolsRequestSchema, () => ({ tools }));
  on(sdk.CallToolRequestSchema, handle);
}

/** Sends the run's stream as progress (when asked for) until it ends or `waitMs` passed. */
async function followRun(
  runner: FlowRunner,
  flow: Flow<object>,
  runId: string,
  o: {
    from: number;
    waitMs: number;
    ctx: RunIdentity | undefined;
    extra: McpRequestExtra;
    _meta: CallRequest['params']['_meta'];
  },
): Promise<RunResult<object>> {
  const ctx = o.ctx ? { ctx: o.ctx } : {};
  const token = o._meta?.progressToken;
  const timeout = AbortSignal.timeout(o.waitMs);
  const signal = AbortSignal.any([o.extra.signal, timeout]);
  for await (const entry of runner.stream(flow, runId, {
    from: o.from,
    signal,
    ...ctx,
  })) {
    if (token === undefined) continue;
    await o.extra.sendNotification({
      method: 'notifications/progress',
      params: {
        progressToken: token,
        progress: entry.offset + 1,
        message: JSON.stringify({
          offset: entry.offset,
          node: entry.node,
          data: entry.data,
        }),
      },
    });
  }
  return runner.get(flow, runId, ctx);
}

function answer(r: RunResult<object>) {
  const run: Record<string, Json | undefined> = {
    runId: r.runId,
    status: r.status,
    step: r.step,
    state: r.state as Json,
    ...(r.error && { error: r.error as unknown as Json }),
    ...(r.pending && { pending: r.pending as unknown as Json }),
  };
  return {
    content: [{ type: 'text', text: JSON.stringify(run) }],
    structuredContent: run,
    ...(r.status === 'failed' && { isError: true }),
  };
}

function stringArg(
  tool: string,
  args: Record<string, unknown>,
  key: string,
): string {
  const value = args[key];
  if (typeof value !== 'string' || value === '')
    throw new TypeError(
      Messages.flowToolArgs(tool, `${key} must be a non-empty string`),
    );
  return value;
}

function offsetArg(tool: string, args: Record<string, unknown>): number {
  const value = args.from ?? 0;
  if (!Number.isSafeInteger(value) || (value as number) < 0)
    throw new TypeError(
      Messages.flowToolArgs(tool, 'from must be a whole number of at least 0'),
    );
  return value as number;
}
