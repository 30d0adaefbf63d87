/**
 * The example app as users run it: separate worker processes on one SQLite file, killed with
 * SIGKILL inside a tool, started again. What really ran is read from the app's own ledger file.
 */
import {
  existsSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Charge } from '../../src/tickets/payment-provider';
import { WorkerProcess } from '../../src/worker-process';
import { ledgerLines } from './example-config';

// Child processes boot slowly on a loaded machine: each test gets two minutes.
jest.setTimeout(120_000);

const HOOK = ['-r', join(__dirname, '..', 'utils', 'ts-register.js')];
const KEY = 'a-test-key-that-is-32-bytes-long!';

describe('the example app, crashed and recovered (child processes, SQLite file)', () => {
  const workers: WorkerProcess[] = [];
  const dirs: string[] = [];
  afterEach(async () => {
    await Promise.all(workers.splice(0).map((w) => w.kill()));
  });
  afterAll(() => {
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  function dataDir(): string {
    const dir = mkdtempSync(join(tmpdir(), 'aa-example-crash-'));
    dirs.push(dir);
    return dir;
  }

  function worker(name: string, dir: string, env: Record<string, string> = {}) {
    const w = WorkerProcess.start(
      name,
      {
        DATA_DIR: dir,
        CHECKPOINT_KEY: KEY,
        WORKER_ID: name,
        LEASE_MS: '1000',
        ...env,
      },
      { nodeArgs: HOOK },
    );
    workers.push(w);
    return w;
  }

  const ledger = (dir: string) => readFileSync(join(dir, 'ledger.log'), 'utf8');
  /** The payment provider's ledger: one charge per idempotency key (see PaymentProvider). */
  const providerCharges = (dir: string): Charge[] =>
    readdirSync(join(dir, 'payments')).map(
      (f) =>
        JSON.parse(readFileSync(join(dir, 'payments', f), 'utf8')) as Charge,
    );

  function order(url: string, body: object = { show: 'Hamlet', seats: 2 }) {
    return fetch(`${url}/orders`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
  }

  async function json<T>(
    url: string,
    init?: RequestInit,
  ): Promise<[number, T]> {
    const response = await fetch(url, init);
    return [response.status, (await response.json()) as T];
  }

  /** Polls until `check` holds, or fails naming the last value. */
  async function eventually<T>(
    read: () => Promise<T>,
    check: (value: T) => boolean,
    timeoutMs = 20_000,
  ): Promise<T> {
    const until = Date.now() + timeoutMs;
    for (;;) {
      const value = await read();
      if (check(value)) return value;
      if (Date.now() > until)
        throw new Error(`still not there: ${JSON.stringify(value)}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  interface RunView {
    runId: string;
    status: string;
    step: number;
    state: { note?: string; payment?: string };
    needsDecision?: {
      calls: Array<{ callId: string; tool: string; idempotencyKey?: string }>;
    };
  }

  it('killed inside email_tickets: a new worker recovers the order at bootstrap; the card is charged once, one mail is sent', async () => {
    const dir = dataDir();
    const a = worker('worker-a', dir, { CRASH_IN: 'email_tickets' });
    const urlA = await a.url();
    await expect(order(urlA)).rejects.toThrow(); // the worker dies mid-request
    await expect(a.exited).resolves.toEqual({ code: null, signal: 'SIGKILL' });

    const b = worker('worker-b', dir);
    const urlB = await b.url();
    // The recovery's claim is a checkpoint of its own: step 4.
    const line = await b.waitFor(/recovered: done at step 4/);
    // The line names what the recovery did with the calls of the superstep the crash cut short
    // (hold_seats and charge_card finished in earlier supersteps: their results are in the state).
    expect(line).toMatch(
      /recovered: done at step 4; ran again email_tickets \(idempotent\)\.$/,
    );
    const runId = /Run "([^"]+)"/.exec(line)![1]!;
    const [status, run] = await json<RunView>(`${urlB}/orders/${runId}`);
    expect(status).toBe(200);
    expect(run).toMatchObject({
      status: 'done',
      step: 4,
      state: { note: 'tickets sent' },
    });

    const text = ledger(dir);
    // Finished before the crash: replayed, not run again.
    expect(ledgerLines(text, 'hold_seats')).toEqual([
      expect.stringContaining('worker=worker-a'),
    ]);
    expect(ledgerLines(text, 'charge_card')).toEqual([
      expect.stringContaining('worker=worker-a'),
    ]);
    // In doubt, idempotent: run again by worker-b with the same key; the provider sent one mail.
    const mails = ledgerLines(text, 'email_tickets');
    expect(mails).toEqual([
      expect.stringMatching(/worker=worker-a .*mailed the tickets/),
      expect.stringMatching(/worker=worker-b .*already sent this mail/),
    ]);
    const keyOf = (l: string) => /\(key (\S+)\)/.exec(l)?.[1];
    expect(keyOf(mails[0]!)).toBe(keyOf(mails[1]!));
    expect(readdirSync(join(dir, 'outbox'))).toHaveLength(1);

    // Nest closes the app on SIGTERM, then exits by the same signal.
    await expect(b.stop()).resolves.toEqual({ code: null, signal: 'SIGTERM' });
    // It drained: the runs it drove (none left here) were stopped at a boundary and released.
    expect(b.lines.join('\n')).toMatch(
      /Shut down: every run driven here stopped at a superstep boundary/,
    );
  });

  it('killed inside charge_card after the charge: bootstrap leaves it for a decision; rerun over HTTP, the provider (same key) charges once', async () => {
    const dir = dataDir();
    const a = worker('worker-a', dir, { CRASH_IN: 'charge_card' });
    await expect(order(await a.url())).rejects.toThrow();
    await a.exited;

    const b = worker('worker-b', dir);
    const url = await b.url();
    const line = await b.waitFor(/charge_card/);
    expect(line).toMatch(/needs a decision|in doubt/);
    const runId = /Run "([^"]+)"/.exec(line)![1]!;

    // Nothing was run or written by the refusal; the order's status says it needs a decision,
    // with what to check at the provider: the charge's arguments and its idempotency key.
    const [, before] = await json<RunView>(`${url}/orders/${runId}`);
    expect(before).toMatchObject({
      status: 'running',
      step: 1,
      needsDecision: {
        owner: 'worker-a',
        calls: [
          {
            callId: 'pay#0',
            tool: 'charge_card',
            args: { show: 'Hamlet', seats: 2 },
            why: 'started, no result recorded',
          },
        ],
      },
    });
    const charged = /\(key (\S+)\)/.exec(
      ledgerLines(ledger(dir), 'charge_card')[0]!,
    )![1]!;
    expect(before.needsDecision!.calls[0]!.idempotencyKey).toMatch(
      new RegExp(`^${charged.replace(/[^\w-]/g, '')}`),
    );
    const recover = (body: object) =>
      json<{ calls?: Array<{ tool: string }> } & RunView>(
        `${url}/orders/${runId}/recover`,
        {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify(body),
        },
      );
    const [refused, why] = await recover({});
    expect(refused).toBe(409);
    expect(why.calls).toEqual([
      { tool: 'charge_card', why: expect.any(String) },
    ]);
    expect(ledgerLines(ledger(dir), 'charge_card')).toHaveLength(1);

    // Rerun without looking: the charge runs again, with the same idempotency key, and the
    // provider, honouring it, returns the first charge instead of charging again.
    const [decided, run] = await recover({
      rerunInDoubt: true,
      by: 'ann',
      reason: 'rerun; the provider dedupes by key',
    });
    expect(decided).toBe(201);
    expect(run).toMatchObject({ status: 'done', step: 4 });
    expect(run.needsDecision).toBeUndefined();
    const charges = ledgerLines(ledger(dir), 'charge_card');
    expect(charges).toEqual([
      expect.stringMatching(/worker=worker-a .*charged 80 EUR/),
      expect.stringMatching(/worker=worker-b .*not charged again/),
    ]);
    const [charge] = providerCharges(dir);
    expect(providerCharges(dir)).toHaveLength(1);
    expect(run.state.payment).toBe(charge!.id);
    await b.stop();
  });

  /**
   * worker-a is killed inside charge_card (after the provider charged the card with CRASH_IN, before
   * it was called with CRASH_BEFORE); worker-b boots and leaves the order for a decision. Returns
   * worker-b's URL, the order and the call in doubt.
   */
  async function chargeInDoubt(
    dir: string,
    crash: 'CRASH_IN' | 'CRASH_BEFORE',
  ) {
    const a = worker('worker-a', dir, { [crash]: 'charge_card' });
    await expect(order(await a.url())).rejects.toThrow();
    await expect(a.exited).resolves.toEqual({ code: null, signal: 'SIGKILL' });
    const b = worker('worker-b', dir);
    const url = await b.url();
    const line = await b.waitFor(/needs a decision/);
    const runId = /Run "([^"]+)"/.exec(line)![1]!;
    const [, run] = await json<RunView>(`${url}/orders/${runId}`);
    const call = run.needsDecision!.calls[0]!;
    expect(call).toMatchObject({ callId: 'pay#0', tool: 'charge_card' });
    const resolve = (body: object) =>
      json<RunView & { message?: string }>(`${url}/orders/${runId}/resolve`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
    return { b, url, runId, key: call.idempotencyKey!, resolve };
  }

  it('the card WAS charged: the operator finds the charge by its idempotency key and resolves "ran" over HTTP; it never runs again, one charge', async () => {
    const dir = dataDir();
    const { b, key, resolve } = await chargeInDoubt(dir, 'CRASH_IN');
    // At the provider, by the key the order shows: the charge went through.
    const charge = JSON.parse(
      readFileSync(join(dir, 'payments', `${key}.json`), 'utf8'),
    ) as Charge;
    expect(charge).toMatchObject({ key, amount: '80 EUR' });

    const [status, run] = await resolve({
      call: 'pay#0',
      ran: true,
      result: charge.id,
      by: 'ann',
      reason: `${charge.id} found at the provider by the idempotency key`,
    });
    expect(status).toBe(201);
    expect(run).toMatchObject({
      status: 'done',
      state: { payment: charge.id, note: 'tickets sent' },
    });
    expect(run.needsDecision).toBeUndefined();
    // Never run again: the one ledger line is worker-a's; the provider holds one charge.
    expect(ledgerLines(ledger(dir), 'charge_card')).toEqual([
      expect.stringMatching(/worker=worker-a .*charged 80 EUR/),
    ]);
    expect(providerCharges(dir)).toEqual([charge]);
    // The flow went on: the tickets were mailed once.
    expect(ledgerLines(ledger(dir), 'email_tickets')).toHaveLength(1);
    // A second decision finds nothing in doubt: 409, still one charge.
    const [again] = await resolve({ call: 'pay#0', ran: false, by: 'bob' });
    expect(again).toBe(409);
    expect(providerCharges(dir)).toHaveLength(1);
    await b.stop();
  });

  it('the card was NOT charged (killed before the provider was called): resolved "did not run" over HTTP, it runs once, one charge', async () => {
    const dir = dataDir();
    const { b, key, resolve } = await chargeInDoubt(dir, 'CRASH_BEFORE');
    // Nothing at the provider for that key, nothing in the ledger.
    expect(existsSync(join(dir, 'payments', `${key}.json`))).toBe(false);
    expect(ledgerLines(ledger(dir), 'charge_card')).toEqual([]);

    const [status, run] = await resolve({
      call: 'pay#0',
      ran: false,
      by: 'ann',
      reason: 'no charge at the provider for this key',
    });
    expect(status).toBe(201);
    expect(run).toMatchObject({
      status: 'done',
      state: { note: 'tickets sent' },
    });
    expect(ledgerLines(ledger(dir), 'charge_card')).toEqual([
      expect.stringMatching(/worker=worker-b .*charged 80 EUR/),
    ]);
    const charges = providerCharges(dir);
    expect(charges).toEqual([expect.objectContaining({ key })]); // the same key
    expect(run.state.payment).toBe(charges[0]!.id);
    await b.stop();
  });

  it('a second worker booting beside a healthy one does not take its runs (leases)', async () => {
    const dir = dataDir();
    // worker-a's tools wait for a gate file: its order stays in flight while worker-b boots,
    // however slow the machine is.
    const gate = join(dir, 'gate');
    const a = worker('worker-a', dir, { TOOL_GATE: gate });
    const urlA = await a.url();
    const placed = order(urlA);
    await eventually(
      async () => (await json<{ runs: RunView[] }>(`${urlA}/orders`))[1].runs,
      (runs) => runs.length === 1 && runs[0]!.status === 'running',
    );

    const b = worker('worker-b', dir);
    await b.url();
    const held = await b.waitFor(/worker "worker-a" holds its lease until/);
    expect(held).toMatch(
      /until \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z .*not taken; retrying then/,
    );
    // In flight on a live worker, inside a tool: running, not a run that needs a decision.
    const [, listed] = await json<{ runs: RunView[] }>(`${urlA}/orders`);
    const [, inFlight] = await json<RunView>(
      `${await b.url()}/orders/${listed.runs[0]!.runId}`,
    );
    expect(inFlight.status).toBe('running');
    expect(inFlight.needsDecision).toBeUndefined();
    // B goes on looking for due work (its takeover) past worker-a's first lease (1 s), the gate
    // still shut: worker-a renews its lease, so B takes nothing.
    await b.waitFor(/Takeover: looking for due runs/, 10_000);
    await new Promise((r) => setTimeout(r, 1_500));
    expect(b.lines.join('\n')).not.toMatch(/recovered: /);
    writeFileSync(gate, '');

    const response = await placed;
    expect(response.status).toBe(201);
    const run = (await response.json()) as RunView;
    expect(run).toMatchObject({ status: 'done', step: 3 });

    // One boot summary, and no re-sweep: the takeover is it.
    expect(b.lines.join('\n')).not.toMatch(/re-sweep/);
    expect(
      b.lines.filter((l) => l.includes('Bootstrap recovery done')),
    ).toHaveLength(1);
    const text = ledger(dir);
    for (const tool of ['hold_seats', 'charge_card', 'email_tickets']) {
      expect(ledgerLines(text, tool)).toEqual([
        expect.stringContaining('worker=worker-a'),
      ]);
    }
    expect(b.lines.join('\n')).not.toMatch(/recovered: /);
    await Promise.all([a.stop(), b.stop()]);
  });
});
