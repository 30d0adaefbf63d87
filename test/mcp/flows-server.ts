/**
 * An MCP server (the SDK's `Server` over stdio) serving a durable flow with serveFlowsOverMcp, for
 * test/mcp/mcp-flows.e2e-spec.ts. The flow `report` publishes an entry per step and processes
 * each item with an idempotent tool that appends a line to a ledger file (fsync'd) and takes
 * ITEM_DELAY_MS. A continuous takeover recovers the runs a killed server left.
 *
 *   node -r ./test/utils/ts-register.js test/mcp/flows-server.ts
 *
 * Environment: SQLITE_PATH (the store), LEDGER, ITEM_DELAY_MS, WAIT_MS (how long a call follows).
 */
import { closeSync, fsyncSync, openSync, writeSync } from 'node:fs';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import {
  Executor,
  Flow,
  FlowRunner,
  SQLiteCheckpointStore,
  ToolRegistry,
  currentCall,
  serveFlowsOverMcp,
} from 'agent-adapter';
import { KEY } from 'agent-adapter/testing/fixtures';

interface Report {
  items: string[];
  done?: string[];
}

async function main(): Promise<void> {
  const delay = Number(process.env.ITEM_DELAY_MS ?? 0);
  const registry = new ToolRegistry().register(
    'process',
    async (a: { item: string }) => {
      await new Promise((r) => setTimeout(r, delay));
      const fd = openSync(process.env.LEDGER!, 'a');
      writeSync(fd, `${process.pid} ${currentCall()?.runId} ${a.item}\n`);
      fsyncSync(fd);
      closeSync(fd);
      return `did ${a.item}`;
    },
    { idempotent: true },
  );
  const report = new Flow<Report>('report')
    .node('work', async (s, ctx) => {
      await ctx.publish({ step: 'start', items: s.items.length });
      const done: string[] = [];
      for (const item of s.items) {
        done.push(await ctx.call<string>('process', { item }));
        await ctx.publish({ step: 'processed', item });
      }
      return { done };
    })
    .end('work');
  const runner = new FlowRunner(new Executor(registry), {
    checkpoints: new SQLiteCheckpointStore(process.env.SQLITE_PATH!),
    checkpointKey: KEY,
    leaseMs: 500,
  });
  runner.takeOver([report], { everyMs: 200 });
  const server = new Server(
    { name: 'flows', version: '1.0.0' },
    { capabilities: { tools: {} } },
  );
  serveFlowsOverMcp(server, runner, [report], {
    waitMs: Number(process.env.WAIT_MS ?? 60_000),
    describe: {
      report: {
        description: 'Processes the items and reports each one.',
        input: {
          type: 'object',
          properties: { items: { type: 'array', items: { type: 'string' } } },
          required: ['items'],
        },
      },
    },
  });
  await server.connect(new StdioServerTransport());
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
