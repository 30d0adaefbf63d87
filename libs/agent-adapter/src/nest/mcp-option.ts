import { DurableSetupError } from '../errors';
import { registerMcpTools } from '../exec/mcp/register-mcp-tools';
import type { ToolRegistry } from '../exec/tool.registry';
import { NestMessages } from './durable.messages';
import type { DurableMcpTools } from './interfaces/durable-module-options.interface';

/**
 * The module's `mcp` option, checked for what only the module knows (a list of entries, each with
 * a client); the prefix and overrides are `registerMcpTools`' to check, at registration.
 * @internal
 */
export function mcpOption(value: unknown): readonly DurableMcpTools[] {
  if (value === undefined) return [];
  if (!Array.isArray(value))
    throw new DurableSetupError(NestMessages.mcpNotList(typeof value));
  value.forEach((entry: unknown, i) => {
    const client: unknown =
      typeof entry === 'object' && entry !== null
        ? (entry as { client?: unknown }).client
        : undefined;
    const usable =
      typeof client === 'object' &&
      client !== null &&
      typeof (client as { listTools?: unknown }).listTools === 'function' &&
      typeof (client as { callTool?: unknown }).callTool === 'function';
    if (!usable) throw new DurableSetupError(NestMessages.mcpNoClient(i));
  });
  return value as readonly DurableMcpTools[];
}

/**
 * Registers each entry's tools in the module's registry, in order; the first failure is thrown as
 * a `DurableSetupError` naming the entry (its cause kept), which fails the application's start.
 * @internal
 */
export async function registerModuleMcpTools(
  registry: ToolRegistry,
  entries: readonly DurableMcpTools[],
): Promise<void> {
  for (const [i, { client, ...options }] of entries.entries()) {
    try {
      await registerMcpTools(registry, client, options);
    } catch (error) {
      throw new DurableSetupError(
        NestMessages.mcpFailed(
          i,
          options.prefix,
          (error as Error)?.message ?? String(error),
        ),
        undefined,
        { cause: error },
      );
    }
  }
}
