/**
 * Issue 15, items 1 and 2 in the run viewer (headless Chromium): a worker dies inside the charge
 * after the card was charged (the fixture's tool acts, then its process "dies"), and the operator
 * tells the viewer what the call really did. "It ran…" records the charge's result: the run goes
 * on with it and the tool never runs again. "It did not run…" runs it once, with the same
 * idempotency key. A tool loop's call in doubt goes through the loop's resolve. Bad findings are
 * a 400 and a finished run a 409, with nothing stored. The
 * in-doubt page (arguments, idempotency key, the two actions) is screenshotted.
 */
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Injectable, Module, type INestApplication } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import {
  SQLiteCheckpointStore,
  type AssistantMessage,
  type ChatModel,
  type ChatRequest,
} from 'agent-adapter';
import {
  CheckpointStore,
  DurableModule,
  FlowRunner,
  Tool,
  ToolLoopRunner,
  type DurableToolLoop,
} from 'agent-adapter/nest';
import { CrashingStore, SimulatedCrash, settle } from 'agent-adapter/testing';
import type { Browser, Dialog, Page } from 'playwright-core';
import { KEY, Ledger } from '../nest/fixtures/tickets.fixtures';
import { CaptureLogger } from '../nest/utils';
import {
  crashIn,
  describeInChromium,
  launchChromium,
  viewerApp,
} from './viewer.fixtures';

const SHOTS = join(__dirname, '..', '..', 'test-artifacts', 'viewer');

/** What the booking tool really did; and where its "process" dies. */
const bookings: string[] = [];
let dieInside: (() => never) | undefined;

@Injectable()
class BoxOffice {
  @Tool({ name: 'book', description: 'Books seats (not idempotent)' })
  async book(a: { show: string }): Promise<string> {
    bookings.push(a.show);
    dieInside?.();
    return `booked ${a.show}`;
  }
}

/** Books when asked; answers with what the tool returned. */
class BookingModel implements ChatModel {
  readonly requests: ChatRequest[] = [];
  complete(request: ChatRequest): Promise<AssistantMessage> {
    this.requests.push(request);
    const last = request.messages.at(-1);
    if (last?.role === 'user')
      return Promise.resolve({
        role: 'assistant',
        content: '',
        toolCalls: [{ id: 'c1', name: 'book', arguments: { show: 'Lear' } }],
      });
    return Promise.resolve({
      role: 'assistant',
      content: last?.role === 'tool' ? last.content : '?',
    });
  }
}

@Injectable()
class BookingAgent {
  readonly model = new BookingModel();
  readonly loop: DurableToolLoop;
  constructor(loops: ToolLoopRunner) {
    this.loop = loops.define('booking', {
      model: this.model,
      tools: ['book'],
    });
  }
}

@Module({ providers: [BoxOffice, BookingAgent] })
class BookingModule {}

/** A worker that starts the booking loop as `runId` and dies inside `book`, after it booked. */
async function crashInBooking(path: string, runId: string): Promise<void> {
  const inner = new SQLiteCheckpointStore(path);
  const crashing = new CrashingStore(inner);
  dieInside = () => crashing.kill('inside book');
  const moduleRef = await Test.createTestingModule({
    imports: [
      DurableModule.forRoot({
        store: crashing,
        key: KEY,
        workerId: 'viewer-test',
      }),
      BookingModule,
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
      .get(BookingAgent)
      .loop.run([{ role: 'user', content: 'One for Lear' }], { runId }),
  ).rejects.toThrow(SimulatedCrash);
  dieInside = undefined;
  await settle();
  await dying.close();
  await inner.close();
}

interface ApiRun {
  status: string;
  failover?: { lostHistory: string; history: string };
  checkpoints: Array<{ changed?: Record<string, unknown> }>;
  decisions: Array<{
    kind: string;
    calls: string[];
    ran?: boolean[];
    by?: string;
    reason?: string;
  }>;
}

describeInChromium(
  'run viewer: resolving calls in doubt (headless Chromium)',
  () => {
    let dir = '';
    const ledger = new Ledger();
    let app: INestApplication;
    let url = '';
    let browser: Browser;
    let page: Page;
    /** The idempotency key each crashed charge got, by run id. */
    const keys = new Map<string, string>();

    beforeAll(async () => {
      dir = mkdtempSync(join(tmpdir(), 'aa-viewer-resolve-'));
      const path = join(dir, 'runs.db');
      mkdirSync(SHOTS, { recursive: true });
      for (const runId of [
        'order-charged',
        'order-not-charged',
        'order-bad',
        'order-failover',
      ]) {
        await crashIn(path, ledger, 'charge_card', runId);
        keys.set(
          runId,
          ledger.entries.filter((e) => e.tool === 'charge_card').at(-1)!.key!,
        );
      }
      await crashInBooking(path, 'chat-booked');
      ({ app, url } = await viewerApp(path, ledger, [], {
        imports: [BookingModule],
      }));
      browser = await launchChromium();
      page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    });

    afterAll(async () => {
      await browser?.close();
      await app?.close();
      rmSync(dir, { recursive: true, force: true });
    });

    /** How many times the charge really ran with this run's key. */
    const charges = (runId: string) =>
      ledger.entries.filter(
        (e) => e.tool === 'charge_card' && e.key === keys.get(runId),
      ).length;
    const apiRun = async (runId: string) =>
      (await (await fetch(`${url}/api/runs/${runId}`)).json()) as ApiRun;
    const headOf = async (runId: string) =>
      app.get(CheckpointStore).head(runId);

    /** Answers the next dialogs in order (a string is typed, true accepts, false cancels). */
    function answer(...replies: Array<string | boolean>): string[] {
      const asked: string[] = [];
      const handler = (d: Dialog) => {
        asked.push(d.message());
        const reply = replies.shift();
        if (replies.length === 0) page.off('dialog', handler);
        if (reply === false) void d.dismiss();
        else void d.accept(typeof reply === 'string' ? reply : undefined);
      };
      page.on('dialog', handler);
      return asked;
    }

    it('"It ran…" records the charge found at the provider: the run goes on with that result, the card is charged once', async () => {
      await page.goto(`${url}#/runs/order-charged`);
      const ran = page.locator('#doubt button.ran[data-call="pay#0"]');
      await ran.waitFor();
      // What the operator searches the provider by, beside the two actions.
      const row = await page.locator('#doubt tbody tr').innerText();
      expect(row).toContain('charge_card');
      expect(row).toContain('"show":"Hamlet"');
      expect(row).toContain(keys.get('order-charged'));
      expect(await page.locator('#doubt button.not-run').count()).toBe(1);
      expect(await page.locator('#rerun').count()).toBe(1); // still offered, not the only action
      await page.screenshot({
        path: join(SHOTS, 'in-doubt-resolve.png'),
        fullPage: true,
      });

      // Cancelled at the first question, or at the confirmation: nothing is stored, nothing runs.
      answer(false);
      await ran.click();
      answer('"charged"', 'found it', false);
      await ran.click();
      await page.waitForTimeout(300);
      // Not JSON: refused on the page.
      answer('charged 2');
      await ran.click();
      expect(await page.locator('#result .error').innerText()).toMatch(
        /not JSON/,
      );
      // No reason: refused on the page.
      answer('"charged"', '  ');
      await ran.click();
      expect(await page.locator('#result .error').innerText()).toBe(
        'Not resolved: give a reason.',
      );
      expect((await headOf('order-charged'))?.status).toBe('running');
      expect(charges('order-charged')).toBe(1);

      const result = 'charged 2 (provider charge ch_42)';
      await page.fill('#by', 'ann');
      const asked = answer(
        JSON.stringify(result),
        'ch_42 found at the provider by the idempotency key',
        true,
      );
      await ran.click();
      await page.waitForSelector('[data-badge="done"]');
      // The confirmation named the tool, the call and the key.
      expect(asked[2]).toContain('charge_card');
      expect(asked[2]).toContain('pay#0');
      expect(asked[2]).toContain(keys.get('order-charged'));
      expect(asked[2]).toMatch(/RAN .*never run again/);

      expect(charges('order-charged')).toBe(1); // never run again
      const run = await apiRun('order-charged');
      expect(run.status).toBe('done');
      // The state holds the given result (pay's checkpoint), and the flow went on from it.
      expect(run.checkpoints.map((c) => c.changed?.note)).toContain(result);
      expect(run.decisions.at(-1)).toMatchObject({
        kind: 'resolve',
        calls: ['pay#0'],
        ran: [true],
        by: 'ann',
        reason: 'ch_42 found at the provider by the idempotency key',
      });
      expect(await page.locator('#decisions').innerText()).toMatch(
        /resolve[\s\S]*pay#0 charge_card \(ran\)[\s\S]*ann/,
      );
      await page.screenshot({
        path: join(SHOTS, 'resolved-ran.png'),
        fullPage: true,
      });
    });

    it('"It did not run…" runs the charge once, with the same idempotency key', async () => {
      await page.goto(`${url}#/runs/order-not-charged`);
      const notRun = page.locator('#doubt button.not-run[data-call="pay#0"]');
      await notRun.waitFor();
      answer('no charge at the provider', false); // cancelled at the confirmation
      await notRun.click();
      await page.waitForTimeout(300);
      expect(charges('order-not-charged')).toBe(1);

      await page.fill('#by', 'bob');
      const asked = answer('no charge at the provider', true);
      await notRun.click();
      await page.waitForSelector('[data-badge="done"]');
      expect(asked[1]).toContain(keys.get('order-not-charged'));
      expect(asked[1]).toMatch(
        /did NOT run.*once, with the same idempotency key/,
      );
      // It ran once more, with the key it had: a provider that honours it charges once.
      expect(charges('order-not-charged')).toBe(2);
      const run = await apiRun('order-not-charged');
      expect(run.checkpoints.map((c) => c.changed?.note)).toContain(
        'charged 2',
      );
      expect(run.decisions.at(-1)).toMatchObject({
        kind: 'resolve',
        ran: [false],
        by: 'bob',
      });
      expect(await page.locator('#decisions').innerText()).toMatch(
        /pay#0 charge_card \(did not run\)[\s\S]*bob/,
      );
    });

    it('a tool loop\'s call in doubt, resolved "ran" in the viewer: the loop goes on with that result, the booking is not made again', async () => {
      expect(bookings).toEqual(['Lear']);
      await page.goto(`${url}#/runs/chat-booked`);
      const ran = page.locator('#doubt button.ran').first();
      await ran.waitFor();
      expect(await page.locator('#doubt tbody tr').innerText()).toContain(
        'book',
      );
      answer('"booked Lear, ref B-7"', 'B-7 at the box office', true);
      await ran.click();
      await page.waitForSelector('[data-badge="done"]');
      expect(bookings).toEqual(['Lear']); // never run again
      // The model was shown the given result as the tool's answer, and replied with it.
      const r = await app.get(BookingAgent).loop.get('chat-booked');
      expect(r).toMatchObject({
        status: 'done',
        reply: { content: 'booked Lear, ref B-7' },
      });
    });

    it('a run a Redis failover may have cut: the page says so and how to go on, and offers no finding the store would refuse', async () => {
      // What RedisCheckpointStore reports of a run a replaced master wrote last (the real
      // failover: test/stores/redis-failover.e2e-spec.ts); this store is SQLite.
      const store = app.get(CheckpointStore);
      const failover = { lostHistory: 'a'.repeat(40), history: 'b'.repeat(40) };
      store.failover = (runId) =>
        Promise.resolve(runId === 'order-failover' ? failover : undefined);
      try {
        await page.goto(`${url}#/runs/order-failover`);
        const note = page.locator('#failover');
        await note.waitFor();
        expect(await note.innerText()).toMatch(
          /failover may have lost[\s\S]*a{40}[\s\S]*runs restored --failover/,
        );
        await page.locator('#doubt tbody tr').waitFor();
        expect(await page.locator('#doubt button.ran').count()).toBe(0);
        expect(await page.locator('#doubt button.not-run').count()).toBe(0);
        expect((await apiRun('order-failover')).failover).toEqual(failover);
        // Another run's page says nothing of it.
        expect((await apiRun('order-bad')).failover).toBeUndefined();
      } finally {
        Reflect.deleteProperty(store, 'failover');
      }
      expect((await apiRun('order-failover')).failover).toBeUndefined();
      expect(charges('order-failover')).toBe(1);
    });

    it('the API: a bad finding is a 400 with its reason, a finished run a 409; nothing is stored', async () => {
      await page.goto(`${url}#/runs/order-bad`);
      await page.locator('#doubt button.ran').waitFor();
      const token = (await page.getAttribute(
        'meta[name="agent-adapter-csrf"]',
        'content',
      ))!;
      const post = (runId: string, body: object) =>
        page.evaluate(
          async ([runId, body, token]) => {
            const res = await fetch(`/ops/runs/api/runs/${runId}/resolve`, {
              method: 'POST',
              headers: {
                'content-type': 'application/json',
                'x-agent-adapter-csrf': token,
              },
              body: JSON.stringify(body),
            });
            return [
              res.status,
              ((await res.json()) as { message: string }).message,
            ] as const;
          },
          [runId, body, token] as const,
        );
      const before = await headOf('order-bad');

      const [notInDoubt, why1] = await post('order-bad', {
        call: 'hold#0',
        ran: true,
        by: 'ann',
      });
      expect(notInDoubt).toBe(400);
      expect(why1).toMatch(/hold#0/);
      expect(why1).toMatch(/pay#0 \(charge_card\)/); // names the calls that are in doubt
      const [both, why2] = await post('order-bad', {
        call: 'pay#0',
        ran: true,
        result: 'x',
        error: { name: 'E', message: 'm' },
      });
      expect([both, why2]).toEqual([400, expect.stringMatching(/not both/)]);
      const [noRan] = await post('order-bad', { call: 'pay#0' });
      expect(noRan).toBe(400);
      const [unknown, why3] = await post('order-bad', {
        call: 'pay#0',
        ran: false,
        force: true,
      });
      expect([unknown, why3]).toEqual([400, expect.stringMatching(/"force"/)]);
      // Nothing was written: the same head, the charge not run again.
      expect(await headOf('order-bad')).toEqual(before);
      expect(charges('order-bad')).toBe(1);

      // A run already decided and finished: a conflict.
      const [ended] = await post('order-charged', {
        call: 'pay#0',
        ran: false,
      });
      expect(ended).toBe(409);
      expect(charges('order-charged')).toBe(1);
      expect((await app.get(FlowRunner).get('order-bad')).status).toBe(
        'running',
      );
    });
  },
);
