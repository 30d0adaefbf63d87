/**
 * A worker process of the MCP crash tests: connects to the test's MCP server (test/mcp/mcp-server.js)
 * over stdio (the SDK's stdio client transport starts the server as this process's child) or over
 * streamable HTTP (a server the test started), registers its tools with registerMcpTools and runs
 * (or recovers) a one-node flow that calls one of them, on SQLite.
 *
 *   node -r ./test/utils/ts-register.js test/mcp/mcp-worker.ts stdio|<url> run|recover <runId> <tool> <argsJSON>
 *
 * Environment: SQLITE_PATH (the store), MCP_LEDGER (the server's ledger), MCP_HANG (passed to a
 * stdio server: its call of that tool never answers, and the test kills this worker inside it).
 * Stdout: one JSON line, the outcome ({ status, r } or { error, calls }), then exit 0.
 */
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import {
  Executor,
  Flow,
  FlowRunner,
  RecoveryNeedsDecision,
  SQLiteCheckpointStore,
  ToolRegistry,
  registerMcpTools,
} from 'agent-adapter';
import { KEY } from 'agent-adapter/testing/fixtures';

/** `stdio`: a server child of this process; otherwise the URL of a streamable HTTP server. */
function transportOf(where: string): Transport {
  if (where !== 'stdio')
    return new StreamableHTTPClientTransport(new URL(where));
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env))
    if (v !== undefined) env[k] = v;
  return new StdioClientTransport({
    command: process.execPath,
    args: [join(__dirname, 'mcp-server.js'), 'stdio'],
    env,
    stderr: 'inherit',
  });
}

interface S {
  r?: unknown;
}

async function main(): Promise<void> {
  const [where, mode, runId, tool, argsText] = process.argv.slice(2);
  if (!where || !runId || !tool || !argsText)
    throw new Error('usage: stdio|<url> run|recover <runId> <tool> <args>');
  const client = new Client({ name: 'mcp-worker', version: '1.0.0' });
  await client.connect(transportOf(where));
  const registry = new ToolRegistry();
  await registerMcpTools(registry, client);
  const store = new SQLiteCheckpointStore(process.env.SQLITE_PATH!);
  const runner = new FlowRunner(new Executor(registry), {
    checkpoints: store,
    checkpointKey: KEY,
  });
  const flow = new Flow<S>('mcp-call')
    .node('n', async (_s, ctx) => ({
      r: await ctx.call(tool, JSON.parse(argsText)),
    }))
    .end('n');
  let outcome: unknown;
  try {
    const r =
      mode === 'run'
        ? await runner.run(flow, {}, { runId })
        : await runner.recover(flow, runId);
    outcome = { status: r.status, r: r.state.r };
  } catch (error) {
    outcome =
      error instanceof RecoveryNeedsDecision
        ? { error: error.name, calls: error.calls }
        : { error: (error as Error).name, message: (error as Error).message };
  }
  process.stdout.write(`${JSON.stringify(outcome)}\n`);
  await client.close();
  await store.close();
  process.exit(0);
}

main().catch((error: unknown) => {
  process.stderr.write(`${String((error as Error)?.stack ?? error)}\n`);
  process.exit(1);
});
