/**
 * Queues with real processes (issue 18): three worker processes take runs from one queue whose
 * concurrency is 2; the fsync'd ledger (each tool call's begin and end, timed) shows never more
 * than two runs in a call at once, and every call of every run once. Fifty enqueues with one
 * dedupe key, from two processes at once, make one run. One worker is SIGKILLed while it drives
 * queued runs and the others finish them.
 */
import { killAll } from '../utils/child-process';
import { describeWithService } from '../utils/services';
import { sandboxes, type Sandbox } from './harness';
import { serviceOf, type StoreKind } from './stores';
import type { LedgerLine } from './worker';

const RUNS = 12;

/**
 * The most tool calls the ledger shows in progress at one moment (each call from its begin to its
 * end; a call whose worker was killed inside it, to `killedAt`).
 */
function mostAtOnce(ledger: LedgerLine[], killedAt = Infinity): number {
  const ends = new Map(
    ledger
      .filter((l) => l.phase === 'end')
      .map((l) => [`${l.pid} ${l.tool} ${l.key}`, l.at!]),
  );
  const edges = ledger
    .filter((l) => l.phase === 'begin')
    .flatMap((l) => [
      [l.at!, 1] as const,
      [ends.get(`${l.pid} ${l.tool} ${l.key}`) ?? killedAt, -1] as const,
    ])
    // At one millisecond, ends before begins: a call that ended then is not beside the next.
    .sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  let now = 0;
  let most = 0;
  for (const [, step] of edges) most = Math.max(most, (now += step));
  return most;
}

/** Waits until the workers together printed `n` distinct `TOOK <id> ...` lines; returns them. */
async function took(
  workers: Array<{ lines: readonly string[] }>,
  n: number,
  timeoutMs: number,
): Promise<Map<string, string>> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const seen = new Map<string, string>();
    for (const w of workers)
      for (const line of w.lines) {
        const m = /^TOOK (\S+) (.*)$/.exec(line);
        if (m) seen.set(m[1]!, m[2]!);
      }
    if (seen.size >= n) return seen;
    if (Date.now() > until)
      throw new Error(`${seen.size} of ${n} runs taken in ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

function fleet(
  t: Sandbox,
  n: number,
  extra: string[] = [],
  env: Record<string, string> = {},
) {
  return Array.from({ length: n }, () =>
    t.start(
      ['takeover', '--every-ms', '50', '--queue-concurrency', '2', ...extra],
      { TOOL_DELAY_MS: '40', ...env },
    ),
  );
}

function queueSuite(kind: StoreKind): void {
  const boxes = sandboxes(kind, 'queues');
  afterAll(async () => {
    await killAll();
    await boxes.cleanup();
  });

  it(`concurrency 2 over three processes: ${RUNS} queued runs, never three in a call at once, every call once`, async () => {
    const t = boxes.fresh();
    const workers = fleet(t, 3);
    for (const w of workers) await w.waitForLine(/^STARTED$/);
    const enqueuer = t.start([
      'enqueue',
      '--count',
      String(RUNS),
      '--run-prefix',
      t.runId,
    ]);
    const { enqueued } = await enqueuer.report();
    expect(enqueued?.filter((e) => e.created)).toHaveLength(RUNS);
    const outcomes = await took(workers, RUNS, 60_000);
    await Promise.all(workers.map((w) => w.kill()));
    for (const json of outcomes.values())
      expect(JSON.parse(json)).toMatchObject({ status: 'done' });
    const ledger = t.ledger();
    for (const tool of ['hold_seats', 'charge_card', 'email_tickets'])
      expect(
        ledger.filter((l) => l.tool === tool && l.phase === 'begin'),
      ).toHaveLength(RUNS);
    // The limit held, and bound: two at once happened, three never.
    expect(mostAtOnce(ledger)).toBe(2);
    // More than one process took runs from the queue.
    expect(new Set(ledger.map((l) => l.pid)).size).toBeGreaterThan(1);
  }, 90_000);

  it('a worker SIGKILLed while it drives queued runs: its places stay taken until another worker finishes them, then the queue goes on', async () => {
    const t = boxes.fresh();
    const lease = ['--lease-ms', '1000'];
    const [doomed] = fleet(t, 1, lease, { HANG_IN: 'hold_seats' });
    await doomed!.waitForLine(/^STARTED$/);
    await t
      .start(['enqueue', '--count', '4', '--run-prefix', t.runId])
      .report();
    // Both places taken by the doomed worker, each run inside its (idempotent) hold.
    for (
      let i = 0;
      doomed!.lines.filter((l) => l === 'READY hold_seats').length < 2;
      i++
    ) {
      if (i > 1_000)
        throw new Error(`no two holds: ${doomed!.lines.join(' | ')}`);
      await new Promise((r) => setTimeout(r, 20));
    }
    const killed = Date.now();
    await doomed!.kill();
    const [live] = fleet(t, 1, lease);
    const outcomes = await took([live!], 4, 30_000);
    expect(Date.now() - killed).toBeLessThan(20_000);
    await live!.kill();
    for (const json of outcomes.values())
      expect(JSON.parse(json)).toMatchObject({ status: 'done' });
    const ledger = t.ledger();
    const begins = (tool: string) =>
      ledger.filter((l) => l.tool === tool && l.phase === 'begin').length;
    expect(begins('hold_seats')).toBe(6); // the two cut short ran again
    expect(begins('charge_card')).toBe(4);
    expect(mostAtOnce(ledger, killed)).toBeLessThanOrEqual(2);
  }, 60_000);

  it('50 enqueues with one dedupe key, from two processes at once, make one run, charged once', async () => {
    const t = boxes.fresh();
    const key = ['--dedupe-key', `order-${t.runId}`, '--count', '25'];
    const [a, b] = [t.start(['enqueue', ...key]), t.start(['enqueue', ...key])];
    const reports = await Promise.all([a.report(), b.report()]);
    const all = reports.flatMap((r) => r.enqueued ?? []);
    expect(all).toHaveLength(50);
    expect(all.filter((e) => e.created)).toHaveLength(1);
    expect(new Set(all.map((e) => e.runId)).size).toBe(1);
    const [worker] = fleet(t, 1);
    const outcomes = await took([worker!], 1, 30_000);
    await worker!.kill();
    expect([...outcomes.keys()]).toEqual([all[0]!.runId]);
    expect(
      t.ledger().filter((l) => l.tool === 'charge_card' && l.phase === 'begin'),
    ).toHaveLength(1);
  }, 60_000);
}

for (const kind of ['postgres', 'redis', 'sqlite'] as const) {
  const service = serviceOf(kind);
  if (service)
    describeWithService(service, `queues (${kind})`, () => queueSuite(kind));
  else describe(`queues (${kind})`, () => queueSuite(kind));
}
