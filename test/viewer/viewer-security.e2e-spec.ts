/**
 * The viewer's own protections, over real HTTP (issue 16, item 8): security headers on every
 * response, the `Host` allow-list, and the warning about a viewer without a guard.
 */
import { createHash } from 'node:crypto';
import type { INestApplication } from '@nestjs/common';
import request from 'supertest';
import {
  DurableModule,
  DurableSetupError,
  FlowRunner,
  type DurableViewerOptions,
} from 'agent-adapter/nest';
import { KEY, Ledger, TicketsModule } from '../nest/fixtures/tickets.fixtures';
import { Apps, CaptureLogger } from '../nest/utils';
import { RefundModule } from './viewer.fixtures';

const PATH = '/ops/runs';

describe('run viewer protections', () => {
  const apps = new Apps();
  afterEach(() => apps.closeAll());

  let refunds: string[] = [];
  async function boot(
    viewer: DurableViewerOptions = { path: PATH, privateNetwork: true },
    options: { key?: string; logger?: CaptureLogger; prefix?: string } = {},
  ): Promise<{
    app: INestApplication;
    server: ReturnType<INestApplication['getHttpServer']>;
  }> {
    refunds = [];
    const app = await apps.boot(
      [
        DurableModule.forRoot({
          store: { type: 'memory' },
          key: options.key ?? KEY,
          viewer,
        }),
        TicketsModule.with(new Ledger()),
        RefundModule.with(refunds),
      ],
      {
        ...(options.logger && { logger: options.logger }),
        ...(options.prefix && {
          beforeInit: (a: INestApplication) =>
            a.setGlobalPrefix(options.prefix!),
        }),
      },
    );
    return { app, server: app.getHttpServer() };
  }

  /** A paused refund waiting for its approval. */
  async function pausedRefund(app: INestApplication, runId = 'refund-1') {
    const r = await app
      .get(FlowRunner)
      .start('refund', { order: runId }, { runId });
    expect(r.status).toBe('paused');
    return runId;
  }

  it('sends strict security headers with the page and the API; the CSP allows exactly the page script', async () => {
    const { app, server } = await boot();
    const runId = await pausedRefund(app);
    const page = await request(server).get(PATH).expect(200);
    const csp = String(page.headers['content-security-policy']);
    for (const directive of [
      "default-src 'none'",
      "connect-src 'self'",
      "frame-ancestors 'none'",
      "base-uri 'none'",
      "form-action 'none'",
      "require-trusted-types-for 'script'",
    ])
      expect(csp).toContain(directive);
    expect(csp).not.toMatch(/unsafe-inline|unsafe-eval|\*/);
    const script = /<script>([\s\S]*)<\/script>/.exec(page.text)![1]!;
    const style = /<style>([\s\S]*)<\/style>/.exec(page.text)![1]!;
    const sha = (t: string) => createHash('sha256').update(t).digest('base64');
    expect(csp).toContain(`script-src 'sha256-${sha(script)}'`);
    expect(csp).toContain(`style-src 'sha256-${sha(style)}'`);

    const responses = [
      page,
      await request(server).get(`${PATH}/api/meta`).expect(200),
      await request(server).get(`${PATH}/api/runs`).expect(200),
      await request(server).get(`${PATH}/api/runs/${runId}`).expect(200),
      await request(server).get(`${PATH}/api/runs/nope`).expect(404),
      await request(server).get(PATH).set('host', 'evil.example').expect(421),
    ];
    for (const res of responses) {
      expect(res.headers['content-security-policy']).toMatch(
        /^default-src 'none';.*frame-ancestors 'none'/,
      );
      expect(res.headers['x-frame-options']).toBe('DENY');
      expect(res.headers['x-content-type-options']).toBe('nosniff');
      expect(res.headers['referrer-policy']).toBe('no-referrer');
      expect(res.headers['cache-control']).toBe('no-store');
    }
    expect(refunds).toEqual([]);
  });

  it('answers only for loopback hosts by default: another Host gets 421 naming viewer.hosts', async () => {
    const { app, server } = await boot();
    const runId = await pausedRefund(app);
    for (const host of [
      'localhost',
      'localhost:3000',
      '127.0.0.1:8080',
      '[::1]:3000',
      'LOCALHOST',
    ])
      await request(server)
        .get(`${PATH}/api/runs`)
        .set('host', host)
        .expect(200);
    for (const host of [
      'evil.example',
      'localhost.evil.example',
      '127.0.0.2',
      'attacker.test:3000',
      'a@localhost',
      '',
    ]) {
      const res = await request(server).get(PATH).set('host', host).expect(421);
      expect(res.body.message).toMatch(
        /does not answer for Host .*viewer: \{ hosts/,
      );
      expect(res.headers['set-cookie']).toBeUndefined();
    }
    await request(server)
      .post(`${PATH}/api/runs/${runId}/approve`)
      .set({ host: 'rebind.evil.example' })
      .send({})
      .expect(421);
    expect(refunds).toEqual([]);
  });

  it('viewer.hosts replaces the default: names with any port, or one port', async () => {
    const { server } = await boot({
      path: PATH,
      privateNetwork: true,
      hosts: ['runs.example.com', 'ops.example.com:8443'],
    });
    for (const [host, status] of [
      ['runs.example.com', 200],
      ['Runs.Example.com:3000', 200],
      ['ops.example.com:8443', 200],
      ['ops.example.com', 421],
      ['ops.example.com:443', 421],
      ['localhost', 421],
      ['127.0.0.1', 421],
    ] as const)
      await request(server)
        .get(`${PATH}/api/runs`)
        .set('host', host)
        .expect(status);
  });

  it('refuses hosts that are not host names at forRoot', () => {
    for (const hosts of [
      [],
      ['http://runs.example.com'],
      ['runs.example.com/x'],
      ['*'],
      [42],
    ]) {
      expect(() =>
        DurableModule.forRoot({
          store: { type: 'memory' },
          viewer: { hosts: hosts as string[], privateNetwork: true },
        }),
      ).toThrow(DurableSetupError);
    }
    expect(() =>
      DurableModule.forRoot({
        store: { type: 'memory' },
        viewer: { hosts: ['nope nope'], privateNetwork: true },
      }),
    ).toThrow(/viewer\.hosts/);
  });

  it('warns once at bootstrap about a viewer without a guard (outside production), naming its path', async () => {
    const warned = new CaptureLogger();
    await boot({ path: '/ops/runs' }, { logger: warned });
    expect(warned.of('DurableViewer')).toEqual([
      expect.stringMatching(
        /^warn: The run viewer at "\/ops\/runs" has no guard: .*viewer\.guard.*viewer\.privateNetwork: true/,
      ),
    ]);
    const quiet = new CaptureLogger();
    await boot({ path: '/ops/runs', privateNetwork: true }, { logger: quiet });
    await boot(
      { path: '/ops/runs', guard: { canActivate: () => true } },
      { logger: quiet },
    );
    expect(quiet.of('DurableViewer')).toEqual([]);
  });
});
