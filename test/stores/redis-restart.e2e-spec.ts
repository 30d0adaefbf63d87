/**
 * A real Redis server restarted under a running worker. The suite starts its own redis-server
 * (AOF with appendfsync always, in a temp dir, on a free port) so killing it disturbs nobody else.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Redis from 'ioredis';
import {
  Executor,
  Flow,
  FlowRunner,
  RecoveryNeedsDecision,
  RedisCheckpointStore,
  ToolRegistry,
} from 'agent-adapter';
import { KEY } from 'agent-adapter/testing/fixtures';
import { describeWithService } from '../utils/services';

const freePort = () =>
  new Promise<number>((resolve) => {
    const srv = createServer().listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as { port: number };
      srv.close(() => resolve(port));
    });
  });

async function startRedis(dir: string, port: number): Promise<ChildProcess> {
  const child = spawn(
    'redis-server',
    [
      '--port',
      String(port),
      '--bind',
      '127.0.0.1',
      '--dir',
      dir,
      '--appendonly',
      'yes',
      '--appendfsync',
      'always',
      '--save',
      '',
    ],
    { stdio: 'ignore' },
  );
  const probe = new Redis({
    port,
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
  });
  for (let i = 0; i < 100; i++) {
    try {
      await probe.connect();
      if ((await probe.ping()) === 'PONG') break;
    } catch {
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  probe.disconnect();
  return child;
}

function kill(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    child.once('exit', () => resolve());
    child.kill('SIGKILL');
  });
}

// Needs the redis-server binary (the suite that uses the shared Redis checks the service).
describeWithService(
  'redis',
  'RedisCheckpointStore across a Redis restart',
  () => {
    const dir = mkdtempSync(join(tmpdir(), 'aa-redis-restart-'));
    let port = 0;
    let server: ChildProcess;

    beforeAll(async () => {
      port = await freePort();
      server = await startRedis(dir, port);
    });
    afterAll(async () => {
      if (server.exitCode === null) await kill(server);
      rmSync(dir, { recursive: true, force: true });
    });

    function flowWith(gate: Promise<void>, ran: string[]) {
      const registry = new ToolRegistry()
        .register('reserve', async () => {
          ran.push('reserve');
          await gate;
          return 'reserved';
        })
        .register('confirm', () => {
          ran.push('confirm');
          return 'confirmed';
        });
      const flow = new Flow('restart')
        .node('a', async (_s, ctx) => ({ r: await ctx.call('reserve') }))
        .node('b', async (_s, ctx) => ({ c: await ctx.call('confirm') }))
        .edge('a', 'b')
        .end('b');
      return { flow, executor: new Executor(registry) };
    }

    it('a worker whose Redis restarts mid-call finishes its run once Redis is back; nothing is lost or doubled', async () => {
      let release!: () => void;
      const gate = new Promise<void>((r) => (release = r));
      const ran: string[] = [];
      const { flow, executor } = flowWith(gate, ran);
      const store = new RedisCheckpointStore(() => new Redis({ port }), {
        prefix: 'restart1',
      });
      const runner = new FlowRunner(executor, {
        checkpoints: store,
        checkpointKey: KEY,
      });
      const run = runner.run(flow, {}, { runId: 'r1' });
      while (!ran.includes('reserve'))
        await new Promise((r) => setTimeout(r, 10));

      await kill(server); // the `started` of reserve is on disk (appendfsync always)
      release(); // reserve returns while Redis is down: its done record and checkpoint must wait
      await new Promise((r) => setTimeout(r, 300));
      server = await startRedis(dir, port);

      const result = await run;
      expect(result).toMatchObject({
        status: 'done',
        state: { r: 'reserved', c: 'confirmed' },
      });
      expect(ran).toEqual(['reserve', 'confirm']);
      const head = await store.head('r1');
      const { calls } = await store.history('r1');
      expect(head?.calls).toBe(calls.length);
      expect(calls).toHaveLength(4);
      runner.close();
      await store.close();
    });

    it('a write that fails while Redis is down is reported, leaves nothing half-written, and the run is recoverable after the restart', async () => {
      let release!: () => void;
      const gate = new Promise<void>((r) => (release = r));
      const ran: string[] = [];
      const { flow, executor } = flowWith(gate, ran);
      // Fail fast instead of queueing while disconnected.
      const client = new Redis({
        port,
        maxRetriesPerRequest: 0,
        enableOfflineQueue: false,
        retryStrategy: () => 100,
      });
      await new Promise((ready) => client.once('ready', ready));
      const store = new RedisCheckpointStore(() => client, {
        prefix: 'restart2',
      });
      const runner = new FlowRunner(executor, {
        checkpoints: store,
        checkpointKey: KEY,
        leaseMs: 200,
      });
      const run = runner.run(flow, {}, { runId: 'r2' }).then(
        (r) => r,
        (e: unknown) => e as Error,
      );
      while (!ran.includes('reserve'))
        await new Promise((r) => setTimeout(r, 10));
      await kill(server);
      release();
      const error = await run;
      expect(error).toBeInstanceOf(Error);
      expect((error as Error).name).not.toBe('CheckpointStoreCorrupt');

      server = await startRedis(dir, port);
      const fresh = new RedisCheckpointStore(() => new Redis({ port }), {
        prefix: 'restart2',
      });
      const head = await fresh.head('r2');
      const { calls } = await fresh.history('r2');
      expect(head?.calls).toBe(calls.length); // the head and the log agree: nothing half-written
      // reserve started and its result never reached Redis: in doubt, so recovery asks first.
      const recoverer = new FlowRunner(executor, {
        checkpoints: fresh,
        checkpointKey: KEY,
      });
      await expect(recoverer.recover(flow, 'r2')).rejects.toBeInstanceOf(
        RecoveryNeedsDecision,
      );
      const done = await recoverer.recover(flow, 'r2', { rerunInDoubt: true });
      expect(done.status).toBe('done');
      runner.close();
      recoverer.close();
      await store.close();
      await fresh.close();
    });
  },
);
