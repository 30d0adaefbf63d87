import { shown } from './text';

/** The MCP tools' messages (`registerMcpTools`, MCP tool calls). */
export const McpMessages = {
  mcpToolFailed: (text: string) =>
    text.trim() || 'the MCP tool reported an error without any text',
  mcpPrefix: (prefix: unknown) =>
    `registerMcpTools: prefix must be a string of letters, digits, "_", ".", ":" or "-", got ${shown(prefix)}.`,
  mcpListFailed: (why: string) =>
    `registerMcpTools: the MCP server's tools could not be listed (${why}). Connect the client before registering its tools.`,
  mcpOverrideUnknown: (tool: string, known: readonly string[]) =>
    `registerMcpTools: overrides name "${tool}", which the MCP server does not list. Its tools are: ${known.join(', ') || '(none)'}.`,
  mcpBadSchema: (tool: string, why: string) =>
    `MCP tool "${tool}": its input schema cannot be used to check arguments (${why}).`,
  flowToolName: (name: string) =>
    `serveFlowsOverMcp: "${name}" cannot be an MCP tool name (1-128 letters, digits, "_", "-" or "."): give the flows a prefix or names that can.`,
  flowToolTwice: (name: string) =>
    `serveFlowsOverMcp: two tools would be named "${name}": give each flow its own name.`,
  flowToolUnknown: (name: string, known: readonly string[]) =>
    `There is no tool named "${name}". The tools are: ${known.join(', ')}.`,
  flowToolArgs: (tool: string, why: string) => `Tool "${tool}": ${why}.`,
  flowToolNoRun: (runId: string) =>
    `There is no run "${runId}" of the flows served here.`,
} as const;
