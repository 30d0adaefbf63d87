/**
 * The run viewer in a real browser (headless Chromium through playwright-core): the list, its
 * filters, a recovered run, a run in doubt rerun behind a confirmation, and a paused run approved
 * until it finishes. Screenshots go to test-artifacts/viewer/.
 */
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Script } from 'node:vm';
import { Injectable, Module, type INestApplication } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { SQLiteCheckpointStore } from 'agent-adapter';
import {
  DurableModule,
  Flow,
  FlowRunner,
  Node,
  RecoveryOrchestrator,
  Tool,
} from 'agent-adapter/nest';
import { chromium, type Browser, type Page } from 'playwright-core';
import { CrashingStore, SimulatedCrash, settle } from '../utils/crashing-store';
import {
  KEY,
  Ledger,
  TicketsFlow,
  TicketsModule,
} from '../nest/fixtures/tickets.fixtures';
import { CaptureLogger } from '../nest/utils';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const SHOTS = join(__dirname, '..', '..', 'test-artifacts', 'viewer');

const refunds: string[] = [];

@Injectable()
class Refunds {
  @Tool({ name: 'refund', approval: true })
  async refund(a: { order: string }): Promise<string> {
    refunds.push(a.order);
    return `refunded ${a.order}`;
  }
}

class RefundState {
  order = '';
  note?: string;
}

@Flow('refund', { state: RefundState })
class RefundFlow {
  constructor(private readonly refunds: Refunds) {}
  @Node({ start: true, end: true })
  async refund(s: RefundState): Promise<Partial<RefundState>> {
    return { note: await this.refunds.refund({ order: s.order }) };
  }
}

@Module({ providers: [Refunds, RefundFlow] })
class RefundModule {}

// Under CI the browser must be there (.ci/run installs it): a missing one fails, it does not skip.
(existsSync(CHROMIUM) || process.env.CI === 'true' ? describe : describe.skip)(
  'run viewer (headless Chromium)',
  () => {
    // Made in beforeAll: a skipped suite (no browser outside CI) must not leave a directory behind.
    let dir = '';
    let path = '';
    const ledger = new Ledger();
    let app: INestApplication;
    let url: string;
    let browser: Browser;
    let page: Page;

    /** A worker that dies inside `tool` (its store fails from then on, like a killed process). */
    async function crashIn(tool: string, runId: string): Promise<void> {
      const inner = new SQLiteCheckpointStore(path);
      const crashing = new CrashingStore(inner);
      ledger.crashIn = { tool, kill: () => crashing.kill(`inside ${tool}`) };
      const moduleRef = await Test.createTestingModule({
        imports: [
          DurableModule.forRoot({
            store: crashing,
            key: KEY,
            workerId: 'viewer-test',
          }),
          TicketsModule.with(ledger),
        ],
      })
        .setLogger(new CaptureLogger())
        .compile();
      const dying = moduleRef.createNestApplication({
        logger: new CaptureLogger(),
      });
      await dying.init();
      await expect(
        dying
          .get(FlowRunner)
          .start(TicketsFlow, { show: 'Hamlet', seats: 2 }, { runId }),
      ).rejects.toThrow(SimulatedCrash);
      await settle();
      await dying.close();
      await inner.close();
    }

    beforeAll(async () => {
      dir = mkdtempSync(join(tmpdir(), 'aa-viewer-'));
      path = join(dir, 'runs.db');
      mkdirSync(SHOTS, { recursive: true });
      await crashIn('email_tickets', 'order-recovered'); // idempotent: recovered at boot
      await crashIn('charge_card', 'order-in-doubt'); // not idempotent: needs a decision

      const moduleRef = await Test.createTestingModule({
        imports: [
          DurableModule.forRoot({
            store: { type: 'sqlite', path },
            key: KEY,
            workerId: 'viewer-test',
            viewer: { path: '/ops/runs', privateNetwork: true },
          }),
          TicketsModule.with(ledger),
          RefundModule,
        ],
      })
        .setLogger(new CaptureLogger())
        .compile();
      app = moduleRef.createNestApplication({ logger: new CaptureLogger() });
      await app.listen(0, '127.0.0.1');
      url = `${await app.getUrl()}/ops/runs`;
      await app.get(RecoveryOrchestrator).waitUntilRecovered();
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

      browser = await chromium.launch({
        executablePath: CHROMIUM,
        headless: true,
        args: ['--no-sandbox'],
      });
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
      await shot('in-doubt');
      const charges = ledger.count('charge_card');
      page.once('dialog', (d) => void d.dismiss());
      await page.click('#rerun');
      await page.waitForTimeout(300);
      expect(ledger.count('charge_card')).toBe(charges); // dismissed: nothing ran
      page.once('dialog', (d) => void d.accept());
      await page.click('#rerun');
      await page.waitForSelector('[data-badge="done"]');
      expect(ledger.count('charge_card')).toBe(charges + 1);
    });

    it('approves a paused run and sees it finish; the approved tool ran once', async () => {
      await page.goto(`${url}#/runs/refund-1`);
      await page.waitForSelector('#approve');
      await shot('paused');
      await page.fill('#by', 'ana');
      await page.click('#approve');
      await page.waitForSelector('[data-badge="done"]');
      expect(await page.locator('#calls').innerText()).toMatch(
        /refunded order-done/,
      );
      expect(refunds).toEqual(['order-done']);
      await shot('approved');
      // The API refuses a second decision: nothing is waiting any more.
      const again = await fetch(`${url}/api/runs/refund-1/approve`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: '{}',
      });
      expect(again.status).toBe(409);
      expect(refunds).toEqual(['order-done']);
    });
  },
);
