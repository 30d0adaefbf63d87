import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Executor, FlowRunner, ToolRegistry } from 'agent-adapter';
import { KEY, ticketsFlow } from 'agent-adapter/testing/fixtures';
import { killAll } from '../utils/child-process';
import { describeWithService, suiteId } from '../utils/services';
import {
  Worker,
  keysOf,
  readLedger,
  sleep,
  spread,
  timings,
  trail,
} from './harness';
import {
  STORE_KINDS,
  dropStore,
  openStore,
  serviceOf,
  storeLocation,
  type StoreEnv,
  type StoreKind,
} from './stores';
import type { LedgerLine, Outcome } from './worker';

/**
 * Real crashes: worker processes (worker.ts) run the spec's tickets flow on a shared store and are
 * killed with SIGKILL at chosen points (a tool blocks after writing its `begin` ledger line and
 * says READY) and at random ones. The ledger file is the truth about what ran, outside the library.
 *
 * Runs once per persistent backend.
 */
const KINDS = STORE_KINDS;

const TOOLS = ['hold_seats', 'charge_card', 'email_tickets'] as const;

function isError(o: Outcome | undefined, name: string): boolean {
  return o !== undefined && 'error' in o && o.error === name;
}

function crashSuite(kind: StoreKind): void {
  const locations: StoreEnv[] = [];
  const dirs: string[] = [];

  let firstTiming = 0;
  beforeAll(() => {
    firstTiming = timings.length;
  });

  afterAll(async () => {
    await killAll();
    for (const env of locations) await dropStore(kind, env);
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
    const mine = timings.slice(firstTiming);
    if (mine.length) {
      console.log(
        `${kind}: ${mine.length} workers reported; boot ms (min / median / max) ${spread(mine.map((t) => t.bootMs))}; spawn → exit ms ${spread(mine.map((t) => t.wallMs))}`,
      );
    }
  });

  /** A private store location, ledger and run id; `start` launches a worker on them. */
  function fresh() {
    const dir = mkdtempSync(join(tmpdir(), 'aa-crash-'));
    dirs.push(dir);
    const env = storeLocation(kind, suiteId('crash'), dir);
    locations.push(env);
    const ledger = join(dir, 'ledger.jsonl');
    const runId = `order-${randomBytes(6).toString('hex')}`;
    return {
      dir,
      env,
      runId,
      ledger: () => readLedger(ledger),
      start: (args: string[], extra: Record<string, string> = {}) =>
        new Worker([...args, '--store', kind], {
          ...env,
          LEDGER: ledger,
          ...extra,
        }),
    };
  }

  /** Starts a run whose worker blocks inside `tool` and is killed there. */
  async function crashInside(t: ReturnType<typeof fresh>, tool: string) {
    const w = t.start(['run', '--run-id', t.runId], { HANG_IN: tool });
    await w.waitForLine(new RegExp(`^READY ${tool}$`));
    const exit = await w.kill();
    expect(exit.signal).toBe('SIGKILL');
    return w;
  }

  if (kind !== 'sqlite') {
    it('50 runs in 4 worker processes at once: every run finishes, every call ran exactly once', async () => {
      const t = fresh();
      const workers = [13, 13, 12, 12].map((count, i) =>
        t.start([
          'run-many',
          '--count',
          String(count),
          '--run-prefix',
          `w${i}`,
        ]),
      );
      const reports = await Promise.all(workers.map((w) => w.report()));
      const runs = Object.assign({}, ...reports.map((r) => r.runs)) as Record<
        string,
        Outcome
      >;
      expect(Object.keys(runs)).toHaveLength(50);
      expect(
        Object.values(runs).filter((o) => 'status' in o && o.status === 'done'),
      ).toHaveLength(50);
      const ledger = t.ledger();
      for (const tool of TOOLS) {
        const begins = ledger.filter(
          (l) => l.tool === tool && l.phase === 'begin',
        );
        expect(begins).toHaveLength(50);
        expect(new Set(begins.map((l) => l.key)).size).toBe(50);
      }
      const opened = await openStore(kind, t.env);
      try {
        expect(await opened.store.listUnfinished('tickets')).toEqual([]);
      } finally {
        await opened.close();
      }
    });

    it('50 runs in 4 worker processes, one killed midway: the others and a recoverer finish every run; only calls of the killed worker run twice', async () => {
      const t = fresh();
      const workers = [13, 13, 12, 12].map((count, i) =>
        t.start(
          [
            'run-many',
            '--count',
            String(count),
            '--run-prefix',
            `w${i}`,
            '--lease-ms',
            '1000',
          ],
          {
            TOOL_DELAY_MS: '30',
          },
        ),
      );
      const victim = workers[1]!;
      await victim.waitForLine(/^STARTED$/);
      await sleep(60 + Math.random() * 120);
      expect((await victim.kill()).signal).toBe('SIGKILL');
      await Promise.all(
        workers.filter((w) => w !== victim).map((w) => w.report()),
      );
      await sleep(1100); // the victim's leases run out
      const rescue = await t
        .start(['recover-all', '--rerun-in-doubt'])
        .report();
      const ledger = t.ledger();
      const opened = await openStore(kind, t.env);
      let started: string[];
      try {
        expect(await opened.store.listUnfinished('tickets')).toEqual([]);
        const { runs } = await opened.store.list({
          flow: 'tickets',
          limit: 100,
        });
        // Every run that was started (has a checkpoint) finished. The victim may have died before
        // saving the first checkpoint of some of its runs: those never started, and ran nothing.
        expect(runs.every((r) => r.status === 'done')).toBe(true);
        started = runs.map((r) => r.runId);
        expect(started.filter((id) => !id.startsWith('w1-'))).toHaveLength(37);
      } finally {
        await opened.close();
      }
      for (const tool of TOOLS) {
        const begins = ledger.filter(
          (l) => l.tool === tool && l.phase === 'begin',
        );
        expect(new Set(begins.map((l) => l.key)).size).toBe(started.length); // no call lost
        const byKey = new Map<string, LedgerLine[]>();
        for (const l of begins)
          byKey.set(l.key, [...(byKey.get(l.key) ?? []), l]);
        for (const lines of byKey.values()) {
          // A call ran twice only if the killed worker had begun it (it was in doubt).
          if (lines.length > 1) expect(lines[0]!.pid).toBe(victim.pid);
          expect(lines.length).toBeLessThanOrEqual(2);
        }
      }
      expect(rescue.runs).toBeDefined();
    });
  }

  it('a worker killed inside email_tickets: recovery asks for a decision, then reruns only the mail, with the same key', async () => {
    const t = fresh();
    const w1 = await crashInside(t, 'email_tickets');
    const crashed = t.ledger();
    const names = { [w1.pid]: 'w1' };
    expect(TOOLS.map((tool) => trail(crashed, tool, names))).toEqual([
      ['begin:w1', 'end:w1'],
      ['begin:w1', 'end:w1'],
      ['begin:w1'],
    ]);

    const w2 = await t.start(['recover', '--run-id', t.runId]).report();
    expect(w2.outcome).toEqual({
      error: 'RecoveryNeedsDecision',
      message: expect.any(String),
      calls: [['email_tickets', expect.any(String)]],
    });
    expect(t.ledger()).toEqual(crashed); // fail closed: nothing ran

    const w3 = await t
      .start(['recover', '--run-id', t.runId, '--rerun-in-doubt'])
      .report();
    expect(w3.outcome).toEqual({
      status: 'done',
      runId: t.runId,
      step: 4, // start, three supersteps, and the claim
      note: 'sent Hamlet',
    });
    const ledger = t.ledger();
    Object.assign(names, { [w2.pid]: 'w2', [w3.pid]: 'w3' });
    expect(TOOLS.map((tool) => trail(ledger, tool, names))).toEqual([
      ['begin:w1', 'end:w1'],
      ['begin:w1', 'end:w1'],
      ['begin:w1', 'begin:w3', 'end:w3'],
    ]);
    for (const tool of TOOLS) expect(keysOf(ledger, tool).size).toBe(1);

    // What the store says, read here with the same key.
    const opened = await openStore(kind, t.env);
    try {
      const runner = new FlowRunner(new Executor(new ToolRegistry()), {
        checkpoints: opened.store,
        checkpointKey: KEY,
      });
      const stored = await runner.get(ticketsFlow(), t.runId);
      expect(stored).toMatchObject({ status: 'done', step: 4 });
      expect(stored.state.note).toBe('sent Hamlet');
    } finally {
      await opened.close();
    }
  });

  it('two workers recover one crashed run at the same moment: one finishes it, the other is refused before it runs anything', async () => {
    const t = fresh();
    const w1 = await crashInside(t, 'email_tickets');
    // Both read the run, then wait at their claim; released together, they race on one step.
    const racers = [0, 1].map(() =>
      t.start([
        'recover',
        '--run-id',
        t.runId,
        '--rerun-in-doubt',
        '--barrier',
      ]),
    );
    await Promise.all(racers.map((r) => r.waitForLine(/^ARMED$/)));
    for (const r of racers) r.go();
    const reports = await Promise.all(racers.map((r) => r.report()));

    const winners = reports.filter(
      (r) => r.outcome && 'status' in r.outcome && r.outcome.status === 'done',
    );
    const losers = reports.filter((r) =>
      isError(r.outcome, 'CheckpointConflict'),
    );
    expect(winners).toHaveLength(1);
    expect(losers).toHaveLength(1);
    const [winner, loser] = [winners[0]!, losers[0]!];

    const ledger = t.ledger();
    expect(ledger.filter((l) => l.pid === loser.pid)).toEqual([]);
    const names = { [w1.pid]: 'w1', [winner.pid]: 'winner' };
    expect(TOOLS.map((tool) => trail(ledger, tool, names))).toEqual([
      ['begin:w1', 'end:w1'],
      ['begin:w1', 'end:w1'],
      ['begin:w1', 'begin:winner', 'end:winner'],
    ]);
    for (const tool of TOOLS) expect(keysOf(ledger, tool).size).toBe(1);
  });

  it('two workers started at the same moment without a barrier: exactly one finishes, and nothing but the cut superstep runs again', async () => {
    const t = fresh();
    const w1 = await crashInside(t, 'email_tickets');
    const racers = [0, 1].map(() =>
      t.start(['recover', '--run-id', t.runId, '--rerun-in-doubt']),
    );
    const reports = await Promise.all(racers.map((r) => r.report()));
    const done = reports.filter(
      (r) => r.outcome && 'status' in r.outcome && r.outcome.status === 'done',
    );
    const lost = reports.filter((r) =>
      isError(r.outcome, 'CheckpointConflict'),
    );
    expect(done).toHaveLength(1);
    expect(lost).toHaveLength(1);
    const [winner, loser] = [done[0]!, lost[0]!];

    // If the loser read the run only after the winner had claimed it and logged `started` for
    // the mail, that call looked in doubt to it too: with rerunInDoubt it claimed the run from
    // the live winner and sent the mail itself, and the winner was fenced after its own mail
    // had gone out. (Explicit recover does not look at leases.) The key is the same throughout.
    const ledger = t.ledger();
    const names = {
      [w1.pid]: 'w1',
      [winner.pid]: 'winner',
      [loser.pid]: 'loser',
    };
    expect(trail(ledger, 'hold_seats', names)).toEqual(['begin:w1', 'end:w1']);
    expect(trail(ledger, 'charge_card', names)).toEqual(['begin:w1', 'end:w1']);
    const mail = trail(ledger, 'email_tickets', names);
    expect(mail.slice(0, 1)).toEqual(['begin:w1']);
    expect(mail.filter((m) => m.endsWith(':winner'))).toEqual([
      'begin:winner',
      'end:winner',
    ]);
    expect([[], ['begin:loser', 'end:loser']]).toContainEqual(
      mail.filter((m) => m.endsWith(':loser')),
    );
    expect(keysOf(ledger, 'email_tickets').size).toBe(1);
    if (mail.length > 3)
      console.log(
        `unsynchronised race (${kind}): the loser took over a live recovery and sent the mail too: ${mail.join(', ')}`,
      );
  });

  it('a worker cut off while its tool runs is fenced: it saves nothing and runs nothing more', async () => {
    const t = fresh();
    const release = join(t.dir, 'release');
    const a = t.start(['run', '--run-id', t.runId], {
      HANG_IN: 'hold_seats',
      RELEASE_FILE: release,
    });
    await a.waitForLine(/^READY hold_seats$/);

    // hold_seats is idempotent: no decision is needed, B reruns it and finishes the run.
    const b = await t
      .start(['recover', '--run-id', t.runId, '--rerun-in-doubt'])
      .report();
    expect(b.outcome).toMatchObject({ status: 'done', note: 'sent Hamlet' });

    writeFileSync(release, '');
    const ra = await a.report();
    expect(ra.outcome).toMatchObject({ error: 'CheckpointConflict' });

    const ledger = t.ledger();
    const names = { [a.pid]: 'A', [b.pid]: 'B' };
    expect(TOOLS.map((tool) => trail(ledger, tool, names))).toEqual([
      ['begin:A', 'begin:B', 'end:B', 'end:A'],
      ['begin:B', 'end:B'],
      ['begin:B', 'end:B'],
    ]);
    expect(keysOf(ledger, 'hold_seats').size).toBe(1);
  });

  it("recoverAll leaves a live worker's run alone, and takes it over once the worker is killed and its lease has run out", async () => {
    const t = fresh();
    const leaseMs = 2_000; // renewed every 667 ms: generous for a loaded machine
    const a = t.start(
      ['run', '--run-id', t.runId, '--lease-ms', `${leaseMs}`],
      {
        HANG_IN: 'email_tickets',
      },
    );
    await a.waitForLine(/^READY email_tickets$/);

    const before = t.ledger();
    const early = await t.start(['recover-all', '--rerun-in-doubt']).report();
    // Not taken: left out of the map, or reported as held by its live owner.
    const skipped = early.runs?.[t.runId];
    if (skipped !== undefined)
      expect(skipped).toMatchObject({ error: 'RunLeaseHeld' });
    expect(Object.keys(early.runs ?? {})).toEqual(
      skipped === undefined ? [] : [t.runId],
    );
    expect(t.ledger()).toEqual(before);
    expect(a.child.exitCode).toBeNull(); // untouched, still inside the tool

    await a.kill();
    await sleep(leaseMs + 100);
    const late = await t.start(['recover-all', '--rerun-in-doubt']).report();
    expect(late.runs).toEqual({
      [t.runId]: expect.objectContaining({ status: 'done' }),
    });
    const names = { [a.pid]: 'A', [late.pid]: 'R' };
    expect(trail(t.ledger(), 'email_tickets', names)).toEqual([
      'begin:A',
      'begin:R',
      'end:R',
    ]);
    expect(trail(t.ledger(), 'charge_card', names)).toEqual([
      'begin:A',
      'end:A',
    ]);
  });

  it('killed at random points, a run is always recovered to done, finished supersteps never run again, and every rerun has the same key', async () => {
    const rounds = 5;
    const results = await Promise.all(
      Array.from({ length: rounds }, async () => {
        const t = fresh();
        const w = t.start(['run', '--run-id', t.runId], {
          TOOL_DELAY_MS: '15',
        });
        await w.waitForLine(/^STARTED$/);
        const delay = Math.floor(Math.random() * 120);
        await sleep(delay);
        const exit = await w.kill();
        const r = await t
          .start(['recover', '--run-id', t.runId, '--rerun-in-doubt'])
          .report();
        return { t, w, r, exit, delay };
      }),
    );
    const seen: string[] = [];
    for (const { t, w, r, exit, delay } of results) {
      const ledger = t.ledger();
      const byW = ledger.filter((l) => l.pid === w.pid);
      const byR = ledger.filter((l) => l.pid === r.pid);
      expect(byW.length + byR.length).toBe(ledger.length);
      const where = `killed after ${delay} ms (${exit.signal ?? `exit ${exit.code}`}), ledger ${JSON.stringify(ledger.map((l) => `${l.tool}:${l.phase}:${l.pid === w.pid ? 'w' : 'r'}`))}, recovery ${JSON.stringify(r.outcome)}`;
      seen.push(where);

      if (isError(r.outcome, 'CheckpointNotFound')) {
        // Killed before the start was saved: nothing may have run.
        expect({ where, ledger }).toEqual({ where, ledger: [] });
        continue;
      }
      if (isError(r.outcome, 'CheckpointConflict')) {
        // The first worker finished before the kill landed.
        expect({
          where,
          ok: /has ended \(done\)/.test(JSON.stringify(r.outcome)),
        }).toEqual({ where, ok: true });
        continue;
      }
      expect({ where, outcome: r.outcome }).toEqual({
        where,
        outcome: expect.objectContaining({
          status: 'done',
          note: 'sent Hamlet',
        }),
      });
      // The last superstep the first worker reached; everything before it was saved as done.
      const reached = Math.max(
        ...byW.map((l) => (TOOLS as readonly string[]).indexOf(l.tool)),
      );
      for (const [i, tool] of TOOLS.entries()) {
        const w1 = trail(byW, tool, { [w.pid]: 'w' });
        const r1 = trail(byR, tool, { [r.pid]: 'r' });
        const check = { where, tool, w: w1, r: r1 };
        if (i < reached) {
          expect(check).toEqual({ ...check, w: ['begin:w', 'end:w'], r: [] });
        } else if (i > reached) {
          expect(check).toEqual({ ...check, w: [], r: ['begin:r', 'end:r'] });
        } else {
          // Cut in this superstep: it ran again (in doubt), unless its result was stored.
          expect(w1.length).toBeGreaterThanOrEqual(1);
          expect([[], ['begin:r', 'end:r']]).toContainEqual(r1);
        }
        expect({ where, tool, keys: keysOf(ledger, tool).size }).toEqual({
          where,
          tool,
          keys: 1,
        });
      }
    }
    console.log(`random SIGKILL rounds (${kind}):\n  ${seen.join('\n  ')}`);
  });
}

for (const kind of KINDS) {
  const title = `SIGKILL crash tests (${kind})`;
  const service = serviceOf(kind);
  if (service) describeWithService(service, title, () => crashSuite(kind));
  else describe(title, () => crashSuite(kind));
}
