/**
 * MCP tools over streamable HTTP: the test's MCP server (test/mcp/mcp-server.js, the SDK's
 * McpServer and StreamableHTTPServerTransport) in a child process on a free loopback port, its
 * tools registered through the SDK's HTTP client transport, one call made in a run; then the crash
 * cases of test/mcp/mcp-crash.ts over HTTP (a worker SIGKILLed inside a destructive call and inside
 * an idempotent one, recovered by another process).
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  Flow,
  MemoryCheckpointStore,
  ToolRegistry,
  registerMcpTools,
} from 'agent-adapter';
import { bodyOf, runnerOn } from '../utils/specs';
import { ChildHarness, killAll } from '../utils/child-process';
import { describeMcpCrash } from './mcp-crash';

describe('MCP tools over streamable HTTP', () => {
  const dir = mkdtempSync(join(tmpdir(), 'aa-mcp-http-'));
  const ledger = join(dir, 'ledger.jsonl');
  let server: ChildHarness;
  let client: Client;

  beforeAll(async () => {
    server = new ChildHarness(
      spawn(process.execPath, [join(__dirname, 'mcp-server.js'), 'http'], {
        env: { ...process.env, NODE_OPTIONS: '', MCP_LEDGER: ledger },
        stdio: ['ignore', 'pipe', 'pipe'],
      }),
      { name: 'mcp http server' },
    );
    const line = await server.waitForLine(/^LISTENING \d+$/);
    const port = Number(line.split(' ')[1]);
    client = new Client({ name: 'http-spec', version: '1.0.0' });
    await client.connect(
      new StreamableHTTPClientTransport(
        new URL(`http://127.0.0.1:${port}/mcp`),
      ),
    );
  }, 30_000);

  afterAll(async () => {
    await client?.close();
    await killAll();
    rmSync(dir, { recursive: true, force: true });
  });

  it('registers the tools with their policies and runs a call: started/done logged, the key in _meta', async () => {
    const registry = new ToolRegistry();
    const tools = await registerMcpTools(registry, client, { prefix: 'shop.' });
    expect(
      Object.fromEntries(tools.map((t) => [t.name, t.idempotent])),
    ).toEqual({
      'shop.charge': false,
      'shop.reserve': true,
      'shop.lookup': true,
      'shop.note': false,
      'shop.refuse': true,
    });
    const store = new MemoryCheckpointStore();
    const flow = new Flow<{ r?: unknown }>('mcp-http')
      .node('n', async (_s, ctx) => ({
        r: await ctx.call('shop.charge', { amount: 3 }),
      }))
      .end('n');
    const r = await runnerOn(store, registry).run(flow, {}, { runId: 'h1' });
    expect(r).toMatchObject({
      status: 'done',
      state: { r: { content: [{ type: 'text', text: 'charged 3' }] } },
    });
    const calls = readFileSync(ledger, 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { tool?: string; key?: unknown })
      .filter((l) => l.tool);
    expect(calls).toEqual([
      expect.objectContaining({ tool: 'charge', args: { amount: 3 } }),
    ]);
    expect(calls[0]!.key).toEqual(expect.stringMatching(/^.{16,}$/));
    const log = (await store.history('h1')).calls.map((c) => bodyOf(c.sealed));
    expect(log.map((b) => [b.tool, b.phase])).toEqual([
      ['shop.charge', 'started'],
      ['shop.charge', 'done'],
    ]);
  });
});

describeMcpCrash('http');
