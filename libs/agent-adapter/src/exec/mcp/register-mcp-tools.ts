import {
  DurableSetupError,
  InvalidToolArguments,
  McpToolError,
} from '../../errors';
import { Messages } from '../../errors/messages';
import { requirePackage } from '../../peers/optional-packages';
import { idempotencyKey, inRun } from '../idempotency-key';
import {
  ToolRegistry,
  type JsonSchema,
  type ToolOptions,
} from '../tool.registry';
import type {
  McpCallResult,
  McpClientLike,
  McpToolAnnotations,
  McpToolInfo,
} from './mcp-client';

/** How `registerMcpTools` names and configures the tools. @publicApi */
export interface McpToolsOptions {
  /** Put before every MCP tool's name in the registry (`github.` → `github.create_issue`). */
  prefix?: string;
  /**
   * Options per tool, by its MCP name, over what its annotations say (`{ charge: { approval:
   * true } }`, `{ reserve: { idempotent: false } }`). A name the server does not list is refused.
   */
  overrides?: { readonly [mcpName: string]: Partial<ToolOptions> };
}

/** A tool `registerMcpTools` registered. @publicApi */
export interface McpRegisteredTool {
  /** Its name in the registry (the prefix and its MCP name). */
  readonly name: string;
  readonly mcpName: string;
  readonly idempotent: boolean;
  readonly readOnly: boolean;
}

/**
 * What an MCP tool's annotations say about reruns, each absent hint read the safe way:
 * `readOnlyHint` → read-only (reruns freely); `idempotentHint` → idempotent (a call in doubt runs
 * again); anything else (`destructiveHint`, or no hints) → neither, so a call cut off by a crash
 * is in doubt and recovery stops for a decision.
 * @publicApi
 */
export function mcpToolPolicy(annotations: McpToolAnnotations | undefined): {
  readOnly: boolean;
  idempotent: boolean;
} {
  const readOnly = annotations?.readOnlyHint === true;
  return {
    readOnly,
    idempotent: readOnly || annotations?.idempotentHint === true,
  };
}

/**
 * Registers every tool of a connected MCP client in `registry` (all pages of `tools/list`), so a
 * run calls them through the executor like any tool: logged `started` before the request and
 * `done` with the result after, replayed after a crash, fenced. Each call's arguments are checked
 * against the tool's input schema before anything is logged (`InvalidToolArguments`), and the
 * call's `idempotencyKey()` is sent in the request's `_meta.idempotencyKey`. The result stored is
 * `{ content, structuredContent? }`; a result with `isError: true` is thrown as `McpToolError`
 * (its text), sealed like any tool error.
 *
 * Needs `@modelcontextprotocol/sdk` (for the schema check). Registers all or none: a bad name,
 * option or override throws `DurableSetupError` before any tool is added.
 * @publicApi
 */
export async function registerMcpTools(
  registry: ToolRegistry,
  client: McpClientLike,
  options: McpToolsOptions = {},
): Promise<McpRegisteredTool[]> {
  const { prefix = '', overrides = {} } = options;
  if (typeof prefix !== 'string' || !/^[A-Za-z0-9_.:-]*$/.test(prefix))
    throw new DurableSetupError(Messages.mcpPrefix(prefix));
  const validator = schemaValidator();
  const tools = await listAll(client);
  const known = tools.map((t) => t.name);
  for (const name of Object.keys(overrides)) {
    if (!known.includes(name))
      throw new DurableSetupError(Messages.mcpOverrideUnknown(name, known));
  }
  const planned = tools.map((info) => {
    const name = `${prefix}${info.name}`;
    const toolOptions: ToolOptions = {
      ...mcpToolPolicy(info.annotations),
      ...(info.description !== undefined && { description: info.description }),
      parameters: info.inputSchema as JsonSchema,
      checkArgs: argsChecker(name, info, validator),
      ...overrides[info.name],
    };
    return { name, info, toolOptions };
  });
  // Every name and option checked on a scratch registry first: all are registered, or none.
  const scratch = new ToolRegistry();
  for (const { name, info, toolOptions } of planned) {
    if (registry.has(name))
      throw new DurableSetupError(Messages.toolTwice(name));
    scratch.register(name, handlerFor(client, name, info), toolOptions);
  }
  return planned.map(({ name, info, toolOptions }) => {
    registry.register(name, handlerFor(client, name, info), toolOptions);
    const definition = registry.get(name)!;
    return {
      name,
      mcpName: info.name,
      idempotent: definition.idempotent,
      readOnly: definition.readOnly,
    };
  });
}

async function listAll(client: McpClientLike): Promise<McpToolInfo[]> {
  const tools: McpToolInfo[] = [];
  let cursor: string | undefined;
  const seen = new Set<string>();
  try {
    do {
      const page = await client.listTools(
        cursor === undefined ? undefined : { cursor },
      );
      tools.push(...page.tools);
      cursor = page.nextCursor;
      // A server that hands the same cursor back would page for ever.
      if (cursor !== undefined && seen.has(cursor)) break;
      if (cursor !== undefined) seen.add(cursor);
    } while (cursor !== undefined);
  } catch (error) {
    throw new DurableSetupError(
      Messages.mcpListFailed((error as Error)?.message ?? String(error)),
      undefined,
    );
  }
  return tools;
}

/** The call: one `tools/call` request, the run's idempotency key in its `_meta`. */
function handlerFor(
  client: McpClientLike,
  name: string,
  info: McpToolInfo,
): (args: unknown) => Promise<unknown> {
  return async (args: unknown) => {
    const result = await client.callTool({
      name: info.name,
      arguments: (args ?? {}) as { [key: string]: unknown },
      ...(inRun() && { _meta: { idempotencyKey: idempotencyKey() } }),
    });
    if (result.isError === true)
      throw new McpToolError(name, textOf(result.content));
    return storedResult(result);
  };
}

/** What the call log stores: the content (and structured content), or an old-style result. */
function storedResult(result: McpCallResult): unknown {
  if (result.content === undefined && 'toolResult' in result)
    return result.toolResult ?? null;
  return {
    content: result.content ?? [],
    ...(result.structuredContent !== undefined && {
      structuredContent: result.structuredContent,
    }),
  };
}

/** The text parts of a result's content, one per line. */
function textOf(content: unknown): string {
  if (!Array.isArray(content)) return '';
  return content
    .map((part: unknown) =>
      typeof part === 'object' &&
      part !== null &&
      (part as { type?: unknown }).type === 'text' &&
      typeof (part as { text?: unknown }).text === 'string'
        ? (part as { text: string }).text
        : '',
    )
    .filter(Boolean)
    .join('\n');
}

/** The part of the SDK's JSON schema validator (ajv) used here. */
interface SchemaValidator {
  getValidator(
    schema: object,
  ): (
    input: unknown,
  ) => { valid: true } | { valid: false; errorMessage: string };
}

function schemaValidator(): SchemaValidator {
  const { AjvJsonSchemaValidator } = requirePackage<{
    AjvJsonSchemaValidator: new () => SchemaValidator;
  }>('@modelcontextprotocol/sdk/validation/ajv', 'mcp', 'registerMcpTools');
  return new AjvJsonSchemaValidator();
}

/** Checks a call's arguments against the tool's input schema (compiled once, at registration). */
function argsChecker(
  name: string,
  info: McpToolInfo,
  validator: SchemaValidator,
): (args: unknown) => void {
  let check: ReturnType<SchemaValidator['getValidator']>;
  try {
    check = validator.getValidator(info.inputSchema);
  } catch (error) {
    throw new DurableSetupError(
      Messages.mcpBadSchema(name, (error as Error)?.message ?? String(error)),
    );
  }
  return (args) => {
    const outcome = check(args ?? {});
    if (!outcome.valid)
      throw new InvalidToolArguments(name, [
        { path: '$', messages: [outcome.errorMessage] },
      ]);
  };
}
