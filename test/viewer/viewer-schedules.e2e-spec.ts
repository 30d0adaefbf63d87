/**
 * The viewer's schedules (memory store, schedules declared by a core FlowRunner, no takeover): its
 * API lists every stored one with its next tick, and pauses and resumes one only from the viewer's
 * own page (CSRF token, same origin, JSON body, the application's guard); a refused request, an
 * unknown name or one no schedule can have changes nothing. A record that does not verify is listed
 * as corrupt, never acted on. In Chromium, the Schedules tab lists them, shows script-looking
 * values a record holds as text, and Pause flips one's state.
 */
import {
  Injectable,
  type CanActivate,
  type ExecutionContext,
  type INestApplication,
} from '@nestjs/common';
import {
  Executor,
  Flow,
  FlowRunner,
  KeyRing,
  MemoryCheckpointStore,
  ToolRegistry,
  type CheckpointStore,
  type ScheduleInfo,
} from 'agent-adapter';
import {
  writeRecord,
  type ScheduleOverlap,
} from 'agent-adapter/flow/schedules/schedule-record';
import type { Browser, Page } from 'playwright-core';
import request from 'supertest';
import { KEY, Ledger } from '../nest/fixtures/tickets.fixtures';
import { CaptureLogger } from '../nest/utils';
import {
  describeInChromium,
  launchChromium,
  viewerApp,
} from './viewer.fixtures';

const PATH = '/ops/runs';
/** Each variant sets window.__xss if it ever runs. */
const P =
  'x"><img src=x onerror=window.__xss=1><script>window.__xss=2</script>' +
  "<svg onload=window.__xss=3>'><a href=javascript:window.__xss=4>";

/** A flow the schedules start (nothing fires them here: no takeover). */
const report = new Flow<{ note?: string }>('report')
  .node('run', async () => ({ note: 'ran' }))
  .end('run');

/** The next 03:00 UTC after now. */
function nextThreeUtc(): number {
  const d = new Date();
  d.setUTCHours(3, 0, 0, 0);
  if (d.getTime() <= Date.now()) d.setUTCDate(d.getUTCDate() + 1);
  return d.getTime();
}

/**
 * A memory store with two schedules, declared by a core runner with the viewer's key: `report`
 * (daily 03:00 UTC, defaults) and `weekly.digest` (Mondays 09:30 in Berlin, queue, no catch-up).
 */
async function scheduledStore(): Promise<{
  store: CheckpointStore;
  core: FlowRunner;
}> {
  const store = new MemoryCheckpointStore();
  const core = new FlowRunner(new Executor(new ToolRegistry()), {
    checkpoints: store,
    checkpointKey: KEY,
    workerId: 'declarer',
  });
  await core.schedule(report, '0 3 * * *');
  await core.schedule(report, '30 9 * * 1', {
    name: 'weekly.digest',
    timezone: 'Europe/Berlin',
    overlap: 'queue',
    catchUp: 'none',
  });
  return { store, core };
}

/** Lets a request in with the header `x-operator: yes`. */
@Injectable()
class OperatorGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const req = context
      .switchToHttp()
      .getRequest<{ headers: Record<string, string> }>();
    return req.headers['x-operator'] === 'yes';
  }
}

describe('run viewer API: schedules', () => {
  let app: INestApplication;
  let store: CheckpointStore;
  let core: FlowRunner;
  const logger = new CaptureLogger();
  beforeEach(async () => {
    ({ store, core } = await scheduledStore());
    ({ app } = await viewerApp(store, new Ledger(), [], { logger }));
  });
  afterEach(async () => {
    core?.close();
    await app?.close();
  });

  const server = () => app.getHttpServer();
  const listed = async (): Promise<ScheduleInfo[]> =>
    (await request(server()).get(`${PATH}/api/schedules`).expect(200)).body
      .schedules;
  /** The page's token and the cookie it set, as the page's own script sends them. */
  async function session(): Promise<Record<string, string>> {
    const res = await request(server()).get(PATH).expect(200);
    const token = /<meta name="agent-adapter-csrf" content="([^"]+)">/.exec(
      res.text,
    )![1]!;
    const cookie = ([] as string[])
      .concat(res.headers['set-cookie'] ?? [])[0]!
      .split(';')[0]!;
    return { cookie, 'x-agent-adapter-csrf': token };
  }

  it('lists every stored schedule with its next tick, as the scheduler does', async () => {
    const schedules = await listed();
    expect(schedules).toEqual(await core.schedules.list());
    expect(schedules).toEqual([
      {
        name: 'report',
        flow: 'report',
        expression: '0 3 * * *',
        overlap: 'skip',
        catchUp: 'last',
        paused: false,
        nextAt: nextThreeUtc(),
        since: expect.any(Number),
      },
      {
        name: 'weekly.digest',
        flow: 'report',
        expression: '30 9 * * 1',
        timezone: 'Europe/Berlin',
        overlap: 'queue',
        catchUp: 'none',
        paused: false,
        nextAt: expect.any(Number),
        since: expect.any(Number),
      },
    ]);
    const berlin = new Date(schedules[1]!.nextAt!);
    expect(
      new Intl.DateTimeFormat('en-GB', {
        timeZone: 'Europe/Berlin',
        weekday: 'short',
        hour: '2-digit',
        minute: '2-digit',
      }).format(berlin),
    ).toBe('Mon 09:30');
  });

  it('pauses and resumes a schedule from the page (JSON, its token), logged with who did it', async () => {
    const headers = await session();
    const paused = await request(server())
      .post(`${PATH}/api/schedules/report/pause`)
      .set(headers)
      .send({ by: 'ada' })
      .expect(201);
    expect(paused.body).toMatchObject({ name: 'report', paused: true });
    expect(paused.body.nextAt).toBeUndefined();
    const [report, weekly] = await listed();
    expect(report).toMatchObject({ name: 'report', paused: true });
    expect(report!.nextAt).toBeUndefined();
    expect(weekly).toMatchObject({ name: 'weekly.digest', paused: false });
    expect((await core.schedules.list())[0]!.paused).toBe(true);
    expect(
      logger.lines.map((l) => l.message).filter((m) => /^Schedule/.test(m)),
    ).toEqual(['Schedule "report": paused in the viewer by ada.']);

    const resumed = await request(server())
      .post(`${PATH}/api/schedules/report/resume`)
      .set(headers)
      .send({})
      .expect(201);
    expect(resumed.body).toMatchObject({
      paused: false,
      nextAt: nextThreeUtc(),
    });
    expect((await listed())[0]).toMatchObject({
      paused: false,
      nextAt: nextThreeUtc(),
    });
  });

  it('refuses a cross-site, token-less or non-JSON post with a 403 naming the problem; nothing changes', async () => {
    const before = await listed();
    const headers = await session();
    const cases: Array<[string, Record<string, string>, RegExp]> = [
      ['no token, no cookie', {}, /no x-agent-adapter-csrf header/],
      [
        'no cookie',
        { 'x-agent-adapter-csrf': headers['x-agent-adapter-csrf']! },
        /no agent_adapter_csrf cookie/,
      ],
      [
        'another origin',
        { ...headers, origin: 'http://127.0.0.1:1' },
        /Origin "http:\/\/127\.0\.0\.1:1" is not this viewer's origin/,
      ],
      [
        'same site, not same origin',
        { ...headers, 'sec-fetch-site': 'same-site' },
        /Sec-Fetch-Site is "same-site"/,
      ],
    ];
    for (const to of ['pause', 'resume'])
      for (const [what, set, message] of cases) {
        const res = await request(server())
          .post(`${PATH}/api/schedules/report/${to}`)
          .set(set)
          .send({});
        expect([to, what, res.status]).toEqual([to, what, 403]);
        expect(res.body.message).toMatch(message);
        expect(res.body.message).toMatch(/nothing was run/);
      }
    // A form's body (text/plain), and a JSON post without a body.
    const plain = await request(server())
      .post(`${PATH}/api/schedules/report/pause`)
      .set({ ...headers, 'content-type': 'text/plain' })
      .send('{}')
      .expect(403);
    expect(plain.body.message).toMatch(/content-type is "text\/plain"/);
    const empty = await request(server())
      .post(`${PATH}/api/schedules/report/pause`)
      .set({ ...headers, 'content-type': 'application/json' })
      .expect(400);
    expect(empty.body.message).toMatch(/pause takes a JSON object body/);
    expect(await listed()).toEqual(before);
  });

  it('an unknown name is a 404 naming it, a name no schedule can have a 400 naming it; nothing changes', async () => {
    const before = await listed();
    const headers = await session();
    const unknown = await request(server())
      .post(`${PATH}/api/schedules/nightly/pause`)
      .set(headers)
      .send({})
      .expect(404);
    expect(unknown.body.message).toMatch(/No schedule "nightly" is stored/);
    for (const bad of ['a b', 'x'.repeat(101), 'a%2Fb', 'r%C3%A9port']) {
      const res = await request(server())
        .post(`${PATH}/api/schedules/${bad}/resume`)
        .set(headers)
        .send({});
      expect([bad, res.status]).toEqual([bad, 400]);
      expect(res.body.message).toMatch(/^No schedule can be named "/);
      expect(res.body.message).toMatch(/nothing was changed/);
    }
    expect(await listed()).toEqual(before);
  });

  it('lists a record that does not verify as corrupt, and acts on nothing of it', async () => {
    const alien = new FlowRunner(new Executor(new ToolRegistry()), {
      checkpoints: store,
      checkpointKey: 'another-secret-from-another-vault',
      workerId: 'alien',
    });
    await alien.schedule(report, '0 4 * * *', { name: 'alien' });
    alien.close();
    const schedules = await listed();
    expect(schedules.map((s) => s.name)).toEqual([
      'alien',
      'report',
      'weekly.digest',
    ]);
    expect(schedules[0]).toEqual({
      name: 'alien',
      corrupt: expect.any(String),
    });
    const refused = await request(server())
      .post(`${PATH}/api/schedules/alien/pause`)
      .set(await session())
      .send({});
    // The store's own refusal, as for a run whose rows do not verify.
    expect([refused.status, refused.body.error]).toEqual([
      500,
      'CheckpointStoreCorrupt',
    ]);
    expect(refused.body.message).toMatch(/Run "schedule:alien"/);
    expect(await listed()).toEqual(schedules);
  });
});

describe('run viewer API: schedules behind the application guard', () => {
  let app: INestApplication;
  let core: FlowRunner;
  afterEach(async () => {
    core?.close();
    await app?.close();
  });

  it('a request the guard refuses gets 403 for the list and both actions; nothing changes', async () => {
    let store: CheckpointStore;
    ({ store, core } = await scheduledStore());
    ({ app } = await viewerApp(store, new Ledger(), [], {
      viewer: { path: PATH, guard: OperatorGuard },
    }));
    const server = app.getHttpServer();
    await request(server).get(`${PATH}/api/schedules`).expect(403);
    const page = await request(server)
      .get(PATH)
      .set('x-operator', 'yes')
      .expect(200);
    const token = /name="agent-adapter-csrf" content="([^"]+)"/.exec(
      page.text,
    )![1]!;
    for (const to of ['pause', 'resume']) {
      const refused = await request(server)
        .post(`${PATH}/api/schedules/report/${to}`)
        .set({
          cookie: `agent_adapter_csrf=${token}`,
          'x-agent-adapter-csrf': token,
        })
        .send({})
        .expect(403);
      expect(refused.body.message).toBe('Forbidden resource');
    }
    const allowed = await request(server)
      .get(`${PATH}/api/schedules`)
      .set('x-operator', 'yes')
      .expect(200);
    expect(
      allowed.body.schedules.map((s: ScheduleInfo) => [s.name, s.paused]),
    ).toEqual([
      ['report', false],
      ['weekly.digest', false],
    ]);
  });
});

describeInChromium('run viewer: schedules (Chromium)', () => {
  let app: INestApplication;
  let core: FlowRunner;
  let url: string;
  let browser: Browser;
  let page: Page;

  beforeAll(async () => {
    let store: CheckpointStore;
    ({ store, core } = await scheduledStore());
    // Script-looking values where the store holds text, sealed with the key (like a store that
    // was written by something other than runner.schedule): the page shows them as text.
    await writeRecord(
      store,
      KeyRing.from(KEY),
      undefined,
      {
        name: 'hostile',
        flow: P,
        expression: P,
        timezone: P,
        overlap: P as ScheduleOverlap,
        catchUp: 'none',
        since: Date.now(),
      },
      Date.now() + 3_600_000,
    );
    ({ app, url } = await viewerApp(store, new Ledger(), []));
    browser = await launchChromium();
    const context = await browser.newContext({ timezoneId: 'UTC' });
    page = await context.newPage();
  });
  afterAll(async () => {
    await browser?.close();
    core?.close();
    await app?.close();
  });

  const cells = (name: string) =>
    page.locator(`tr[data-schedule="${name}"] td`).allInnerTexts();
  const state = (name: string) =>
    page
      .locator(`tr[data-schedule="${name}"] [data-badge]`)
      .getAttribute('data-badge');

  it('the Schedules tab lists each schedule with its cron, zone, policies, state and next tick', async () => {
    await page.goto(url);
    await page.waitForSelector('#runs');
    await page.click('#nav-schedules');
    await page.waitForSelector('tr[data-schedule="report"]');
    expect(await page.locator('#nav-schedules').getAttribute('class')).toBe(
      'current',
    );
    const next = new Date(nextThreeUtc()).toISOString();
    expect(await cells('report')).toEqual([
      'report',
      'report',
      '0 3 * * *',
      'UTC',
      'skip',
      'last',
      'active',
      `${next.slice(0, 10)} 03:00:00 UTC\n${next}`,
      'Pause…',
    ]);
    expect((await cells('weekly.digest')).slice(0, 7)).toEqual([
      'weekly.digest',
      'report',
      '30 9 * * 1',
      'Europe/Berlin',
      'queue',
      'none',
      'active',
    ]);
  });

  it('shows what a record holds as text: no script runs, no element is injected (CSP off)', async () => {
    const context = await browser.newContext({ bypassCSP: true });
    const raw = await context.newPage();
    await raw.goto(`${url}#/schedules`);
    await raw.waitForSelector('tr[data-schedule="hostile"]');
    const cells = await raw
      .locator('tr[data-schedule="hostile"] td')
      .allInnerTexts();
    expect(cells.slice(0, 5)).toEqual(['hostile', P, P, P, P]);
    expect(
      await raw.evaluate(() => ({
        xss: (globalThis as { __xss?: unknown }).__xss,
        injected: (
          globalThis as unknown as {
            document: { querySelectorAll(s: string): { length: number } };
          }
        ).document.querySelectorAll(
          '#schedules img, #schedules svg, #schedules script, #schedules a',
        ).length,
      })),
    ).toEqual({ xss: undefined, injected: 0 });
    await context.close();
  });

  it('Pause asks, then the schedule is paused (its state flips, no next tick); Resume brings it back', async () => {
    await page.goto(`${url}#/schedules`);
    await page.waitForSelector('tr[data-schedule="report"]');
    const asked: string[] = [];
    page.on('dialog', (d) => {
      asked.push(d.message());
      void d.accept();
    });
    await page.click('button[data-schedule="report"]');
    // At once (the page renders again after the action), not at the next 5 s refresh.
    await page.waitForSelector(
      'tr[data-schedule="report"] [data-badge="paused"]',
      { timeout: 2_500 },
    );
    expect(asked).toEqual([
      'Pause schedule report? No worker fires it until it is resumed; its runs in flight go on.',
    ]);
    expect((await cells('report')).slice(6)).toEqual([
      'paused',
      'none while paused',
      'Resume…',
    ]);
    expect(await state('weekly.digest')).toBe('active');
    const stored = await core.schedules.list();
    expect(stored.map((s) => [s.name, s.paused])).toEqual([
      ['hostile', false],
      ['report', true],
      ['weekly.digest', false],
    ]);

    await page.click('button[data-schedule="report"]');
    // At once (the page renders again after the action), not at the next 5 s refresh.
    await page.waitForSelector(
      'tr[data-schedule="report"] [data-badge="active"]',
      { timeout: 2_500 },
    );
    expect((await core.schedules.list())[1]).toMatchObject({
      paused: false,
      nextAt: nextThreeUtc(),
    });
  });
});
