/**
 * A real MCP server for the MCP tests, built with the SDK's McpServer (CommonJS, plain Node).
 *
 *   node test/mcp/mcp-server.js stdio        (the client spawns it; it ends when stdin closes)
 *   node test/mcp/mcp-server.js http         (prints `LISTENING <port>` on a free loopback port)
 *
 * Tools: charge (destructiveHint), reserve (idempotentHint), lookup (readOnlyHint), note (no
 * hints), refuse (answers isError: true). Every call appends a JSON line to $MCP_LEDGER first:
 * { tool, args, key (the request's _meta.idempotencyKey), pid }; the server's start is a line
 * { start: pid }. MCP_HANG=<tool>: the server's first call of that tool never answers (after its
 * ledger line), so a test can kill the worker inside the call; later calls (a recovery's rerun
 * through the same HTTP server) answer. Over HTTP, each client gets its own session.
 */
'use strict';
const { appendFileSync } = require('node:fs');
const { createServer } = require('node:http');
const { randomUUID } = require('node:crypto');
const { McpServer } = require('@modelcontextprotocol/sdk/server/mcp.js');
const {
  StdioServerTransport,
} = require('@modelcontextprotocol/sdk/server/stdio.js');
const {
  StreamableHTTPServerTransport,
} = require('@modelcontextprotocol/sdk/server/streamableHttp.js');
const { z } = require('zod');

const LEDGER = process.env.MCP_LEDGER;
const HANG = process.env.MCP_HANG;
let hung = false;

function log(line) {
  if (LEDGER) appendFileSync(LEDGER, JSON.stringify(line) + '\n');
}

function build() {
  const server = new McpServer({ name: 'ledger-server', version: '1.0.0' });
  const tool = (name, description, inputSchema, annotations, answer) =>
    server.registerTool(
      name,
      { description, inputSchema, ...(annotations && { annotations }) },
      async (args, extra) => {
        log({
          tool: name,
          args,
          key: extra._meta?.idempotencyKey ?? null,
          pid: process.pid,
        });
        if (HANG === name && !hung) {
          hung = true;
          await new Promise(() => undefined);
        }
        return answer(args);
      },
    );
  const text = (t) => ({ content: [{ type: 'text', text: t }] });
  tool(
    'charge',
    'Charges a card',
    { amount: z.number().int().positive() },
    { destructiveHint: true, idempotentHint: false },
    (a) => text(`charged ${a.amount}`),
  );
  tool(
    'reserve',
    'Reserves an item',
    { item: z.string() },
    { destructiveHint: false, idempotentHint: true },
    (a) => ({
      ...text(`reserved ${a.item}`),
      structuredContent: { item: a.item },
    }),
  );
  tool(
    'lookup',
    'Looks an item up',
    { item: z.string() },
    { readOnlyHint: true },
    (a) => text(`found ${a.item}`),
  );
  tool('note', 'Writes a note', { text: z.string() }, undefined, (a) =>
    text(`noted ${a.text}`),
  );
  tool('refuse', 'Always refuses', {}, { readOnlyHint: true }, () => ({
    ...text('card declined'),
    isError: true,
  }));
  return server;
}

async function main() {
  log({ start: process.pid });
  const mode = process.argv[2];
  if (mode === 'stdio') {
    // The client closing its end (or dying) ends the server, a hanging call included.
    process.stdin.on('end', () => process.exit(0));
    await build().connect(new StdioServerTransport());
    return;
  }
  if (mode === 'http') {
    // One transport (and server) per session: a worker and, after it is killed, its recoverer.
    const sessions = new Map();
    const http = createServer(async (req, res) => {
      const id = req.headers['mcp-session-id'];
      let transport = typeof id === 'string' ? sessions.get(id) : undefined;
      if (!transport) {
        const created = new StreamableHTTPServerTransport({
          sessionIdGenerator: () => randomUUID(),
          onsessioninitialized: (sid) => sessions.set(sid, created),
        });
        await build().connect(created);
        transport = created;
      }
      await transport.handleRequest(req, res);
    });
    http.listen(0, '127.0.0.1', () => {
      process.stdout.write(`LISTENING ${http.address().port}\n`);
    });
    return;
  }
  throw new Error('usage: mcp-server.js stdio|http');
}

main().catch((error) => {
  process.stderr.write(String(error?.stack ?? error) + '\n');
  process.exit(1);
});
