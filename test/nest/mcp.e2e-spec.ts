/**
 * MCP tools through the module's `mcp` option, against the real MCP server of the MCP tests
 * (test/mcp/mcp-server.js, the SDK's McpServer) over stdio, started by the test's own client: a
 * `@Flow` node calls an MCP tool the module registered; the boot sweep recovers a run cut off
 * inside one (registered before it); a bad entry fails the start naming it; the module never
 * closes a client it was given.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { Injectable } from '@nestjs/common';
import {
  MemoryCheckpointStore,
  type McpClientLike,
  type NodeContext,
} from 'agent-adapter';
import {
  DurableModule,
  DurableSetupError,
  Flow,
  FlowRunner,
  Node,
  RecoveryOrchestrator,
  ToolRegistry,
  type DurableMcpTools,
} from 'agent-adapter/nest';
import { CrashingStore, SimulatedCrash, settle } from 'agent-adapter/testing';
import { KEY } from 'agent-adapter/testing/fixtures';
import { Apps } from './utils';

interface Booking {
  item: string;
  note?: unknown;
}

@Injectable()
@Flow('mcp-booking')
class BookingFlow {
  @Node({ start: true, end: true })
  async reserve(s: Booking, ctx: NodeContext): Promise<Partial<Booking>> {
    return { note: await ctx.call('shop.reserve', { item: s.item }) };
  }
}

describe('DurableModule mcp option (e2e, a real MCP server over stdio)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'aa-nest-mcp-'));
  const ledger = join(dir, 'ledger.jsonl');
  const apps = new Apps();
  let client: Client;

  beforeAll(async () => {
    client = new Client({ name: 'nest-mcp-spec', version: '1.0.0' });
    await client.connect(
      new StdioClientTransport({
        command: process.execPath,
        args: [join(__dirname, '..', 'mcp', 'mcp-server.js'), 'stdio'],
        env: { PATH: process.env.PATH ?? '', MCP_LEDGER: ledger },
        stderr: 'inherit',
      }),
    );
  }, 30_000);
  afterEach(() => apps.closeAll());
  afterAll(async () => {
    await client?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const calls = (tool: string) =>
    (existsSync(ledger) ? readFileSync(ledger, 'utf8') : '')
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { tool?: string; key?: string | null })
      .filter((l) => l.tool === tool);

  const boot = (
    mcp: readonly DurableMcpTools[],
    store = new MemoryCheckpointStore(),
  ) =>
    apps.boot(
      [DurableModule.forRoot({ store, key: KEY, workerId: 'w1', mcp })],
      {
        providers: [BookingFlow],
      },
    );

  it('a @Flow node calls an MCP tool the module registered; the client stays open after the app closes', async () => {
    const app = await boot([{ client, prefix: 'shop.' }]);
    const registry = app.get(ToolRegistry);
    expect(registry.get('shop.reserve')?.idempotent).toBe(true);
    expect(registry.get('shop.charge')?.idempotent).toBe(false);
    const before = calls('reserve').length;
    const r = await app
      .get(FlowRunner)
      .start<Booking>(BookingFlow, { item: 'seat-1' }, { runId: 'b1' });
    expect(r).toMatchObject({
      status: 'done',
      state: {
        note: {
          content: [{ type: 'text', text: 'reserved seat-1' }],
          structuredContent: { item: 'seat-1' },
        },
      },
    });
    const made = calls('reserve').slice(before);
    expect(made).toHaveLength(1);
    expect(made[0]!.key).toEqual(expect.stringMatching(/^.{16,}$/));
    await apps.closeAll();
    // The application's client: the module did not close it.
    expect((await client.listTools()).tools.length).toBeGreaterThan(0);
  });

  it('registers before the boot sweep: a run cut off inside an idempotent MCP call is recovered at boot, the call rerun once with its key', async () => {
    const store = new MemoryCheckpointStore();
    const crashing = new CrashingStore(store);
    // Worker 1 dies right after the server answered, before `done` is logged.
    const dying: McpClientLike = {
      listTools: (params) => client.listTools(params),
      callTool: async (params) => {
        const result = await client.callTool(params);
        crashing.kill('inside shop.reserve');
        return result;
      },
    };
    const before = calls('reserve').length;
    const first = await boot(
      [{ client: dying, prefix: 'shop.' }],
      crashing as never,
    );
    await expect(
      first
        .get(FlowRunner)
        .start<Booking>(BookingFlow, { item: 'seat-2' }, { runId: 'b2' }),
    ).rejects.toThrow(SimulatedCrash);
    await settle();
    await apps.closeAll();
    // Its worker restarts (the same id: its own runs are taken back at once).
    const second = await boot([{ client, prefix: 'shop.' }], store);
    await second.get(RecoveryOrchestrator).waitUntilRecovered();
    const head = await store.head('b2');
    expect(head?.status).toBe('done');
    const made = calls('reserve').slice(before);
    expect(made).toHaveLength(2);
    expect(made[1]!.key).toBe(made[0]!.key);
  });

  it.each([
    [
      'a name taken twice',
      () => [
        { client, prefix: 'a.' },
        { client, prefix: 'a.' },
      ],
      /mcp\[1\] \(prefix "a\."\).*"a\.charge"/,
    ],
    [
      'a prefix that is not a string',
      () => [{ client, prefix: 42 as unknown as string }],
      /mcp\[0\].*prefix must be a string.*42/,
    ],
    [
      'an override of a tool the server does not list',
      () => [{ client, overrides: { nope: { idempotent: true } } }],
      /mcp\[0\].*"nope"/,
    ],
    [
      'an entry without a client',
      () => [{ prefix: 'x.' } as unknown as DurableMcpTools],
      /mcp\[0\] has no client/,
    ],
  ])('%s fails the start naming it', async (_what, mcp, message) => {
    const failed = boot(mcp());
    await expect(failed).rejects.toThrow(DurableSetupError);
    await expect(failed).rejects.toThrow(message);
  });
});
