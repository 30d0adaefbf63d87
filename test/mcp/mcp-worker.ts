/**
 * A worker process of the MCP crash tests: connects to the test's MCP server (test/mcp/mcp-server.js,
 * started by the SDK's stdio client transport as this process's child), registers its tools with
 * registerMcpTools and runs (or recovers) a one-node flow that calls one of them, on SQLite.
 *
 *   node -r ./test/utils/ts-register.js test/mcp/mcp-worker.ts run|recover <runId> <tool> <argsJSON>
 *
 * Environment: SQLITE_PATH (the store), MCP_LEDGER (the server's ledger), MCP_HANG (passed to the
 * server: that tool never answers, and the test kills this worker inside it).
 * Stdout: one JSON line, the outcome ({ status, r } or { error, calls }), then exit 0.
 */
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
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

interface S {
  r?: unknown;
}

async function main(): Promise<void> {
  const [mode, runId, tool, argsText] = process.argv.slice(2);
  if (!runId || !tool || !argsText)
    throw new Error('usage: run|recover <runId> <tool> <args>');
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env))
    if (v !== undefined) env[k] = v;
  const client = new Client({ name: 'mcp-worker', version: '1.0.0' });
  await client.connect(
    new StdioClientTransport({
      command: process.execPath,
      args: [join(__dirname, 'mcp-server.js'), 'stdio'],
      env,
      stderr: 'inherit',
    }),
  );
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
