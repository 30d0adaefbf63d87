/**
 * The viewer on runs that wait for a time (memory store): its API filters by `sleeping` and gives a
 * sleeping run's sealed wake time, a paused run's approval deadline and `onTimeout`, and the
 * clock's decisions marked `timedOut`; in Chromium, the list filters by sleeping, a sleeping run
 * reads "sleeps until <time>", a paused run its deadline and what the clock does then, and a
 * timed-out decision is the clock's.
 */
import type { INestApplication } from '@nestjs/common';
import {
  MemoryCheckpointStore,
  type RecordedDecision,
  type RunStatus,
} from 'agent-adapter';
import type { Browser, Page } from 'playwright-core';
import request from 'supertest';
import { Ledger } from '../nest/fixtures/tickets.fixtures';
import { timeRuns } from '../utils/time-runs';
import {
  describeInChromium,
  launchChromium,
  viewerApp,
} from './viewer.fixtures';

const IDS = {
  sleeping: 'nap-1',
  deadline: 'ask-1',
  timedOut: 'ask-late',
  failed: 'ask-failed',
};

/** The viewer's application on a memory store holding the four runs (of flows it does not run). */
async function timeApp(): Promise<{ app: INestApplication; url: string }> {
  const store = new MemoryCheckpointStore();
  await timeRuns(store, IDS);
  return viewerApp(store, new Ledger(), []);
}

describe('run viewer API: runs that wait for a time', () => {
  let app: INestApplication;
  beforeAll(async () => {
    ({ app } = await timeApp());
  });
  afterAll(() => app?.close());
  const get = (path: string) =>
    request(app.getHttpServer()).get(`/ops/runs/api${path}`).expect(200);

  it('lists sleeping runs by status; the 400 for an unknown status names sleeping', async () => {
    const listed = await get('/runs?status=sleeping');
    expect(
      listed.body.runs.map((r: { runId: string; status: RunStatus }) => [
        r.runId,
        r.status,
      ]),
    ).toEqual([[IDS.sleeping, 'sleeping']]);
    const bad = await request(app.getHttpServer())
      .get('/ops/runs/api/runs?status=dozing')
      .expect(400);
    expect(bad.body.message).toMatch(/running, paused, sleeping, done, failed/);
  });

  it('a sleeping run has its sealed wake time; a paused one its deadline and onTimeout', async () => {
    const sleeping = (await get(`/runs/${IDS.sleeping}`)).body;
    expect(sleeping.status).toBe('sleeping');
    expect(sleeping.wakeAt).toBeGreaterThan(Date.now());
    expect(sleeping.pending).toBeUndefined();
    const paused = (await get(`/runs/${IDS.deadline}`)).body;
    expect(paused.status).toBe('paused');
    expect(paused.wakeAt).toBeUndefined();
    expect(paused.pending).toMatchObject({
      tool: 'refund',
      onTimeout: 'deny',
      deadline: expect.any(Number),
    });
  });

  it("the clock's decisions are marked timedOut: a denial, and the run it failed", async () => {
    const late = (await get(`/runs/${IDS.timedOut}`)).body;
    expect(late.decisions).toEqual([
      expect.objectContaining({ kind: 'deny', timedOut: true }),
    ]);
    const failed = (await get(`/runs/${IDS.failed}`)).body;
    expect(failed.status).toBe('failed');
    expect(failed.pending).toBeUndefined();
    expect(failed.decisions as RecordedDecision[]).toEqual([
      expect.objectContaining({
        kind: 'cancel',
        timedOut: true,
        tools: ['refund'],
      }),
    ]);
  });
});

describeInChromium('run viewer: runs that wait for a time (Chromium)', () => {
  let app: INestApplication;
  let url: string;
  let browser: Browser;
  let page: Page;

  beforeAll(async () => {
    ({ app, url } = await timeApp());
    browser = await launchChromium();
    const context = await browser.newContext({ timezoneId: 'UTC' });
    page = await context.newPage();
  });
  afterAll(async () => {
    await browser?.close();
    await app?.close();
  });

  const rows = () => page.locator('#runs tbody tr[data-run]');

  it('filters the list by sleeping, with its badge', async () => {
    await page.goto(url);
    await page.waitForSelector(`tr[data-run="${IDS.sleeping}"]`);
    expect(await page.locator('#status option').allTextContents()).toEqual([
      'all',
      'running',
      'paused',
      'sleeping',
      'done',
      'failed',
    ]);
    await page.selectOption('#status', 'sleeping');
    for (let i = 0; i < 100 && (await rows().count()) !== 1; i++)
      await page.waitForTimeout(50);
    expect(await rows().count()).toBe(1);
    expect(await rows().first().getAttribute('data-run')).toBe(IDS.sleeping);
    expect(
      await page
        .locator(`tr[data-run="${IDS.sleeping}"] [data-badge]`)
        .allTextContents(),
    ).toEqual(['sleeping']);
  });

  it('a sleeping run says when it wakes, not a lease', async () => {
    const { body } = await request(app.getHttpServer())
      .get(`/ops/runs/api/runs/${IDS.sleeping}`)
      .expect(200);
    await page.goto(`${url}#/runs/${IDS.sleeping}`);
    await page.waitForSelector('#wakes');
    const at = new Date(body.wakeAt as number).toISOString().slice(0, 19);
    expect(await page.locator('#wakes').innerText()).toBe(
      `sleeps until ${at.replace('T', ' ')} UTC`,
    );
    expect(await page.locator('#app p').nth(1).innerText()).not.toMatch(
      /lease/,
    );
  });

  it('a paused run shows its deadline and what the clock does then, beside Approve and Deny', async () => {
    await page.goto(`${url}#/runs/${IDS.deadline}`);
    await page.waitForSelector('#approve');
    expect(await page.locator('#deadline').innerText()).toMatch(
      /^deadline \d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} UTC, then the clock denies the call$/,
    );
    expect(await page.locator('#app p').nth(1).innerText()).not.toMatch(
      /lease/,
    );
  });

  it("labels a timed-out decision as the clock's", async () => {
    await page.goto(`${url}#/runs/${IDS.timedOut}`);
    await page.waitForSelector('#decisions');
    const row = await page.locator('#decisions tbody tr').innerText();
    expect(row).toMatch(/deny \(timed out\)[\s\S]*refund[\s\S]*the clock/);
    await page.goto(`${url}#/runs/${IDS.failed}`);
    await page.waitForSelector('#decisions');
    expect(await page.locator('#decisions tbody tr').innerText()).toMatch(
      /cancel \(timed out\)[\s\S]*the clock/,
    );
    expect(await page.locator('#approve').count()).toBe(0);
  });
});
