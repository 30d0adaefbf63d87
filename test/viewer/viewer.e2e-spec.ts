/**
 * The run viewer in a real browser (headless Chromium through playwright-core): the list, its
 * filters, a recovered run, a run in doubt rerun behind a confirmation, a paused run approved
 * (after a confirmation) until it finishes, and one denied (with a reason). Screenshots go to
 * test-artifacts/viewer/.
 */
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import Database from 'better-sqlite3';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Script } from 'node:vm';
import type { INestApplication } from '@nestjs/common';
import { FlowRunner } from 'agent-adapter/nest';
import type { Browser, Page } from 'playwright-core';
import { Ledger, TicketsFlow } from '../nest/fixtures/tickets.fixtures';
import {
  crashIn,
  describeInChromium,
  launchChromium,
  viewerApp,
} from './viewer.fixtures';

const SHOTS = join(__dirname, '..', '..', 'test-artifacts', 'viewer');

describeInChromium('run viewer (headless Chromium)', () => {
  // Made in beforeAll: a skipped suite (no browser outside CI) must not leave a directory behind.
  let dir = '';
  const ledger = new Ledger();
  const refunds: string[] = [];
  let app: INestApplication;
  let url: string;
  let browser: Browser;
  let page: Page;
  let chargeKey = '';

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'aa-viewer-'));
    const path = join(dir, 'runs.db');
    mkdirSync(SHOTS, { recursive: true });
    await crashIn(path, ledger, 'email_tickets', 'order-recovered'); // idempotent: recovered at boot
    await crashIn(path, ledger, 'charge_card', 'order-in-doubt'); // not idempotent: needs a decision
    // The key the charge in doubt was given: what the operator searches the provider by.
    chargeKey = ledger.entries.filter((e) => e.tool === 'charge_card').at(-1)
      ?.key as string;

    ({ app, url } = await viewerApp(path, ledger, refunds));
    const runner = app.get(FlowRunner);
    await runner.start(
      TicketsFlow,
      { show: 'Lear', seats: 1 },
      { runId: 'order-done' },
    );
    const paused = await runner.start(
      'refund',
      { order: 'order-done' },
      { runId: 'refund-1' },
    );
    expect(paused.status).toBe('paused');

    browser = await launchChromium();
    page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  });

  afterAll(async () => {
    await browser?.close();
    await app?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const rows = () => page.locator('#runs tbody tr[data-run]');
  /** Waits until the list shows `n` runs (it renders after its fetches). */
  async function rowsAre(n: number): Promise<void> {
    for (let i = 0; i < 100 && (await rows().count()) !== n; i++)
      await page.waitForTimeout(50);
    expect(await rows().count()).toBe(n);
  }
  const shot = (name: string) =>
    page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true });

  it('the page is one self-contained document whose script parses', async () => {
    const html = await (await fetch(url)).text();
    expect(html).not.toMatch(/<script[^>]+src=|<link[^>]+href="http/); // nothing fetched
    const script = /<script>([\s\S]*)<\/script>/.exec(html)![1]!;
    expect(() => new Script(script)).not.toThrow();
  });

  it('lists every run with its badges, and filters by status and flow', async () => {
    await page.goto(url);
    await rowsAre(4);
    const badgesOf = async (runId: string) =>
      page.locator(`tr[data-run="${runId}"] [data-badge]`).allTextContents();
    expect(await badgesOf('order-recovered')).toEqual(['done', 'recovered']);
    expect(await badgesOf('order-in-doubt')).toEqual(['running', 'in doubt']);
    expect(await badgesOf('refund-1')).toEqual(['paused']);
    expect(await badgesOf('order-done')).toEqual(['done']);
    await shot('list');

    // Every status is a filter, the waiting ones included (runs-that-sleep are in viewer-time).
    expect(await page.locator('#status option').allTextContents()).toEqual([
      'all',
      'running',
      'paused',
      'sleeping',
      'done',
      'failed',
    ]);
    await page.selectOption('#status', 'paused');
    await rowsAre(1);
    expect(await rows().first().getAttribute('data-run')).toBe('refund-1');
    await page.selectOption('#status', '');
    await page.selectOption('#flow', 'tickets');
    await rowsAre(3);
  });

  it('opens a recovered run: the claim, the replayed calls and the call that ran again', async () => {
    await page.goto(`${url}#/runs/order-recovered`);
    await page.waitForSelector('#timeline');
    const timeline = await page.locator('#timeline').innerText();
    expect(timeline).toMatch(/claim/);
    const call = (tool: string) =>
      page.locator(`#calls tr[data-tool="${tool}"]`).innerText();
    expect(await call('print_receipt')).toMatch(/replayed/);
    expect(await call('email_tickets')).toMatch(/rerun/);
    expect(await call('charge_card')).not.toMatch(/replayed|rerun/);
    await shot('recovered-run');
  });

  it('shows a run in doubt with the reason, and reruns it only after the confirmation', async () => {
    await page.goto(`${url}#/runs/order-in-doubt`);
    await page.waitForSelector('#rerun');
    expect(await page.locator('#calls tr.doubt').innerText()).toMatch(
      /charge_card[\s\S]*started, no result recorded/,
    );
    // What to check at the provider: the call, its arguments, the exact key the tool got, when.
    expect(chargeKey).toMatch(/\S{16,}/);
    const doubt = await page.locator('#doubt tbody tr').innerText();
    expect(doubt).toContain('pay#0');
    expect(doubt).toContain('charge_card');
    expect(doubt).toContain('"show":"Hamlet"');
    expect(doubt).toContain(chargeKey);
    expect(doubt).toMatch(/\d{4}-\d{2}-\d{2} \d{2}:\d{2}/);
    expect(await page.locator('#app p').nth(1).innerText()).toMatch(
      /owner viewer-test, lease until .*(live|expired)/,
    );
    await shot('in-doubt');
    const charges = ledger.count('charge_card');
    page.once('dialog', (d) => void d.dismiss());
    await page.click('#rerun');
    await page.waitForTimeout(300);
    expect(ledger.count('charge_card')).toBe(charges); // dismissed: nothing ran
    page.once('dialog', (d) => void d.accept('no charge at the provider'));
    await page.fill('#by', 'ann');
    await page.click('#rerun');
    await page.waitForSelector('[data-badge="done"]');
    expect(ledger.count('charge_card')).toBe(charges + 1);
    // The same key again: a provider that honours it charges once.
    expect(
      ledger.entries.filter((e) => e.tool === 'charge_card').at(-1)?.key,
    ).toBe(chargeKey);
    // The decision is on the run, with who, when and why.
    const decided = await page.locator('#decisions tbody tr').innerText();
    expect(decided).toMatch(
      /rerun[\s\S]*pay#0 charge_card[\s\S]*ann[\s\S]*\d{4}-\d{2}-\d{2}[\s\S]*no charge at the provider/,
    );
  });

  it('approves a paused run and sees it finish; the approved tool ran once', async () => {
    await page.goto(`${url}#/runs/refund-1`);
    await page.waitForSelector('#approve');
    await shot('paused');
    await page.fill('#by', 'ana');
    page.once('dialog', (d) => void d.dismiss());
    await page.click('#approve');
    await page.waitForTimeout(300);
    expect(refunds).toEqual([]); // dismissed: nothing ran
    let asked = '';
    page.once('dialog', (d) => {
      asked = d.message();
      void d.accept();
    });
    await page.click('#approve');
    await page.waitForSelector('[data-badge="done"]');
    expect(asked).toMatch(/Approve refund .*order-done.* in run refund-1/);
    expect(await page.locator('#calls').innerText()).toMatch(
      /refunded order-done/,
    );
    expect(refunds).toEqual(['order-done']);
    await shot('approved');
    // The API refuses a second decision (nothing is waiting any more), even from the page.
    const again = await page.evaluate(
      async (token) => {
        const res = await fetch('/ops/runs/api/runs/refund-1/approve', {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            'x-agent-adapter-csrf': token,
          },
          body: '{}',
        });
        return res.status;
      },
      (await page.getAttribute('meta[name="agent-adapter-csrf"]', 'content'))!,
    );
    expect(again).toBe(409);
    expect(refunds).toEqual(['order-done']);
  });

  it('denies a paused run only after asking why; the refund never runs', async () => {
    const { status } = await app
      .get(FlowRunner)
      .start('refund', { order: 'order-2' }, { runId: 'refund-2' });
    expect(status).toBe('paused');
    await page.goto(`${url}#/runs/refund-2`);
    await page.waitForSelector('#deny');
    // The name typed on another run's page (ana) is kept; this operator types theirs.
    expect(await page.inputValue('#by')).toBe('ana');
    await page.fill('#by', 'bob');
    page.once('dialog', (d) => void d.dismiss());
    await page.click('#deny');
    await page.waitForTimeout(300);
    expect(await page.locator('#deny').count()).toBe(1); // cancelled: still waiting
    page.once('dialog', (d) => void d.accept('   '));
    await page.click('#deny');
    expect(await page.locator('#result .error').innerText()).toBe(
      'Not denied: give a reason.',
    );
    // A refresh keeps what the page told the operator (one on its way wiped it in CI).
    await page.evaluate(`document.getElementById('deny').dataset.old = '1'`);
    await page.click('#refresh');
    await page.waitForSelector('#deny:not([data-old])');
    expect(await page.locator('#result .error').innerText()).toBe(
      'Not denied: give a reason.',
    );
    let asked = '';
    page.once('dialog', (d) => {
      asked = d.message();
      void d.accept('duplicate order');
    });
    await page.click('#deny');
    await page.waitForSelector('[data-badge="failed"]');
    expect(asked).toMatch(/^Deny refund in run refund-2\? .*Why/);
    expect(await page.locator('#app').innerText()).toMatch(
      /denied by bob: duplicate order/,
    );
    expect(refunds).toEqual(['order-done']); // refund-2 never ran
    await shot('denied');
  });

  it('a run whose head row alone was deleted (below the store): "Find runs without a head" lists it as corrupt, and its page says corrupt, not "no run"', async () => {
    await page.goto(url);
    await page.waitForSelector('#audit');
    await page.click('#audit');
    await page.waitForSelector('#headless-none');
    const { status } = await app
      .get(FlowRunner)
      .start('refund', { order: 'order-4' }, { runId: 'refund-headless' });
    expect(status).toBe('paused');
    const db = new Database(join(dir, 'runs.db'));
    db.prepare(`DELETE FROM "aa_runs" WHERE run_id = 'refund-headless'`).run();
    db.close();
    await page.goto(url);
    await page.waitForSelector('#runs tbody tr[data-run]');
    expect(
      await page.locator('#runs tr[data-run="refund-headless"]').count(),
    ).toBe(0);
    await page.click('#audit');
    const row = page.locator('#headless-runs tr[data-run="refund-headless"]');
    await row.waitFor();
    expect(await row.locator('[data-badge]').allTextContents()).toEqual([
      'corrupt',
    ]);
    expect(await row.innerText()).toMatch(
      /refund[\s\S]*stored but the run has no head/,
    );
    // The answer stays across the list's refresh.
    await page.click('#refresh');
    await page.waitForTimeout(300);
    expect(await row.count()).toBe(1);
    await page.goto(`${url}#/runs/refund-headless`);
    await page.waitForSelector('#app > p.error');
    expect(await page.locator('#app > p.error').innerText()).toMatch(/no head/);
    expect(await page.locator('#approve, #deny').count()).toBe(0);
  });

  it('a paused run whose head status was edited to done (below the store) shows as corrupt, with nothing to act on', async () => {
    const { status } = await app
      .get(FlowRunner)
      .start('refund', { order: 'order-3' }, { runId: 'refund-edited' });
    expect(status).toBe('paused');
    const db = new Database(join(dir, 'runs.db'));
    db.prepare(
      `UPDATE "aa_runs" SET status = 'done' WHERE run_id = 'refund-edited'`,
    ).run();
    db.close();
    await page.goto(url);
    await page.waitForSelector('tr[data-run="refund-edited"]');
    expect(
      await page
        .locator('tr[data-run="refund-edited"] [data-badge]')
        .allTextContents(),
    ).toEqual(['corrupt']);
    await page.goto(`${url}#/runs/refund-edited`);
    await page.waitForSelector('#corrupt');
    expect(await page.locator('#corrupt').innerText()).toMatch(
      /the run head .*does not match its signature/,
    );
    expect(await page.locator('#approve, #deny, #rerun').count()).toBe(0);
    const res = await fetch(`${url}/api/runs/refund-edited`);
    expect(((await res.json()) as { corrupt?: string }).corrupt).toMatch(
      /does not match its signature/,
    );
    expect(refunds).not.toContain('order-3');
  });
});
