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
  FailoverNeedsDecision,
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

    /**
     * A master and its replica, each a server of this test's own: a run is started on the master
     * and its first call begins; once the replica has all of it, the master is killed and the
     * replica promoted (`REPLICAOF NO ONE`). `then` gets the promoted server's port and a way to
     * restart it, and recovers the run there with `recoverOnB`.
     */
    async function promoted(
      then: (b: {
        port: number;
        ran: string[];
        recoverOnB: () => Promise<unknown>;
        restart: () => Promise<void>;
        on: (...command: [string, ...string[]]) => Promise<string>;
      }) => Promise<void>,
    ): Promise<void> {
      const dirs = [0, 1].map(() =>
        mkdtempSync(join(tmpdir(), 'aa-redis-promote-')),
      );
      const [portA, portB] = [await freePort(), await freePort()];
      const a = await startRedis(dirs[0]!, portA);
      let b = await startRedis(dirs[1]!, portB);
      const on = async (port: number, ...command: [string, ...string[]]) => {
        const node = new Redis({ port, maxRetriesPerRequest: 1 });
        try {
          return String(await node.call(...command));
        } finally {
          node.disconnect();
        }
      };
      try {
        // The first sync at once (Redis 7 waits 5 s for more replicas by default).
        await on(portA, 'CONFIG', 'SET', 'repl-diskless-sync-delay', '0');
        await on(portB, 'REPLICAOF', '127.0.0.1', String(portA));
        const ran: string[] = [];
        const { flow, executor } = flowWith(new Promise(() => {}), ran);
        const onA = new RedisCheckpointStore(() => new Redis({ port: portA }), {
          prefix: 'promote',
        });
        // A short lease: the run is due on B soon after A is gone.
        const worker = new FlowRunner(executor, {
          checkpoints: onA,
          checkpointKey: KEY,
          leaseMs: 500,
        });
        void worker.run(flow, {}, { runId: 'p1' }).catch(() => undefined);
        while (!ran.includes('reserve'))
          await new Promise((r) => setTimeout(r, 10));
        // The replica has the run (its `started` included) before its master dies.
        for (let synced = false; !synced;) {
          const info = await on(portA, 'INFO', 'replication');
          const at = Number(/master_repl_offset:(\d+)/.exec(info)![1]);
          const acked = /slave0:.*state=online,offset=(\d+)/.exec(info)?.[1];
          synced = acked !== undefined && Number(acked) >= at;
          if (!synced) await new Promise((r) => setTimeout(r, 20));
        }
        worker.close();
        await onA.close();
        await kill(a);
        await on(portB, 'REPLICAOF', 'NO', 'ONE');
        expect(await on(portB, 'EXISTS', '{promote:p1}:run')).toBe('1');
        expect(await replid2(portB)).not.toMatch(/^0+$/);

        const recoverOnB = async () => {
          const store = new RedisCheckpointStore(
            () => new Redis({ port: portB }),
            { prefix: 'promote' },
          );
          const runner = new FlowRunner(executor, {
            checkpoints: store,
            checkpointKey: KEY,
          });
          try {
            return await runner.recover(flow, 'p1').then(
              (r) => r,
              (e: unknown) => e,
            );
          } finally {
            runner.close();
            await store.close();
          }
        };
        const restart = async () => {
          await kill(b);
          b = await startRedis(dirs[1]!, portB);
          // The id it was promoted from is gone from its INFO.
          expect(await replid2(portB)).toMatch(/^0+$/);
        };
        await then({
          port: portB,
          ran,
          recoverOnB,
          restart,
          on: (...command) => on(portB, ...command),
        });
      } finally {
        for (const server of [a, b])
          if (server.exitCode === null && server.signalCode === null)
            await kill(server);
        for (const d of dirs) rmSync(d, { recursive: true, force: true });
      }

      async function replid2(port: number) {
        const info = await on(port, 'INFO', 'replication');
        return /master_replid2:(\w+)/.exec(info)![1]!;
      }
    }

    it('a failover found once stays found after the promoted master restarts (the restart clears what showed it)', async () => {
      await promoted(async ({ ran, recoverOnB, restart }) => {
        expect(await recoverOnB()).toBeInstanceOf(FailoverNeedsDecision);
        await restart();
        expect(await recoverOnB()).toBeInstanceOf(FailoverNeedsDecision);
        expect(ran).toEqual(['reserve']);
      });
    }, 30_000);

    it('a promotion a due look saw is found after the promoted master restarts, though nothing touched the run before', async () => {
      await promoted(async ({ port, ran, recoverOnB, restart, on }) => {
        // A worker's due look on the promoted master (the run's lease is not over yet, so the
        // look neither claims nor checks the run): it records the promotion it sees.
        const store = new RedisCheckpointStore(() => new Redis({ port }), {
          prefix: 'promote',
        });
        await store.listDue({ now: 0 });
        await store.close();
        const [from, to] = (await on('HGETALL', '{promote}:promoted')).split(
          ',',
        );
        const info = await on('INFO', 'replication');
        expect(from).toBe(/master_replid2:(\w+)/.exec(info)![1]);
        expect(to).toBe(/master_replid:(\w+)/.exec(info)![1]);
        // The restart zeroes the evidence in INFO; the log keeps it, and nothing wrote to the run.
        await restart();
        expect(await recoverOnB()).toBeInstanceOf(FailoverNeedsDecision);
        expect(ran).toEqual(['reserve']);
      });
    }, 30_000);
  },
);
