/**
 * Issue 16, item 2: whatever a run holds is shown as text. Script-looking values go into every
 * field the pages show: through the application (state values, tool arguments, a tool's error
 * message, a denial's reason and decider, a tool loop's name), re-sealed with the key (node and
 * tool names, which the API refuses), and straight into the SQLite rows like an attacker with store
 * access (a run head's status, flow, owner and run id; a checkpoint row's status, which then fails
 * verification). In Chromium, with the page's CSP and without it (so that escaping alone is
 * tested), no script runs, no element is injected, and the values are visible as text.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import {
  Injectable,
  Module,
  type INestApplication,
  type OnModuleInit,
} from '@nestjs/common';
import { KeyRing, SQLCheckpointStore } from 'agent-adapter';
import { openCall, sealCall } from 'agent-adapter/exec/durable/records';
import type { ChatModel } from 'agent-adapter/loop/chat-model';
import {
  Flow,
  FlowRunner,
  Node,
  Tool,
  ToolLoopRunner,
} from 'agent-adapter/nest';
import type { Browser } from 'playwright-core';
import { KEY, Ledger, TicketsFlow } from '../nest/fixtures/tickets.fixtures';
import { editSqlCall } from '../stores/sql.fixtures';
import {
  crashIn,
  describeInChromium,
  launchChromium,
  viewerApp,
} from './viewer.fixtures';

/** Each variant sets window.__xss if it ever runs. */
const P =
  'x"><img src=x onerror=window.__xss=1><script>window.__xss=2</script>' +
  "<svg onload=window.__xss=3>'><a href=javascript:window.__xss=4>";
const MARK = '<img src=x onerror=window.__xss=1>';

@Injectable()
class Boom {
  @Tool({ name: 'boom' })
  async boom(_a: { n: number }): Promise<never> {
    throw new Error(P);
  }
}

class BoomState {
  n = 1;
}

@Flow('boom', { state: BoomState })
class BoomFlow {
  constructor(private readonly tool: Boom) {}
  @Node({ start: true, end: true })
  async go(s: BoomState): Promise<Partial<BoomState>> {
    return { n: await this.tool.boom({ n: s.n }) };
  }
}

/** A tool loop named with the payload (names of loops are free text): shown in the flow filter. */
@Injectable()
class Agents implements OnModuleInit {
  constructor(private readonly loops: ToolLoopRunner) {}
  onModuleInit(): void {
    const model: ChatModel = {
      complete: () => Promise.reject(new Error('never asked')),
    };
    this.loops.define(P, { model, tools: [] });
  }
}

@Module({ providers: [Boom, BoomFlow, Agents] })
class XssModule {}

describeInChromium(
  'run viewer: stored values stay text (headless Chromium)',
  () => {
    let dir = '';
    let path = '';
    const ledger = new Ledger();
    let app: INestApplication;
    let url = '';
    let browser: Browser;

    beforeAll(async () => {
      dir = mkdtempSync(join(tmpdir(), 'aa-viewer-xss-'));
      path = join(dir, 'runs.db');
      await crashIn(path, ledger, 'charge_card', 'xss-doubt');
      ({ app, url } = await viewerApp(path, ledger, [], {
        imports: [XssModule],
      }));
      const runner = app.get(FlowRunner);
      await runner.start(
        TicketsFlow,
        { show: P, seats: 1 },
        { runId: 'xss-state' },
      );
      await runner.start('refund', { order: P }, { runId: 'xss-pending' });
      // The same, its head left as written: its page offers the decision, showing the arguments.
      await runner.start('refund', { order: P }, { runId: 'xss-waiting' });
      await runner.start('refund', { order: 'o-2' }, { runId: 'xss-denied' });
      await runner
        .resume('refund', 'xss-denied', { approved: false, by: P, reason: P })
        .catch(() => undefined);
      await runner
        .start('boom', { n: 1 }, { runId: 'xss-error' })
        .catch(() => undefined);

      // With the key: node and tool names the API would refuse, in the run in doubt's call records.
      const db = new Database(path);
      const ring = KeyRing.from(KEY);
      // The store reads the records (kept in the calls table or in checkpoint rows); the edits
      // go below it.
      const reader = new SQLCheckpointStore({
        type: 'better-sqlite3',
        database: path,
      });
      const { calls: rows } = await reader.history('xss-doubt');
      await reader.close();
      const raw = {
        query: (sql: string, params: unknown[]) =>
          Promise.resolve(
            /^\s*SELECT/i.test(sql)
              ? db.prepare(sql).all(...params)
              : db.prepare(sql).run(...params),
          ),
      };
      for (const row of rows) {
        const call = openCall(ring, row);
        if (call.tool !== 'charge_card') continue;
        const sealed = sealCall(ring, { ...call, node: P, tool: P }).sealed;
        await editSqlCall(
          raw,
          { calls: '"aa_calls"', checkpoints: '"aa_checkpoints"' },
          () => '?',
          row.runId,
          row,
          sealed,
        );
      }
      // Without the key, like anyone with write access to the store: the unsigned columns.
      db.prepare(
        `UPDATE "aa_runs" SET status = ?, owner = ? WHERE run_id = 'xss-state'`,
      ).run(P, P);
      db.prepare(
        `UPDATE "aa_runs" SET flow = ? WHERE run_id = 'xss-pending'`,
      ).run(P);
      db.prepare(
        `UPDATE "aa_checkpoints" SET status = ? WHERE run_id = 'xss-state' AND step = 1`,
      ).run(P);
      db.prepare(
        `INSERT INTO "aa_runs" (run_id, flow, step, status, segment, calls, sealed, owner, updated_at) VALUES (?, ?, 1, ?, 1, 0, ?, ?, ?)`,
      ).run(P, P, P, P, P, Date.now());
      db.close();

      browser = await launchChromium();
    });

    afterAll(async () => {
      await browser?.close();
      await app?.close();
      rmSync(dir, { recursive: true, force: true });
    });

    const runs = [
      'xss-state',
      'xss-pending',
      'xss-waiting',
      'xss-denied',
      'xss-error',
      'xss-doubt',
      P,
    ];

    it.each([
      ['with the page CSP', false],
      ['with CSP bypassed (escaping alone)', true],
    ])(
      '%s: no script runs, nothing is injected, the values read as text',
      async (_what, bypassCSP) => {
        const context = await browser.newContext({ bypassCSP });
        const page = await context.newPage();
        const errors: string[] = [];
        page.on('pageerror', (e) => errors.push(e.message));
        page.on('dialog', (d) => void d.dismiss());

        /** What the page shows, after checking nothing ran and no element came from a value. */
        async function shown(): Promise<string> {
          await page.waitForTimeout(100); // an onerror/onload would have fired by now
          const state = await page.evaluate(() => {
            const g = globalThis as unknown as {
              __xss?: unknown;
              document: {
                querySelectorAll(s: string): { length: number };
                getElementById(id: string): { innerText: string } | null;
              };
            };
            return {
              xss: g.__xss,
              injected: g.document.querySelectorAll(
                '#app img, #app script, #app svg, #app iframe, #app a[href^="javascript"], [onerror], [onload]',
              ).length,
              text: g.document.getElementById('app')?.innerText ?? '',
            };
          });
          expect(state.xss).toBeUndefined();
          expect(state.injected).toBe(0);
          return state.text;
        }

        await page.goto(url);
        await page.waitForSelector('#runs tbody tr[data-run]');
        const list = await shown();
        expect(list).toContain(MARK);
        // The head's status column was written below the store: its seal fails, so the badge says
        // so instead of showing it (nothing of it reaches the page); the flow filter lists the loop.
        const badge = page
          .locator(`tr[data-run="xss-state"] [data-badge]`)
          .first();
        expect(await badge.textContent()).toBe('corrupt');
        expect(await badge.getAttribute('class')).toBe('badge b-failed');
        expect(await page.locator('#flow option').allTextContents()).toContain(
          P,
        );
        expect(
          await page
            .locator(`tr[data-run="${P.replace(/"/g, '\\"')}"]`)
            .count(),
        ).toBe(1);

        const texts: Record<string, string> = {};
        for (const runId of runs) {
          await page.goto(`${url}#/runs/${encodeURIComponent(runId)}`);
          await page.waitForSelector('#timeline, #app > p.error');
          texts[runId] = await shown();
          expect(texts[runId]).toContain(MARK);
        }
        // Each field, as text: state values and tool results, the head's status, owner and a corrupt
        // checkpoint's status; the pending arguments and the head's flow; the decider and reason; the
        // tool's error; the re-sealed node and tool names (calls and the in-doubt list).
        expect(texts['xss-state']).toContain(`show = ${P.slice(0, 80)}`); // strings shown as they are, cut at 120
        expect(texts['xss-state']).toMatch(/does not verify|signature/);
        expect(texts['xss-waiting']).toContain(
          `Waiting: refund {"order":${JSON.stringify(P).slice(0, 80)}`,
        );
        // An edited head (its flow column): shown as text, marked as not verifying, no action.
        expect(texts['xss-pending']).toContain(`flow ${P}`);
        expect(texts['xss-pending']).toMatch(/does not verify/);
        expect(texts['xss-denied']).toContain(`was denied by ${P}: ${P}`);
        // The decisions table: who and why, as text.
        expect(texts['xss-denied']).toMatch(
          new RegExp(`deny\t[^\n]*\t${escapeRe(P)}\t[^\n]*\t${escapeRe(P)}`),
        );
        expect(texts['xss-error']).toContain(`ToolFailed: ${P}`);
        // The in-doubt table: the call id (node#index), then the tool.
        expect(texts['xss-doubt']).toContain(`${P}#0\t${P}`);
        expect(errors).toEqual([]);
        await context.close();
      },
    );
  },
);

function escapeRe(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
