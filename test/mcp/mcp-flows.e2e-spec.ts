/**
 * Durable flows served as MCP tools (serveFlowsOverMcp): a real MCP server process (the SDK's
 * Server over stdio, test/mcp/flows-server.ts) and the SDK's Client. The calling agent starts a
 * flow and follows its stream as progress notifications; the same runId or idempotency key finds
 * the same run; the server SIGKILLed mid-run, another server process takes the run over and the
 * client follows it to its end with get_run from where it was: each entry once, in order.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { sleep } from '../utils/specs';

jest.setTimeout(90_000);

const ROOT = join(__dirname, '..', '..');

interface RunAnswer {
  runId: string;
  status: string;
  step: number;
  state: { items: string[]; done?: string[] };
}

interface Entry {
  offset: number;
  node?: string;
  data: { item?: string; step?: string; items?: number };
}

describe('flows as MCP tools (stdio server processes, SQLite)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'aa-mcp-flows-'));
  const ledger = join(dir, 'ledger.log');
  const clients: Array<{ client: Client; transport: StdioClientTransport }> =
    [];
  afterAll(async () => {
    for (const { client, transport } of clients) {
      if (transport.pid) process.kill(transport.pid, 'SIGKILL');
      await client.close().catch(() => undefined);
    }
    rmSync(dir, { recursive: true, force: true });
  });

  async function connect(env: Record<string, string> = {}) {
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [
        '-r',
        join(ROOT, 'test/utils/ts-register.js'),
        join(__dirname, 'flows-server.ts'),
      ],
      env: {
        PATH: process.env.PATH ?? '',
        SQLITE_PATH: join(dir, 'runs.db'),
        LEDGER: ledger,
        ...env,
      },
      cwd: ROOT,
      stderr: 'inherit',
    });
    const client = new Client({ name: 'calling-agent', version: '1.0.0' });
    await client.connect(transport);
    clients.push({ client, transport });
    // Progress as it arrives, in order: the SDK client hands a notification to its handler a
    // microtask later but a response at once, so one that lands in the same read as the response
    // is dropped ("unknown token") by the time it is handled. What the server sent is this list.
    const progress: Entry[] = [];
    const deliver = transport.onmessage!;
    transport.onmessage = (message: JSONRPCMessage) => {
      const m = message as { method?: string; params?: { message?: string } };
      if (m.method === 'notifications/progress')
        progress.push(JSON.parse(m.params!.message!) as Entry);
      deliver(message);
    };
    return { client, transport, progress };
  }

  const lines = () => readFileSync(ledger, 'utf8').split('\n').filter(Boolean);

  it('lists the flow and get_run; a call starts the run, sends its stream as progress, answers with it; the same runId or key is the same run', async () => {
    const { client, progress } = await connect();
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name)).toEqual(['report', 'get_run']);
    expect(tools[0]).toMatchObject({
      description: 'Processes the items and reports each one.',
      annotations: { idempotentHint: true },
      inputSchema: { required: ['input'] },
    });
    const r = await client.callTool(
      {
        name: 'report',
        arguments: { input: { items: ['a', 'b'] }, runId: 'm1' },
      },
      undefined,
      { onprogress: () => undefined },
    );
    expect(r.isError).toBeFalsy();
    expect(r.structuredContent).toMatchObject({
      runId: 'm1',
      status: 'done',
      state: { done: ['did a', 'did b'] },
    });
    expect(progress).toEqual([
      { offset: 0, node: 'work', data: { step: 'start', items: 2 } },
      { offset: 1, node: 'work', data: { step: 'processed', item: 'a' } },
      { offset: 2, node: 'work', data: { step: 'processed', item: 'b' } },
    ]);
    // Again with the same runId: the same run, nothing processed again.
    const again = await client.callTool({
      name: 'report',
      arguments: { input: { items: ['a', 'b'] }, runId: 'm1' },
    });
    expect(again.structuredContent).toMatchObject({
      runId: 'm1',
      status: 'done',
    });
    // The caller's idempotency key (what registerMcpTools sends) names one run too.
    const byKey = () =>
      client.callTool({
        name: 'report',
        arguments: { input: { items: ['c'] } },
        _meta: { idempotencyKey: 'key-1' },
      });
    const [k1, k2] = [await byKey(), await byKey()];
    expect((k1.structuredContent as RunAnswer).runId).toMatch(/^mcp-/);
    expect((k2.structuredContent as RunAnswer).runId).toBe(
      (k1.structuredContent as RunAnswer).runId,
    );
    expect(lines().map((l) => l.split(' ').slice(1).join(' '))).toEqual([
      'm1 a',
      'm1 b',
      `${(k1.structuredContent as RunAnswer).runId} c`,
    ]);
    // Bad calls are tool errors naming what is wrong; nothing starts.
    const bad = await client.callTool({
      name: 'report',
      arguments: { input: 3 },
    });
    expect(bad.isError).toBe(true);
    const text = (r: object) =>
      (r as { content: Array<{ text: string }> }).content[0]!.text;
    expect(text(bad)).toMatch(/input must be an object/);
    const none = await client.callTool({
      name: 'get_run',
      arguments: { runId: 'nope' },
    });
    expect(none.isError).toBe(true);
    expect(text(none)).toMatch(/^CheckpointNotFound: .*no run "nope"/);
  });

  it('the server is SIGKILLed mid-run: another server takes the run over, and get_run follows it from where the client was', async () => {
    const a = await connect({ ITEM_DELAY_MS: '800' });
    const seen = a.progress;
    const call = a.client.callTool(
      {
        name: 'report',
        arguments: { input: { items: ['x', 'y', 'z'] }, runId: 'm2' },
      },
      undefined,
      { onprogress: () => undefined },
    );
    call.catch(() => undefined);
    // Killed once the store holds the first item's entry (x is done: an entry is stored after
    // the results before it), while the server processes the second. Read from the store, not
    // from the client, whose reads a loaded machine may delay past the end of the run.
    const db = new Database(join(dir, 'runs.db'), { readonly: true });
    const entries = db.prepare(
      `SELECT count(*) AS n FROM aa_stream WHERE run_id = 'm2'`,
    );
    while ((entries.get() as { n: number }).n < 2) await sleep(10);
    db.close();
    process.kill(a.transport.pid!, 'SIGKILL');
    await expect(call).rejects.toThrow();
    const b = await connect({ ITEM_DELAY_MS: '50' });
    // From where this client was: the entries it received before the server died.
    const last = seen.length > 0 ? seen[seen.length - 1]!.offset : -1;
    const r = await b.client.callTool(
      { name: 'get_run', arguments: { runId: 'm2', from: last + 1 } },
      undefined,
      { onprogress: () => undefined },
    );
    expect(r.structuredContent).toMatchObject({
      runId: 'm2',
      status: 'done',
      state: { done: ['did x', 'did y', 'did z'] },
    });
    const all = [...seen, ...b.progress];
    expect(all.map((e) => e.offset)).toEqual([0, 1, 2, 3]);
    expect(all.slice(1).map((e) => e.data.item)).toEqual(['x', 'y', 'z']);
    // x finished before the kill: replayed, not run again; y was cut: idempotent, run again.
    const m2 = lines()
      .filter((l) => l.includes(' m2 '))
      .map((l) => l.split(' ')[2]);
    expect(m2.filter((i) => i === 'x')).toHaveLength(1);
    expect(m2.filter((i) => i === 'z')).toHaveLength(1);
  });
});
