/**
 * The viewer's details in headless Chromium (issue 15 item 9): the "recovered" badge only after a
 * recovery from a crash (not after an approval's resume), search by run id, refresh without
 * reloading (keeping the filters and the operator's name), times with their zone, and a long run
 * id heading that wraps inside the page.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { INestApplication } from '@nestjs/common';
import { FlowRunner } from 'agent-adapter/nest';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { Ledger } from '../nest/fixtures/tickets.fixtures';
import {
  crashIn,
  describeInChromium,
  launchChromium,
  viewerApp,
} from './viewer.fixtures';

describeInChromium('run viewer details (headless Chromium)', () => {
  let dir = '';
  const ledger = new Ledger();
  const refunds: string[] = [];
  let app: INestApplication;
  let url: string;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  const LONG = 'order-' + 'x'.repeat(194); // 200 characters (the longest run id), no break opportunity

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'aa-viewer-details-'));
    const path = join(dir, 'runs.db');
    await crashIn(path, ledger, 'email_tickets', 'order-recovered'); // recovered at boot
    ({ app, url } = await viewerApp(path, ledger, refunds));
    const runner = app.get(FlowRunner);
    for (const runId of ['refund-approved', 'refund-waiting', LONG])
      expect(
        (await runner.start('refund', { order: runId }, { runId })).status,
      ).toBe('paused');
    browser = await launchChromium();
    // A zone with a half-hour offset: the page must say which zone its times are in.
    context = await browser.newContext({
      viewport: { width: 1280, height: 900 },
      timezoneId: 'Asia/Kolkata',
    });
    page = await context.newPage();
  });

  afterAll(async () => {
    await browser?.close();
    await app?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const badgesIn = (selector: string) =>
    page.locator(`${selector} [data-badge]`).allTextContents();
  /** Waits (up to `ms`) for `selector` to be on the page. */
  const appears = (selector: string, ms = 10_000) =>
    page.waitForSelector(selector, { timeout: ms });

  it('shows "recovered" after a recovery from a crash, not after an approval resumed the run', async () => {
    await page.goto(`${url}#/runs/refund-approved`);
    await appears('#approve');
    page.once('dialog', (d) => void d.accept());
    await page.click('#approve');
    await appears('[data-badge="done"]');
    expect(refunds).toEqual(['refund-approved']);
    // The resume opened a segment, yet no worker was lost: not recovered, on the run page...
    expect(await badgesIn('#app p:nth-of-type(2)')).toEqual(['done']);
    await page.goto(`${url}#/runs/order-recovered`);
    await appears('#timeline');
    expect(await badgesIn('#app p:nth-of-type(2)')).toEqual([
      'done',
      'recovered',
    ]);
    // ...and in the list, by the same rule.
    await page.goto(`${url}#/`);
    await appears('tr[data-run="refund-approved"]');
    expect(await badgesIn('tr[data-run="refund-approved"]')).toEqual(['done']);
    expect(await badgesIn('tr[data-run="order-recovered"]')).toEqual([
      'done',
      'recovered',
    ]);
  });

  it('opens a run by its id from the search box; an unknown id says "no run <id>"', async () => {
    await page.goto(url);
    await appears('#search');
    await page.fill('#search', 'refund-waiting');
    await page.press('#search', 'Enter');
    await appears('h2.run-id');
    expect(await page.evaluate<string>('location.hash')).toBe(
      '#/runs/refund-waiting',
    );
    expect(await page.locator('h2.run-id').innerText()).toBe('refund-waiting');

    await page.goto(url);
    await appears('#search');
    await page.fill('#search', 'no such/run ?');
    await page.click('#open');
    await appears('#missing');
    expect(await page.evaluate<string>('location.hash')).toBe(
      '#/runs/' + encodeURIComponent('no such/run ?'),
    );
    expect(await page.locator('#missing').innerText()).toBe(
      'no run no such/run ?',
    );
  });

  it('refreshes the list by itself, without a reload, keeping the filters', async () => {
    await page.goto(`${url}#/?status=paused`);
    await appears('tr[data-run="refund-waiting"]');
    await page.evaluate(`window.marker = 'still here'`);
    await app
      .get(FlowRunner)
      .start('refund', { order: 'late' }, { runId: 'refund-late' });
    await appears('tr[data-run="refund-late"]', 12_000); // within the 5 s period
    expect(await page.inputValue('#status')).toBe('paused');
    expect(
      await page.evaluate(
        `({ marker: window.marker, loads: performance.getEntriesByType('navigation').length })`,
      ),
    ).toEqual({ marker: 'still here', loads: 1 });
  });

  it('refreshes a run on the button, keeping the operator name typed', async () => {
    await page.goto(`${url}#/runs/refund-late`);
    await appears('#approve');
    await page.evaluate(`window.marker = 'run page'`);
    await page.fill('#by', 'zoe');
    // Decided elsewhere (another operator, the API): the page learns it on Refresh.
    await app.get(FlowRunner).resume('refund', 'refund-late', {
      approved: false,
      by: 'sam',
      reason: 'decided elsewhere',
    });
    await page.click('#refresh');
    await appears('[data-badge="failed"]');
    expect(await page.locator('#decisions').innerText()).toMatch(
      /sam[\s\S]*decided elsewhere/,
    );
    expect(await page.evaluate<string>('window.marker')).toBe('run page');
    // The name typed survives a refresh of a run page that still has the input.
    await page.goto(`${url}#/runs/refund-waiting`);
    await appears('#by');
    await page.fill('#by', 'zoe');
    await page.click('#refresh');
    await page.waitForTimeout(500);
    expect(await page.inputValue('#by')).toBe('zoe');
  });

  it("shows every time in the browser's local time with its zone", async () => {
    await page.goto(url);
    await appears('tr[data-run="refund-waiting"]');
    const updated = await page
      .locator('tr[data-run="refund-waiting"] td')
      .nth(4)
      .innerText();
    expect(updated).toMatch(/^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} UTC\+5:30$/);
    await page.goto(`${url}#/runs/refund-approved`);
    await appears('#decisions');
    expect(await page.locator('#decisions tbody').innerText()).toMatch(
      /\d{2}:\d{2}:\d{2} UTC\+5:30/,
    );
    expect(await page.locator('#refreshed').innerText()).toMatch(/UTC\+5:30/);
  });

  it('wraps a 200-character run id heading inside the page', async () => {
    await page.goto(`${url}#/runs/${encodeURIComponent(LONG)}`);
    await appears('h2.run-id');
    const heading = page.locator('h2.run-id');
    expect(await heading.innerText()).toBe(LONG);
    const box = (await heading.boundingBox())!;
    const width = await page.evaluate<number>('window.innerWidth');
    expect(box.x).toBeGreaterThanOrEqual(0);
    expect(box.x + box.width).toBeLessThanOrEqual(width);
    expect(box.height).toBeGreaterThan(30); // more than one line
    expect(
      await page.evaluate<string>(
        `getComputedStyle(document.querySelector('h2.run-id')).fontFamily`,
      ),
    ).toMatch(/monospace/);
    // The whole id is there, not cut off: the heading's text fits in its box.
    expect(
      await page.evaluate<boolean>(
        `(() => { const el = document.querySelector('h2.run-id'); return el.scrollWidth <= el.clientWidth; })()`,
      ),
    ).toBe(true);
  });
});
