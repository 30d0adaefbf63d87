/**
 * The store's health indicator under @nestjs/terminus: 200 while the store answers, 503 naming the
 * store and the reason once it does not (here: a real Redis server the suite starts and stops).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import { Controller, Get } from '@nestjs/common';
import {
  HealthCheck,
  HealthCheckService,
  TerminusModule,
} from '@nestjs/terminus';
import request from 'supertest';
import { DurableHealthIndicator, DurableModule } from 'agent-adapter/nest';
import { Apps } from './utils';

const KEY = 'a-health-check-key-of-32-bytes!!';

@Controller('health')
class HealthController {
  constructor(
    private readonly health: HealthCheckService,
    private readonly durable: DurableHealthIndicator,
  ) {}

  @Get()
  @HealthCheck()
  check() {
    return this.health.check([
      () => this.durable.isHealthy('runs', { timeoutMs: 500 }),
    ]);
  }
}

const freePort = () =>
  new Promise<number>((resolve) => {
    const srv = createServer().listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as { port: number };
      srv.close(() => resolve(port));
    });
  });

describe('DurableHealthIndicator with @nestjs/terminus', () => {
  const apps = new Apps();
  let redis: ChildProcess | undefined;
  afterEach(async () => {
    await apps.closeAll();
    redis?.kill('SIGKILL');
  });

  it('memory store: up, with the store and its latency', async () => {
    const app = await apps.boot(
      [TerminusModule, DurableModule.forRoot({ store: { type: 'memory' } })],
      { controllers: [HealthController] },
    );
    const res = await request(app.getHttpServer()).get('/health').expect(200);
    expect(res.body).toMatchObject({
      status: 'ok',
      info: {
        runs: {
          status: 'up',
          store: 'MemoryCheckpointStore',
          latencyMs: expect.any(Number),
        },
      },
    });
  });

  it('Redis store: up while the server answers, a 503 naming the reason once it is gone, and the app still closes promptly', async () => {
    const port = await freePort();
    redis = spawn(
      'redis-server',
      [
        '--port',
        String(port),
        '--bind',
        '127.0.0.1',
        '--save',
        '',
        '--appendonly',
        'no',
      ],
      {
        stdio: 'ignore',
      },
    );
    await new Promise((r) => setTimeout(r, 300));
    const app = await apps.boot(
      [
        TerminusModule,
        DurableModule.forRoot({
          store: {
            type: 'redis',
            url: `redis://127.0.0.1:${port}`,
            prefix: 'health',
          },
          key: KEY,
          // Looks often, so one is waiting on the dead server when the app closes.
          takeover: { everyMs: 100 },
          drainMs: 1000,
        }),
      ],
      { controllers: [HealthController] },
    );
    const server = app.getHttpServer();
    await request(server).get('/health').expect(200);
    redis.kill('SIGKILL');
    await new Promise((r) => setTimeout(r, 200));
    const down = await request(server).get('/health').expect(503);
    expect(down.body).toMatchObject({
      status: 'error',
      error: {
        runs: {
          status: 'down',
          store: 'RedisCheckpointStore',
          message: expect.any(String),
        },
      },
    });
    // A look in progress waits on ioredis's reconnect retries (over a minute with its defaults):
    // the shutdown waits for it at most `drainMs`, then the store drops the connection.
    await new Promise((r) => setTimeout(r, 300));
    const closing = Date.now();
    await apps.closeAll();
    expect(Date.now() - closing).toBeLessThan(5000);
  });
});
