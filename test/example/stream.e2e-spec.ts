/**
 * Run streams over HTTP in the example app (server-sent events): an order's progress read by a
 * client that leaves mid-run and comes back (Last-Event-ID), across a SIGKILL of the worker that
 * drove it and a recovery by another one; the support agent's conversation streamed as it is
 * saved. Separate worker processes on one SQLite file, as users run them.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { WorkerProcess } from '../../src/worker-process';
import { readSse, type SseEvent } from '../utils/sse';

jest.setTimeout(120_000);

const HOOK = ['-r', join(__dirname, '..', 'utils', 'ts-register.js')];
const KEY = 'a-test-key-that-is-32-bytes-long!';

interface Entry {
  offset: number;
  superstep: number;
  node: string;
  data: { step?: string; role?: string; content?: string };
}

const entryOf = (e: SseEvent) => JSON.parse(e.data) as Entry;

describe('run streams over HTTP (the example app, child processes, SQLite file)', () => {
  const workers: WorkerProcess[] = [];
  const dirs: string[] = [];
  afterEach(async () => {
    await Promise.all(workers.splice(0).map((w) => w.kill()));
  });
  afterAll(() => {
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

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

  const post = (url: string, body: object) =>
    fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });

  it('a client that leaves and comes back, across a SIGKILL and a recovery elsewhere, gets each event once, in order', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'aa-example-stream-'));
    dirs.push(dir);
    // Slow tools, so the client reads while the order runs; worker-a dies inside the mail.
    const a = worker('worker-a', dir, {
      CRASH_IN: 'email_tickets',
      TOOL_DELAY_MS: '300',
    });
    const urlA = await a.url();
    const placed = await post(`${urlA}/orders?wait=false`, {
      show: 'Hamlet',
      seats: 2,
    });
    expect(placed.status).toBe(202);
    const { runId } = (await placed.json()) as { runId: string };
    const stream = (url: string) => `${url}/orders/${runId}/stream`;

    // The client reads the first event and leaves.
    const first = await readSse(stream(urlA), { max: 1 });
    expect(first).toMatchObject({ status: 200, end: 'left' });
    // It comes back with the id it got; the worker dies under it, inside the mail.
    const second = await readSse(stream(urlA), {
      lastEventId: first.events[0]!.id!,
    });
    expect(second.status).toBe(200);
    await expect(a.exited).resolves.toEqual({ code: null, signal: 'SIGKILL' });
    expect(second.end).not.toBe('left');

    // Another worker recovers the order at boot; the client reconnects there with its last id.
    const b = worker('worker-b', dir);
    const urlB = await b.url();
    const seen = [...first.events, ...second.events];
    const third = await readSse(stream(urlB), {
      lastEventId: seen[seen.length - 1]!.id!,
    });
    expect(third).toMatchObject({ status: 200, end: 'ended' });
    const all = [...seen, ...third.events];
    expect(all.map((e) => e.id)).toEqual(['0', '1', '2']);
    expect(all.map((e) => entryOf(e).data.step)).toEqual([
      'held',
      'paid',
      'sent',
    ]);
    expect(all.map((e) => entryOf(e).offset)).toEqual([0, 1, 2]);
    // The mail ran again on worker-b (its superstep was cut): its event is there once.
    expect(entryOf(all[2]!).node).toBe('send');
    // Read whole from the start, on the worker that finished it: the same three events.
    const whole = await readSse(stream(urlB));
    expect(whole.events).toEqual(all);
    // Unknown order: 404 before any event; a Last-Event-ID that is no offset: 400.
    expect((await readSse(`${urlB}/orders/nope/stream`)).status).toBe(404);
    expect((await readSse(stream(urlB), { lastEventId: 'x1' })).status).toBe(
      400,
    );
  });

  it('the support agent streams its conversation: each saved message once, from any offset', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'aa-example-stream-'));
    dirs.push(dir);
    const w = worker('worker-s', dir);
    const url = await w.url();
    const order = await post(`${url}/orders`, { show: 'Lear', seats: 1 });
    const { runId: orderId } = (await order.json()) as { runId: string };
    const asked = await post(`${url}/support?wait=false`, {
      message: `Where is my order ${orderId}?`,
    });
    expect(asked.status).toBe(202);
    const location = asked.headers.get('location')!;
    expect(location).toMatch(/^\/support\/[^/]+\/stream$/);
    const read = await readSse(`${url}${location}`);
    expect(read.end).toBe('ended');
    const messages = read.events.map((e) => entryOf(e).data);
    expect(messages.map((m) => m.role)).toEqual([
      'assistant',
      'tool',
      'assistant',
    ]);
    expect(messages[2]!.content).toMatch(
      /^Here is your order: order .* is done/,
    );
    // The conversation as saved: the same messages after the system and user ones.
    const conversation = (await (
      await fetch(`${url}${location.replace(/\/stream$/, '')}`)
    ).json()) as { messages: unknown[]; status: string };
    expect(conversation.status).toBe('done');
    expect(messages).toEqual(conversation.messages.slice(2));
    const tail = await readSse(`${url}${location}?from=2`);
    expect(tail.events.map((e) => e.id)).toEqual(['2']);
  });
});
