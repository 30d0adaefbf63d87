/**
 * The MCP crash cases, over either transport: a worker process (test/mcp/mcp-worker.ts) runs a
 * flow calling one MCP tool of the test's real MCP server (test/mcp/mcp-server.js, the SDK's
 * McpServer) on a SQLite file and is SIGKILLed while the server handles the call; another process
 * recovers on the same file. A destructive tool's call is in doubt (RecoveryNeedsDecision naming
 * it, charged once); an idempotent tool's call reruns once, with the same idempotency key in
 * `_meta`. Over stdio each worker starts its own server (the cut call dies with it); over HTTP one
 * server outlives the killed worker, its cut call left hanging, and answers the recoverer.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ChildHarness, killAll } from '../utils/child-process';
import { spawnTs } from '../utils/ts-child';

const WORKER = join(__dirname, 'mcp-worker.ts');
const SERVER = join(__dirname, 'mcp-server.js');

export type McpTransportKind = 'stdio' | 'http';

interface LedgerLine {
  start?: number;
  tool?: string;
  args?: unknown;
  key?: string | null;
  pid?: number;
}

function ledgerOf(file: string): LedgerLine[] {
  if (!existsSync(file)) return [];
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as LedgerLine);
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

export function describeMcpCrash(kind: McpTransportKind): void {
  describe(`MCP tools over ${kind}: SIGKILL of the worker inside a call`, () => {
    const dirs: string[] = [];
    const servers = new Set<number>();

    afterAll(async () => {
      await killAll();
      // Stdio servers end when their worker's pipe closes; one that did not is killed by its pid.
      for (const pid of servers) if (alive(pid)) process.kill(pid, 'SIGKILL');
      for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
    });

    /** A store file, a ledger, and over HTTP the server (its first call of `hang` hangs). */
    async function sandbox(hang: string) {
      const dir = mkdtempSync(join(tmpdir(), `aa-mcp-${kind}-`));
      dirs.push(dir);
      const ledger = join(dir, 'ledger.jsonl');
      const env = {
        ...process.env,
        NODE_OPTIONS: '',
        SQLITE_PATH: join(dir, 'runs.db'),
        MCP_LEDGER: ledger,
      };
      let where = 'stdio';
      if (kind === 'http') {
        const server = new ChildHarness(
          spawn(process.execPath, [SERVER, 'http'], {
            env: { ...env, MCP_HANG: hang },
            stdio: ['ignore', 'pipe', 'pipe'],
          }),
          { name: 'mcp http server' },
        );
        const line = await server.waitForLine(/^LISTENING \d+$/);
        where = `http://127.0.0.1:${line.split(' ')[1]}/mcp`;
      }
      const runId = `mcp-${randomBytes(4).toString('hex')}`;
      const worker = (mode: string, tool: string, extra: object = {}) =>
        new ChildHarness(
          spawnTs(
            WORKER,
            [where, mode, runId, tool, JSON.stringify(argsOf(tool))],
            { env: { ...env, ...extra }, files: [WORKER] },
          ),
          { name: `mcp worker ${kind} ${mode} ${tool}` },
        );
      const ledgerNow = () => {
        const lines = ledgerOf(ledger);
        for (const l of lines)
          if (l.start && kind === 'stdio') servers.add(l.start);
        return lines;
      };
      return { worker, ledger: ledgerNow };
    }

    const argsOf = (tool: string) =>
      tool === 'charge' ? { amount: 40 } : { item: 'seat-7' };

    /** Runs `tool` in a worker, SIGKILLs it once the server has the call, then recovers. */
    async function killedInside(tool: string) {
      const box = await sandbox(tool);
      const first = box.worker(
        'run',
        tool,
        kind === 'stdio' ? { MCP_HANG: tool } : {},
      );
      const deadline = Date.now() + 30_000;
      while (!box.ledger().some((l) => l.tool === tool)) {
        if (Date.now() > deadline)
          throw new Error(`the server never got "${tool}": ${first.stderr}`);
        await sleep(25);
      }
      await first.kill();
      const server = box.ledger().find((l) => l.tool === tool)!.pid!;
      if (kind === 'stdio') {
        // The worker's server child sees its stdin close and ends, its hanging call with it.
        for (let i = 0; i < 200 && alive(server); i++) await sleep(25);
        expect(alive(server)).toBe(false);
      } else {
        // The HTTP server lives on, the cut call still pending there: the recoverer meets it.
        expect(alive(server)).toBe(true);
      }
      const recovery = box.worker('recover', tool);
      const exit = await recovery.exit(60_000);
      expect({ code: exit.code, stderr: recovery.stderr }).toEqual({
        code: 0,
        stderr: '',
      });
      const outcome = JSON.parse(
        recovery.stdout.trim().split('\n').at(-1)!,
      ) as {
        status?: string;
        r?: unknown;
        error?: string;
        calls?: Array<[string, string]>;
      };
      return { outcome, calls: box.ledger().filter((l) => l.tool === tool) };
    }

    it('a destructive tool (destructiveHint) cut off by the crash is in doubt: recovery asks, the server charged once', async () => {
      const { outcome, calls } = await killedInside('charge');
      expect(outcome.error).toBe('RecoveryNeedsDecision');
      expect(outcome.calls!.map(([tool]) => tool)).toEqual(['charge']);
      expect(calls).toHaveLength(1);
    }, 120_000);

    it('an idempotent tool (idempotentHint) cut off by the crash reruns once, with the same idempotency key', async () => {
      const { outcome, calls } = await killedInside('reserve');
      expect(outcome).toEqual({
        status: 'done',
        r: {
          content: [{ type: 'text', text: 'reserved seat-7' }],
          structuredContent: { item: 'seat-7' },
        },
      });
      expect(calls).toHaveLength(2);
      expect(typeof calls[0]!.key).toBe('string');
      expect(calls[1]!.key).toBe(calls[0]!.key);
    }, 120_000);
  });
}
