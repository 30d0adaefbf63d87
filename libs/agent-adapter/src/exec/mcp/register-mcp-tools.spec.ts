import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { z } from 'zod';
import {
  DurableSetupError,
  Flow,
  InvalidToolArguments,
  MemoryCheckpointStore,
  ToolFailed,
  ToolRegistry,
  mcpToolPolicy,
  registerMcpTools,
  type McpClientLike,
  type McpToolInfo,
} from 'agent-adapter';
import { CrashingStore } from 'agent-adapter/testing';
import { bodyOf, diesOn, runnerOn } from '../../../../../test/utils/specs';

interface Seen {
  tool: string;
  args: unknown;
  key: unknown;
}

/** An SDK McpServer with hinted tools, connected in-process to an SDK Client. */
async function connected(seen: Seen[]) {
  const server = new McpServer({ name: 'spec', version: '1.0.0' });
  const text = (t: string) => ({
    content: [{ type: 'text' as const, text: t }],
  });
  const tool = (
    name: string,
    annotations: Record<string, boolean> | undefined,
    answer: (a: { amount: number }) => ReturnType<typeof text> & {
      isError?: boolean;
    },
  ) =>
    server.registerTool(
      name,
      {
        description: `the ${name} tool`,
        inputSchema: { amount: z.number().int() },
        ...(annotations && { annotations }),
      },
      (args, extra) => {
        seen.push({ tool: name, args, key: extra._meta?.idempotencyKey });
        return answer(args);
      },
    );
  tool('charge', { destructiveHint: true }, (a) => text(`charged ${a.amount}`));
  tool('reserve', { idempotentHint: true, destructiveHint: false }, (a) =>
    text(`reserved ${a.amount}`),
  );
  tool('lookup', { readOnlyHint: true }, (a) => text(`found ${a.amount}`));
  tool('plain', undefined, (a) => text(`plain ${a.amount}`));
  tool('refuse', { readOnlyHint: true }, () => ({
    ...text('card declined'),
    isError: true,
  }));
  const [a, b] = InMemoryTransport.createLinkedPair();
  const client = new Client({ name: 'spec-client', version: '1.0.0' });
  await Promise.all([server.connect(a), client.connect(b)]);
  return { client, close: () => Promise.all([client.close(), server.close()]) };
}

interface S {
  r?: unknown;
  after?: unknown;
}

function flowCalling(tool: string, args: unknown) {
  return new Flow<S>(`mcp-${tool}`)
    .node('n', async (_s, ctx) => {
      const r = await ctx.call(tool, args).catch((e: unknown) => ({
        error: e instanceof ToolFailed ? [e.errorName, e.message] : String(e),
        invalid: e instanceof InvalidToolArguments,
      }));
      return { r, after: await ctx.call('after') };
    })
    .end('n');
}

describe('registerMcpTools', () => {
  const seen: Seen[] = [];
  let mcp: Awaited<ReturnType<typeof connected>>;
  beforeEach(async () => {
    seen.length = 0;
    mcp = await connected(seen);
  });
  afterEach(() => mcp.close());

  it('reads the policy from the annotations, each absent hint the safe way', () => {
    expect(mcpToolPolicy({ readOnlyHint: true })).toEqual({
      readOnly: true,
      idempotent: true,
    });
    expect(mcpToolPolicy({ idempotentHint: true })).toEqual({
      readOnly: false,
      idempotent: true,
    });
    expect(mcpToolPolicy({ destructiveHint: true })).toEqual({
      readOnly: false,
      idempotent: false,
    });
    expect(mcpToolPolicy({})).toEqual({ readOnly: false, idempotent: false });
    expect(mcpToolPolicy(undefined)).toEqual({
      readOnly: false,
      idempotent: false,
    });
  });

  it('registers every tool with its schema, description and policy; overrides win; a prefix names them', async () => {
    const registry = new ToolRegistry();
    const tools = await registerMcpTools(registry, mcp.client, {
      prefix: 'pay.',
      overrides: { reserve: { idempotent: false, timeoutMs: 5000 } },
    });
    expect(
      Object.fromEntries(
        tools.map((t) => [t.name, [t.mcpName, t.readOnly, t.idempotent]]),
      ),
    ).toEqual({
      'pay.charge': ['charge', false, false],
      'pay.reserve': ['reserve', false, false],
      'pay.lookup': ['lookup', true, true],
      'pay.plain': ['plain', false, false],
      'pay.refuse': ['refuse', true, true],
    });
    const charge = registry.get('pay.charge')!;
    expect(charge.description).toBe('the charge tool');
    expect(charge.parameters).toMatchObject({
      type: 'object',
      required: ['amount'],
    });
    expect(registry.get('pay.reserve')!.timeoutMs).toBe(5000);
    const plain = await registerMcpTools(new ToolRegistry(), mcp.client);
    expect(plain.find((t) => t.name === 'reserve')).toMatchObject({
      idempotent: true,
    });
  });

  it('refuses an override of a tool the server does not list, and registers none', async () => {
    const registry = new ToolRegistry();
    await expect(
      registerMcpTools(registry, mcp.client, { overrides: { chrage: {} } }),
    ).rejects.toThrow(DurableSetupError);
    registry.register('lookup', () => 'mine');
    await expect(registerMcpTools(registry, mcp.client)).rejects.toThrow(
      /already registered/,
    );
    expect(registry.list().map((t) => t.name)).toEqual(['lookup']);
  });

  it('lists every page of tools', async () => {
    const info = (name: string): McpToolInfo => ({
      name,
      inputSchema: { type: 'object' },
    });
    const pages: Record<string, { tools: McpToolInfo[]; nextCursor?: string }> =
      {
        '': { tools: [info('a')], nextCursor: 'p2' },
        p2: { tools: [info('b')], nextCursor: 'p3' },
        p3: { tools: [info('c')] },
      };
    const client: McpClientLike = {
      listTools: (params) => Promise.resolve(pages[params?.cursor ?? '']!),
      callTool: () => Promise.resolve({ content: [] }),
    };
    const tools = await registerMcpTools(new ToolRegistry(), client);
    expect(tools.map((t) => t.name)).toEqual(['a', 'b', 'c']);
  });

  it('calls the tool through the executor: result content stored, idempotency key in _meta', async () => {
    const registry = new ToolRegistry().register('after', () => 'ok', {
      idempotent: true,
    });
    await registerMcpTools(registry, mcp.client);
    const store = new MemoryCheckpointStore();
    const r = await runnerOn(store, registry).run(
      flowCalling('charge', { amount: 5 }),
      {},
      { runId: 'm1' },
    );
    expect(r).toMatchObject({
      status: 'done',
      state: { r: { content: [{ type: 'text', text: 'charged 5' }] } },
    });
    expect(seen).toEqual([
      { tool: 'charge', args: { amount: 5 }, key: expect.any(String) },
    ]);
    const log = (await store.history('m1')).calls.map((c) => bodyOf(c.sealed));
    expect(log.filter((b) => b.tool === 'charge').map((b) => b.phase)).toEqual([
      'started',
      'done',
    ]);
  });

  it('refuses arguments that do not fit the input schema before anything is logged', async () => {
    const registry = new ToolRegistry().register('after', () => 'ok', {
      idempotent: true,
    });
    await registerMcpTools(registry, mcp.client);
    const store = new MemoryCheckpointStore();
    const r = await runnerOn(store, registry).run(
      flowCalling('charge', { amount: 'five' }),
      {},
      { runId: 'm2' },
    );
    expect(r.state.r).toMatchObject({ invalid: true });
    expect(String((r.state.r as { error: string }).error)).toMatch(
      /Invalid arguments for tool "charge".*amount/,
    );
    expect(seen).toEqual([]);
    const log = (await store.history('m2')).calls.map((c) => bodyOf(c.sealed));
    expect(log.filter((b) => b.tool === 'charge')).toEqual([]);
  });

  it('an isError result is the call error (McpToolError, its text), sealed', async () => {
    const registry = new ToolRegistry().register('after', () => 'ok', {
      idempotent: true,
    });
    await registerMcpTools(registry, mcp.client);
    const store = new MemoryCheckpointStore();
    const r = await runnerOn(store, registry).run(
      flowCalling('refuse', { amount: 1 }),
      {},
      { runId: 'm3' },
    );
    expect(r.state.r).toEqual({
      error: ['McpToolError', 'card declined'],
      invalid: false,
    });
    const log = (await store.history('m3')).calls.map((c) => bodyOf(c.sealed));
    expect(
      log.find((b) => b.tool === 'refuse' && b.phase === 'done'),
    ).toBeDefined();
  });

  it('after a crash, a finished call replays its stored content without asking the server', async () => {
    const store = new MemoryCheckpointStore();
    const dying = new CrashingStore(store);
    const dyingRegistry = new ToolRegistry().register(
      'after',
      () => dying.kill(),
      { idempotent: true },
    );
    await registerMcpTools(dyingRegistry, mcp.client);
    const flow = flowCalling('charge', { amount: 7 });
    await diesOn(runnerOn(dying, dyingRegistry).run(flow, {}, { runId: 'm4' }));
    expect(seen).toHaveLength(1);
    const registry = new ToolRegistry().register('after', () => 'ok', {
      idempotent: true,
    });
    await registerMcpTools(registry, mcp.client);
    const r = await runnerOn(store, registry).recover(flow, 'm4');
    expect(r).toMatchObject({
      status: 'done',
      state: { r: { content: [{ type: 'text', text: 'charged 7' }] } },
    });
    expect(seen).toHaveLength(1);
  });
});
