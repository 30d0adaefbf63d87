/**
 * The viewer's own protections, over real HTTP (issue 16, items 1 and 8): security headers on every
 * response, the `Host` allow-list, the CSRF rules for actions (token, Origin, Sec-Fetch-Site, JSON),
 * and the warning about a viewer without a guard. The browser's side is in viewer-csrf.e2e-spec.ts.
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
const OTHER_KEY = 'another-secret-from-another-vault';

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

  /** What the page gives a browser: its token (in a meta tag) and the cookie with it. */
  async function pageSession(server: unknown, path = PATH) {
    const res = await request(server as never)
      .get(path)
      .expect(200);
    const token = /<meta name="agent-adapter-csrf" content="([^"]+)">/.exec(
      res.text,
    )![1]!;
    const setCookie = ([] as string[]).concat(res.headers['set-cookie'] ?? []);
    return {
      token,
      setCookie,
      cookie: setCookie[0]!.split(';')[0]!,
      html: res.text,
    };
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
      await request(server)
        .post(`${PATH}/api/runs/${runId}/approve`)
        .send({})
        .expect(403),
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

  it('sets the token in an HttpOnly, SameSite=Strict cookie for its path (global prefix included), fresh per page', async () => {
    const { server } = await boot(undefined, { prefix: 'api' });
    const one = await pageSession(server, `/api${PATH}`);
    const two = await pageSession(server, `/api${PATH}/`);
    expect(one.setCookie).toEqual([
      `agent_adapter_csrf=${one.token}; Path=/api${PATH}; HttpOnly; SameSite=Strict`,
    ]);
    expect(one.token).toMatch(/^v1\.[\w-]{22}\.[\w-]{43}$/);
    expect(two.token).not.toBe(one.token);
    expect(two.setCookie[0]).toContain(`Path=/api${PATH};`);
  });

  it('an action from the page (same origin, JSON, its token) runs; tokens of other workers with the same key are accepted', async () => {
    const { app, server } = await boot();
    const runId = await pausedRefund(app);
    const { token, cookie } = await pageSession(server);
    const ok = await request(server)
      .post(`${PATH}/api/runs/${runId}/approve`)
      .set('cookie', cookie)
      .set('x-agent-adapter-csrf', token)
      .set('host', 'localhost:3000')
      .set('origin', 'http://localhost:3000')
      .set('sec-fetch-site', 'same-origin')
      .send({ by: 'ana' })
      .expect(201);
    expect(ok.body).toEqual({ status: 'done' });
    expect(refunds).toEqual([runId]);

    // Another worker (same key): accepted. A worker with another key: refused.
    const same = await boot();
    const other = await boot(undefined, { key: OTHER_KEY });
    for (const [target, status] of [
      [same, 201],
      [other, 403],
    ] as const) {
      const id = await pausedRefund(target.app, `refund-${status}`);
      await request(target.server)
        .post(`${PATH}/api/runs/${id}/deny`)
        .set('cookie', cookie)
        .set('x-agent-adapter-csrf', token)
        .send({ reason: 'duplicate' })
        .expect(status);
    }
  });

  it('refuses an action with a 403 naming each thing wrong, and runs nothing', async () => {
    const { app, server } = await boot();
    const runId = await pausedRefund(app);
    const { token, cookie } = await pageSession(server);
    const forged = `v1.${'A'.repeat(22)}.${'B'.repeat(43)}`;
    const cases: Array<[string, Record<string, string>, RegExp]> = [
      ['no token', { cookie }, /no x-agent-adapter-csrf header/],
      [
        'no cookie',
        { 'x-agent-adapter-csrf': token },
        /no agent_adapter_csrf cookie/,
      ],
      [
        'header and cookie differ',
        {
          cookie,
          'x-agent-adapter-csrf':
            token.slice(0, -1) + (token.endsWith('A') ? 'B' : 'A'),
        },
        /does not match the agent_adapter_csrf cookie/,
      ],
      [
        'a token this viewer did not sign',
        {
          cookie: `agent_adapter_csrf=${forged}`,
          'x-agent-adapter-csrf': forged,
        },
        /not one this viewer issued/,
      ],
      [
        'another origin',
        { cookie, 'x-agent-adapter-csrf': token, origin: 'http://127.0.0.1:1' },
        /Origin "http:\/\/127\.0\.0\.1:1" is not this viewer's origin/,
      ],
      [
        'an opaque origin',
        { cookie, 'x-agent-adapter-csrf': token, origin: 'null' },
        /Origin "null"/,
      ],
      [
        'another scheme',
        {
          cookie,
          'x-agent-adapter-csrf': token,
          host: 'localhost:3000',
          origin: 'https://localhost:3000',
        },
        /trust proxy/,
      ],
      [
        'same site, not same origin',
        {
          cookie,
          'x-agent-adapter-csrf': token,
          'sec-fetch-site': 'same-site',
        },
        /Sec-Fetch-Site is "same-site", not "same-origin"/,
      ],
    ];
    for (const [what, headers, message] of cases) {
      const res = await request(server)
        .post(`${PATH}/api/runs/${runId}/approve`)
        .set(headers)
        .send({});
      expect([what, res.status]).toEqual([what, 403]);
      expect(res.body.message).toMatch(message);
      expect(res.body.message).toMatch(/nothing was run/);
    }
    for (const type of [
      'text/plain',
      'application/x-www-form-urlencoded',
      'multipart/form-data; boundary=x',
    ]) {
      const res = await request(server)
        .post(`${PATH}/api/runs/${runId}/approve`)
        .set({ cookie, 'x-agent-adapter-csrf': token, 'content-type': type })
        .send('{}')
        .expect(403);
      expect(res.body.problems).toEqual([
        `content-type is ${JSON.stringify(type)}, not "application/json"`,
      ]);
    }
    // All at once: every problem is named.
    const all = await request(server)
      .post(`${PATH}/api/runs/${runId}/rerun-in-doubt`)
      .set({
        'content-type': 'text/plain',
        origin: 'http://evil.example',
        'sec-fetch-site': 'cross-site',
      })
      .send('{}')
      .expect(403);
    expect(all.body.problems).toHaveLength(4);
    expect(refunds).toEqual([]);
    expect(
      (await request(server).get(`${PATH}/api/runs/${runId}`)).body.status,
    ).toBe('paused');
  });

  it('every action needs a JSON object body, rerun-in-doubt and resolve too', async () => {
    const { app, server } = await boot();
    const runId = await pausedRefund(app);
    const { token, cookie } = await pageSession(server);
    for (const action of ['approve', 'deny', 'rerun-in-doubt', 'resolve']) {
      // ('"yes"' is refused by the JSON parser itself, also with a 400.)
      for (const body of [undefined, '', '[]', '"yes"']) {
        const req = request(server)
          .post(`${PATH}/api/runs/${runId}/${action}`)
          .set({
            cookie,
            'x-agent-adapter-csrf': token,
            'content-type': 'application/json',
          });
        const res = await (body === undefined ? req : req.send(body)).expect(
          400,
        );
        if (body !== '"yes"')
          expect(res.body.message).toMatch(
            `${action} takes a JSON object body`,
          );
      }
    }
    expect(refunds).toEqual([]);
  });

  it('answers only for loopback hosts by default: another Host gets 421 naming viewer.hosts', async () => {
    const { app, server } = await boot();
    const runId = await pausedRefund(app);
    const { token, cookie } = await pageSession(server);
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
      .set({
        cookie,
        'x-agent-adapter-csrf': token,
        host: 'rebind.evil.example',
      })
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
