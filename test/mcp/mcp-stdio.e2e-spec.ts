/**
 * MCP tools as durable tools against a real MCP server over stdio, with a SIGKILL of the worker
 * inside a destructive call (in doubt) and inside an idempotent one (reruns once): the cases are
 * test/mcp/mcp-crash.ts's, shared with the HTTP spec.
 */
import { describeMcpCrash } from './mcp-crash';

describeMcpCrash('stdio');
