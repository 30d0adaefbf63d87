/**
 * Issue 16, item 1: a page on another origin must not act through the viewer. An operator has the
 * viewer open (so the browser holds its cookie); a page served from another port of the same host
 * (same site: SameSite cookies go along) fires every kind of cross-origin POST a browser allows at
 * `rerun-in-doubt`, `resolve` (a finding that the charge did not run: it would run again) and
 * `approve`. Nothing may run: the charge in doubt is not charged again and the
 * paused refund stays paused. Then the operator's own page still approves, same-origin. And a
 * DNS-rebound name (the attacker's, resolving to the app) gets nothing.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { INestApplication } from '@nestjs/common';
import { CheckpointStore, FlowRunner } from 'agent-adapter/nest';
import type { Browser, BrowserContext } from 'playwright-core';
import { Ledger } from '../nest/fixtures/tickets.fixtures';
import {
  crashIn,
  describeInChromium,
  launchChromium,
  viewerApp,
} from './viewer.fixtures';

/** The attacker's page: every cross-origin POST a page can make without the viewer's consent. */
function attackPage(api: string): string {
  const target = JSON.stringify(api);
  // A text/plain form whose one field name and value make a JSON-looking body: {"by":"mallory","x":"="}
  const form = (action: string, frame: string) =>
    `<iframe name="${frame}"></iframe>` +
    `<form method="post" enctype="text/plain" target="${frame}" action="${api}${action}">` +
    `<input type="hidden" name='{"by":"mallory","x":"' value='"}'></form>`;
  return `<!doctype html><html><body>
<h1>Cute cats</h1>
${form('/order-in-doubt/rerun-in-doubt', 'f1')}
${form('/refund-1/approve', 'f2')}
${form('/order-in-doubt/resolve', 'f3')}
<script>
(async () => {
  const api = ${target};
  const plain = { method: 'POST', mode: 'no-cors', credentials: 'include', headers: { 'content-type': 'text/plain' }, body: '{}' };
  const json = { method: 'POST', mode: 'cors', credentials: 'include', headers: { 'content-type': 'application/json' }, body: '{"by":"mallory"}' };
  const notRun = '{"call":"pay#0","ran":false,"by":"mallory"}';
  const outcome = (p) => p.then((r) => r.type + ' ' + r.status, (e) => 'rejected: ' + e.message);
  window.__results = await Promise.all([
    outcome(fetch(api + '/order-in-doubt/rerun-in-doubt', plain)),
    outcome(fetch(api + '/refund-1/approve', plain)),
    outcome(fetch(api + '/refund-1/approve', json)),
    outcome(fetch(api + '/order-in-doubt/rerun-in-doubt', json)),
    outcome(fetch(api + '/order-in-doubt/resolve', { ...plain, body: notRun })),
    outcome(fetch(api + '/order-in-doubt/resolve', { ...json, body: notRun })),
  ]);
  for (const f of document.forms) f.submit();
  window.__done = true;
})();
</script></body></html>`;
}

describeInChromium(
  'run viewer: cross-site requests (headless Chromium)',
  () => {
    let dir = '';
    const ledger = new Ledger();
    const refunds: string[] = [];
    let app: INestApplication;
    let url = '';
    let attacker: Server;
    let attackerUrl = '';
    let browser: Browser;
    let context: BrowserContext;

    beforeAll(async () => {
      dir = mkdtempSync(join(tmpdir(), 'aa-viewer-csrf-'));
      const path = join(dir, 'runs.db');
      await crashIn(path, ledger, 'charge_card', 'order-in-doubt');
      ({ app, url } = await viewerApp(path, ledger, refunds));
      const paused = await app
        .get(FlowRunner)
        .start('refund', { order: 'order-1' }, { runId: 'refund-1' });
      expect(paused.status).toBe('paused');

      const html = attackPage(`${url}/api/runs`);
      attacker = createServer((_req, res) => {
        res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
        res.end(html);
      });
      await new Promise<void>((done) =>
        attacker.listen(0, '127.0.0.1', () => done()),
      );
      attackerUrl = `http://127.0.0.1:${(attacker.address() as AddressInfo).port}/`;
      browser = await launchChromium();
      context = await browser.newContext();
    });

    afterAll(async () => {
      await browser?.close();
      await new Promise((done) => attacker?.close(done));
      await app?.close();
      rmSync(dir, { recursive: true, force: true });
    });

    const statusOf = async (runId: string) =>
      (await app.get(CheckpointStore).head(runId))?.status;

    it('a page on another port fires no-cors, CORS and form POSTs at the actions: nothing runs', async () => {
      // The operator has the viewer open: the browser holds whatever the viewer set.
      const operator = await context.newPage();
      await operator.goto(url);
      await operator.waitForSelector('#runs');
      expect(await statusOf('order-in-doubt')).toBe('running');
      const charges = ledger.count('charge_card');

      // What reached the server, and what it answered (the browser may hide the answer).
      const seen: string[] = [];
      (app.getHttpServer() as Server).on('request', (req, res) =>
        res.on('finish', () =>
          seen.push(
            `${req.method} ${req.url?.split('/api/runs')[1]} ${res.statusCode}`,
          ),
        ),
      );
      const evil = await context.newPage();
      await evil.goto(attackerUrl);
      await evil.waitForFunction(
        () => (globalThis as { __done?: boolean }).__done,
      );
      const posts = () => seen.filter((s) => s.startsWith('POST'));
      // The three no-cors fetches and the three forms reach the server; the CORS ones die at preflight.
      for (let i = 0; i < 100 && posts().length < 6; i++)
        await evil.waitForTimeout(50);
      await evil.waitForTimeout(300);
      expect(posts().sort()).toEqual([
        'POST /order-in-doubt/rerun-in-doubt 403',
        'POST /order-in-doubt/rerun-in-doubt 403',
        'POST /order-in-doubt/resolve 403',
        'POST /order-in-doubt/resolve 403',
        'POST /refund-1/approve 403',
        'POST /refund-1/approve 403',
      ]);
      const results = await evil.evaluate(
        () => (globalThis as { __results?: string[] }).__results,
      );
      expect(results).toHaveLength(6);
      for (const r of results!) expect(r).toMatch(/^(opaque 0|rejected: )/);

      expect(ledger.count('charge_card')).toBe(charges); // not charged again
      expect(await statusOf('order-in-doubt')).toBe('running');
      expect(await statusOf('refund-1')).toBe('paused'); // not approved
      expect(refunds).toEqual([]);
      await evil.close();

      // The operator's own page still acts (same origin, its token, after the confirmation).
      operator.on('dialog', (d) => void d.accept());
      await operator.goto(`${url}#/runs/refund-1`);
      await operator.waitForSelector('#approve');
      await operator.click('#approve');
      await operator.waitForSelector('[data-badge="done"]');
      expect(refunds).toEqual(['order-1']);
      expect(await statusOf('refund-1')).toBe('done');
      await operator.close();
    });

    it('DNS rebinding: a name of the attacker that resolves to the app gets 421 and no data; loopback names work', async () => {
      const port = new URL(url).port;
      // The attacker's name now resolves to the app, as a rebinding DNS server would make it.
      const rebound = await launchChromium([
        '--host-resolver-rules=MAP rebind.test 127.0.0.1',
      ]);
      try {
        const page = await rebound.newPage();
        const refused = await page.goto(
          `http://rebind.test:${port}/ops/runs/api/runs`,
        );
        expect(refused!.status()).toBe(421);
        const body = (await page.textContent('body')) ?? '';
        expect(body).toMatch(/does not answer for Host .*viewer: \{ hosts/);
        expect(body).not.toContain('order-in-doubt');
        const page2 = await page.goto(`http://rebind.test:${port}/ops/runs`);
        expect(page2!.status()).toBe(421);
        const allowed = await page.goto(
          `http://localhost:${port}/ops/runs/api/runs`,
        );
        expect(allowed!.status()).toBe(200);
        expect(await page.textContent('body')).toContain('order-in-doubt');
      } finally {
        await rebound.close();
      }
    });
  },
);
