/**
 * A real Redis Cluster for e2e suites: `masters` primaries with `replicas` replicas each, every node
 * a `redis-server --cluster-enabled yes` process on a free loopback port with its data in a temp
 * dir, joined by `redis-cli --cluster create`. Stopped by PID; nothing outlives the suite.
 */
import {
  execFile,
  execFileSync,
  spawn,
  type ChildProcess,
} from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Cluster, Redis } from 'ioredis';

const run = promisify(execFile);

export interface RedisClusterNode {
  port: number;
  process: ChildProcess;
}

export interface LocalRedisCluster {
  nodes: RedisClusterNode[];
  /** `{ host, port }` of every node, for `new Cluster(startupNodes)`. */
  startupNodes: Array<{ host: string; port: number }>;
  /** A client of the cluster (the caller quits it). */
  connect(): Cluster;
  /** The ports of the nodes that are masters now. */
  masters(): Promise<number[]>;
  /** SIGKILLs one node's process (a failover follows when it was a master with a replica). */
  kill(port: number): Promise<void>;
  /** `CLUSTER NODES` as a live node sees it (for a failure's message). */
  describe(): Promise<string>;
  /** Waits until every live node reports `cluster_state:ok` and every slot has a master. */
  healthy(timeoutMs?: number): Promise<void>;
  stop(): Promise<void>;
}

/** A port that is free, with its cluster bus port (port + 10000) free too. */
async function freePort(taken: Set<number>): Promise<number> {
  for (;;) {
    const port = 20_000 + Math.floor(Math.random() * 30_000);
    if (taken.has(port) || taken.has(port + 10_000)) continue;
    if ((await isFree(port)) && (await isFree(port + 10_000))) {
      taken.add(port).add(port + 10_000);
      return port;
    }
  }
}

function isFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

/** SIGKILLs a node's process (unless it has exited) and resolves once it has. */
function killed(node: RedisClusterNode): Promise<void> {
  return new Promise<void>((resolve) => {
    if (node.process.exitCode !== null || node.process.signalCode !== null)
      return resolve();
    node.process.once('exit', () => resolve());
    node.process.kill('SIGKILL');
  });
}

async function ping(port: number, timeoutMs: number): Promise<void> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const client = new Redis({
      port,
      host: '127.0.0.1',
      lazyConnect: true,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
    });
    try {
      await client.connect();
      await client.ping();
      client.disconnect();
      return;
    } catch (error) {
      client.disconnect();
      if (Date.now() > until)
        throw new Error(
          `redis-server on ${port} did not answer: ${String(error)}`,
        );
      await new Promise((r) => setTimeout(r, 50));
    }
  }
}

export async function startRedisCluster(
  options: { masters?: number; replicas?: number } = {},
): Promise<LocalRedisCluster> {
  const masters = options.masters ?? 3;
  const replicas = options.replicas ?? 1;
  const dir = mkdtempSync(join(tmpdir(), 'aa-redis-cluster-'));
  const taken = new Set<number>();
  const nodes: RedisClusterNode[] = [];
  const stop = async () => {
    await Promise.all(nodes.map(killed));
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    for (let i = 0; i < masters * (1 + replicas); i++) {
      const port = await freePort(taken);
      const child = spawn(
        'redis-server',
        [
          '--port',
          String(port),
          '--bind',
          '127.0.0.1',
          '--cluster-enabled',
          'yes',
          '--cluster-config-file',
          join(dir, `nodes-${port}.conf`),
          '--cluster-node-timeout',
          '1500',
          // A replica syncs at once (not after the default 5 s wait for more replicas): one that
          // never synced refuses to take over its master's slots.
          '--repl-diskless-sync-delay',
          '0',
          '--dir',
          dir,
          '--dbfilename',
          `dump-${port}.rdb`,
          '--save',
          '',
          '--appendonly',
          'no',
          '--daemonize',
          'no',
          '--loglevel',
          'warning',
        ],
        { stdio: 'ignore' },
      );
      nodes.push({ port, process: child });
    }
    await Promise.all(nodes.map((n) => ping(n.port, 10_000)));
    // `--cluster create` wants three masters at least: one node takes every slot itself.
    const create =
      nodes.length === 1
        ? [
            '-p',
            String(nodes[0]!.port),
            'CLUSTER',
            'ADDSLOTSRANGE',
            '0',
            '16383',
          ]
        : [
            '--cluster',
            'create',
            ...nodes.map((n) => `127.0.0.1:${n.port}`),
            '--cluster-replicas',
            String(replicas),
            '--cluster-yes',
          ];
    await run('redis-cli', create, { timeout: 30_000 });
  } catch (error) {
    await stop();
    throw error;
  }

  const startupNodes = nodes.map((n) => ({ host: '127.0.0.1', port: n.port }));
  const alive = () =>
    nodes.filter(
      (n) => n.process.exitCode === null && n.process.signalCode === null,
    );
  const info = async (port: number, command: string[]) => {
    const client = new Redis({
      port,
      host: '127.0.0.1',
      maxRetriesPerRequest: 1,
    });
    try {
      return (await client.call(
        ...(command as [string, ...string[]]),
      )) as string;
    } finally {
      client.disconnect();
    }
  };
  const cluster: LocalRedisCluster = {
    nodes,
    startupNodes,
    connect: () =>
      new Cluster(startupNodes, {
        // A failover takes the cluster node timeout: keep retrying while a replica is promoted.
        clusterRetryStrategy: (times) => Math.min(100 * times, 1000),
        retryDelayOnFailover: 200,
        retryDelayOnClusterDown: 200,
      }),
    masters: async () => {
      const out: number[] = [];
      for (const n of alive()) {
        const role = await info(n.port, ['ROLE']).catch(() => undefined);
        if (Array.isArray(role) && role[0] === 'master') out.push(n.port);
      }
      return out;
    },
    describe: async () => {
      const [node] = alive();
      if (!node) return 'no node is alive';
      return info(node.port, ['CLUSTER', 'NODES']).catch((e: unknown) =>
        String(e),
      );
    },
    kill: async (port) => {
      const node = nodes.find((n) => n.port === port);
      if (!node) throw new Error(`no node on port ${port}`);
      await killed(node);
    },
    healthy: async (timeoutMs = 20_000) => {
      const until = Date.now() + timeoutMs;
      for (;;) {
        const states = await Promise.all(
          alive().map((n) =>
            info(n.port, ['CLUSTER', 'INFO']).catch((e: unknown) => String(e)),
          ),
        );
        // Every replica synced with its master: a failover can then promote it.
        const links = await Promise.all(
          alive().map((n) =>
            info(n.port, ['INFO', 'replication']).catch((e: unknown) =>
              String(e),
            ),
          ),
        );
        if (
          states.every(
            (s) =>
              /cluster_state:ok/.test(s) && /cluster_slots_ok:16384/.test(s),
          ) &&
          links.every(
            (l) => !/role:slave/.test(l) || /master_link_status:up/.test(l),
          )
        )
          return;
        if (Date.now() > until)
          throw new Error(`the cluster is not healthy: ${states.join(' | ')}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    },
    stop,
  };
  await cluster.healthy();
  return cluster;
}

/**
 * `describe` with a local Redis Cluster started in `beforeAll` (passed to the body through
 * `cluster()`) and stopped in `afterAll`. Without the redis binaries the suite skips loudly, or
 * under CI/REQUIRE_SERVICES fails naming what is missing.
 */
export function describeWithRedisCluster(
  title: string,
  body: (cluster: () => LocalRedisCluster) => void,
  options?: { masters?: number; replicas?: number },
): void {
  let missing: string | undefined;
  try {
    execFileSync('redis-server', ['--version'], { stdio: 'ignore' });
    execFileSync('redis-cli', ['--version'], { stdio: 'ignore' });
  } catch (error) {
    missing = `redis-server and redis-cli are needed (${(error as Error).message})`;
  }
  if (missing !== undefined) {
    if (process.env.CI || process.env.REQUIRE_SERVICES) {
      describe(title, () => {
        it('needs a Redis Cluster', () => {
          throw new Error(
            `${missing}; CI/REQUIRE_SERVICES is set, so this suite must run.`,
          );
        });
      });
    } else {
      console.warn(`\n!!! SKIPPING "${title}": ${missing}.\n`);
      describe.skip(title, () => body(() => undefined as never));
    }
    return;
  }
  describe(title, () => {
    let started: LocalRedisCluster | undefined;
    beforeAll(async () => {
      started = await startRedisCluster(options);
    }, 60_000);
    afterAll(async () => {
      await started?.stop();
    });
    body(() => {
      if (!started) throw new Error('the Redis Cluster did not start');
      return started;
    });
  });
}
