/**
 * The part of an MCP client (`Client` of `@modelcontextprotocol/sdk`, connected over any
 * transport) that `registerMcpTools` uses. Written here so the library's types do not depend on
 * the SDK: a connected SDK `Client` is one.
 */

/** A tool's hints about its behaviour (MCP `ToolAnnotations`). @publicApi */
export interface McpToolAnnotations {
  readonly title?: string;
  /** The tool changes nothing. */
  readonly readOnlyHint?: boolean;
  /** The tool may destroy or overwrite (the MCP default when absent). */
  readonly destructiveHint?: boolean;
  /** Calling it again with the same arguments has no further effect. */
  readonly idempotentHint?: boolean;
  readonly openWorldHint?: boolean;
}

/** A tool as an MCP server lists it (`tools/list`). @publicApi */
export interface McpToolInfo {
  readonly name: string;
  readonly title?: string;
  readonly description?: string;
  /** The JSON schema of the arguments object. */
  readonly inputSchema: { readonly [key: string]: unknown };
  readonly annotations?: McpToolAnnotations;
}

/** What `tools/call` answers (the SDK's `CallToolResult`, or the old `{ toolResult }` form). */
export interface McpCallResult {
  readonly content?: unknown;
  readonly structuredContent?: unknown;
  readonly isError?: unknown;
  readonly toolResult?: unknown;
}

/** A connected MCP client. @publicApi */
export interface McpClientLike {
  listTools(params?: {
    cursor?: string;
  }): Promise<{ tools: McpToolInfo[]; nextCursor?: string }>;
  callTool(params: {
    name: string;
    arguments?: { [key: string]: unknown };
    _meta?: { [key: string]: unknown };
  }): Promise<McpCallResult>;
}
