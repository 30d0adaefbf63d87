/**
 * The operator CLI as a real child process (`node -r ts-register libs/agent-adapter/src/cli/main.ts
 * ...`) against SQLite, Postgres and Redis stores populated by real runs: a finished run, a run
 * whose worker died inside a tool (a call in doubt), a paused run, and a run with a tampered row.
 * Every command, with its exit code.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Redis from 'ioredis';
import { DataSource } from 'typeorm';
import {
  Executor,
  FlowRunner,
  RedisCheckpointStore,
  SQLCheckpointStore,
  SQLiteCheckpointStore,
  ToolRegistry,
  type CallRecord,
  type CheckpointStore,
} from 'agent-adapter';
import { CrashingStore, settle } from 'agent-adapter/testing';
import { dropPrefix } from '../utils/redis-keys';
import {
  DATABASE_URL,
  REDIS_URL,
  describeWithService,
  suiteId,
} from '../utils/services';
import {
  KEY,
  executorFor,
  ticketsFlow,
  type LedgerEntry,
} from 'agent-adapter/testing/fixtures';
import { editSqlCall } from '../stores/sql.fixtures';
import { runTs } from '../utils/ts-child';
import { redisRaw } from '../stores/redis.fixtures';

jest.setTimeout(240_000);

const ROOT = join(__dirname, '..', '..');
const MAIN = join(ROOT, 'libs', 'agent-adapter', 'src', 'cli', 'main.ts');

interface Cli {
  code: number;
  stdout: string;
  stderr: string;
}

function cli(args: string[], env: NodeJS.ProcessEnv = {}): Promise<Cli> {
  return runTs(MAIN, args, {
    ...process.env,
    NODE_OPTIONS: '',
    CHECKPOINT_KEY: KEY,
    ...env,
  });
}

/** A worker of the tickets flow; `dieIn` kills it inside that tool, `approve` pauses at the mail. */
function worker(
  inner: CheckpointStore,
  options: { dieIn?: string; approve?: boolean } = {},
) {
  const store = new CrashingStore(inner);
  const tool = (name: string) => async (a: { show: string }) => {
    if (options.dieIn === name) store.kill(`inside ${name}`);
    return `${name} ${a.show}`;
  };
  const registry = new ToolRegistry()
    .register('hold_seats', tool('hold_seats'), { idempotent: true })
    .register('charge_card', tool('charge_card'))
    .register('email_tickets', tool('email_tickets'), {
      ...(options.approve && { approval: true }),
    });
  return new FlowRunner(new Executor(registry), {
    checkpoints: store,
    checkpointKey: KEY,
  });
}

/** One run of the tickets flow by a worker of its own (which may die or pause), settled. */
async function runTickets(
  store: CheckpointStore,
  runId: string,
  options: { dieIn?: string; approve?: boolean } = {},
): Promise<void> {
  const w = worker(store, options);
  await w
    .run(ticketsFlow(), { show: 'Hamlet', seats: 2 }, { runId })
    .catch(() => undefined);
  w.close();
  await settle();
}

async function populate(store: CheckpointStore): Promise<void> {
  await runTickets(store, 'done-1');
  await runTickets(store, 'tampered-1');
  await runTickets(store, 'crashed-1', { dieIn: 'email_tickets' });
  await runTickets(store, 'paused-1', { approve: true });
}

async function snapshot(store: CheckpointStore, runId: string) {
  const { leaseExpiresAt: _l, ...head } = (await store.head(runId))!;
  return { head, history: await store.history(runId) };
}

interface Backend {
  name: string;
  url: () => string;
  make: () => Promise<CheckpointStore>;
  /** Replaces the sealed text of one call record, as an attacker with database access would. */
  rewriteCall: (
    runId: string,
    k: { segment: number; superstep: number; seq: number },
    sealed: string,
  ) => Promise<void>;
  /** Copies call records in under their own columns and sets the head's call count. */
  insertCalls: (
    runId: string,
    records: CallRecord[],
    headCalls: number,
  ) => Promise<void>;
  /** Deletes the run's head row alone, its checkpoints and call records left. */
  deleteHead: (runId: string) => Promise<void>;
  /** Sets the head's key of its last call record (unsealed), as a database user could. */
  setLastCall: (
    runId: string,
    k: { segment: number; superstep: number; seq: number },
  ) => Promise<void>;
  cleanup: () => Promise<void>;
}

function cliSuite(backend: () => Backend): void {
  let b: Backend;
  let store: CheckpointStore;
  let dir: string;
  const run = (...args: string[]) => cli(['--store', b.url(), ...args]);

  beforeAll(async () => {
    b = backend();
    dir = mkdtempSync(join(tmpdir(), 'aa-cli-'));
    store = await b.make();
    await populate(store);
    // Tamper: the first call record of tampered-1 gets the body of its second.
    const { calls } = await store.history('tampered-1');
    const [first, second] = calls;
    await b.rewriteCall('tampered-1', first!, second!.sealed);
  });

  afterAll(async () => {
    await store?.close();
    await b?.cleanup();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('runs list: every run, newest first; filters; --json', async () => {
    const all = await run('runs', 'list');
    expect(all.code).toBe(0);
    for (const id of ['done-1', 'tampered-1', 'crashed-1', 'paused-1'])
      expect(all.stdout).toContain(id);
    expect(all.stdout.split('\n')[0]).toMatch(/^RUN\s+FLOW\s+STATUS/);

    const paused = await run('runs', 'list', '--status', 'paused', '--json');
    expect(paused.code).toBe(0);
    const page = JSON.parse(paused.stdout) as {
      runs: Array<{ runId: string }>;
    };
    expect(page.runs.map((r) => r.runId)).toEqual(['paused-1']);

    const limited = await run('runs', 'list', '--limit', '1', '--json');
    const first = JSON.parse(limited.stdout) as {
      runs: Array<{ runId: string }>;
      next?: string;
    };
    expect(first.runs.map((r) => r.runId)).toEqual(['paused-1']);
    expect(first.next).toBeDefined();
    const second = await run(
      'runs',
      'list',
      '--limit',
      '1',
      '--before',
      first.next!,
      '--json',
    );
    expect(
      (JSON.parse(second.stdout) as { runs: Array<{ runId: string }> }).runs,
    ).toEqual([expect.objectContaining({ runId: 'crashed-1' })]);
  });

  it('runs show: head, state and history; unknown run is exit 2', async () => {
    const shown = await run('runs', 'show', 'done-1');
    expect(shown.code).toBe(0);
    expect(shown.stdout).toMatch(/status:\s+done/);
    expect(shown.stdout).toContain('email_tickets');
    const json = await run('runs', 'show', 'crashed-1', '--json');
    expect(JSON.parse(json.stdout)).toMatchObject({
      head: { runId: 'crashed-1', status: 'running' },
      latest: { superstep: 2, frontier: ['send'] },
    });
    const missing = await run('runs', 'show', 'nope');
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/No checkpoint is stored for run "nope"/);
    expect(missing.stderr).not.toMatch(/\n\s+at /); // no stack trace
  });

  it('an odd run id is a usage error with the runner’s message (exit 2), never a driver error', async () => {
    for (const [argv, id] of [
      [['runs', 'show', 'a{b}'], 'a{b}'],
      [['runs', 'verify', 'x'.repeat(300)], `${'x'.repeat(40)}`],
      [['runs', 'inspect', ''], ''],
    ] as const) {
      const r = await run(...argv);
      expect([argv[1], r.code]).toEqual([argv[1], 2]);
      expect(r.stderr).toContain(`Run id ${JSON.stringify(id)}`);
      expect(r.stderr).toContain('is invalid: use 1-200 letters');
    }
  });

  it('runs verify: clean runs pass; the tampered row is reported with exit 1', async () => {
    expect((await run('runs', 'verify', 'done-1')).code).toBe(0);
    expect((await run('runs', 'verify', 'crashed-1')).code).toBe(0);
    const bad = await run('runs', 'verify', 'tampered-1');
    expect(bad.code).toBe(1);
    expect(bad.stdout).toMatch(/CORRUPT\s+tampered-1/);
    expect(bad.stdout).toMatch(/does not match its signature/);

    const all = await run('runs', 'verify', '--all', '--json');
    expect(all.code).toBe(1);
    const report = JSON.parse(all.stdout) as {
      ok: boolean;
      runs: Array<{ runId: string; problems: unknown[] }>;
    };
    expect(report.ok).toBe(false);
    expect(
      report.runs.filter((r) => r.problems.length).map((r) => r.runId),
    ).toEqual(['tampered-1']);
    expect(report.runs).toHaveLength(4);
  });

  it('runs verify: a run whose head row alone was deleted is found by --all and reported by id, exit 1', async () => {
    const id = 'headless-1';
    try {
      await runTickets(store, id, { dieIn: 'email_tickets' });
      await b.deleteHead(id);
      expect(await store.head(id)).toBeUndefined();

      const one = await run('runs', 'verify', id);
      expect([one.code, one.stdout]).toEqual([
        1,
        expect.stringMatching(/CORRUPT\s+headless-1/),
      ]);
      expect(one.stdout).toMatch(/stored but the run has no head/);
      const all = await run('runs', 'verify', '--all', '--json');
      expect(all.code).toBe(1);
      const report = JSON.parse(all.stdout) as {
        runs: Array<{ runId: string; problems: Array<{ where: string }> }>;
      };
      expect(report.runs.find((r) => r.runId === id)?.problems).toEqual(
        expect.arrayContaining([expect.objectContaining({ where: 'head' })]),
      );
      // Nor is it forked: the source is read verified, and corrupt is not "not found".
      const fork = await run(
        'runs',
        'fork',
        id,
        '--from-step',
        '1',
        '--run-id',
        'headless-fork',
      );
      expect([fork.code, fork.stderr]).toEqual([
        1, // corrupt, as runs verify says (not 2: not found)
        expect.stringMatching(/no head/),
      ]);
      expect(await store.head('headless-fork')).toBeUndefined();
    } finally {
      await store.delete(id);
    }
    expect((await store.history(id)).checkpoints).toEqual([]);
  });

  it('runs verify: a head whose last call key was edited below the store (raised or lowered) is reported, exit 1', async () => {
    const id = 'lastkey-1';
    try {
      await runTickets(store, id, { dieIn: 'email_tickets' });
      expect((await run('runs', 'verify', id)).code).toBe(0);
      const head = (await store.head(id))!;
      const last = head.lastCall!;
      expect(last.seq).toBeGreaterThan(0);
      await b.setLastCall(id, { ...last, seq: last.seq + 5 });

      const bad = await run('runs', 'verify', id);
      expect(bad.code).toBe(1);
      expect(bad.stdout).toMatch(/CORRUPT\s+lastkey-1/);
      expect(bad.stdout).toContain(
        `its last call record is record ${last.seq + 5} of segment ${last.segment}, superstep ${last.superstep}, the log's last is record ${last.seq} of`,
      );
      // Lowered, so a record written twice would not be refused: reported the same way.
      await b.setLastCall(id, { ...last, seq: last.seq - 1 });
      expect((await run('runs', 'verify', id)).code).toBe(1);
      await b.setLastCall(id, last);
      expect((await run('runs', 'verify', id)).code).toBe(0);
    } finally {
      await store.delete(id);
    }
  });

  it('runs verify and runs inspect: call records of an earlier run with the same id, copied in, are reported with exit 1', async () => {
    const id = 'reborn-1';
    try {
      const flow = ticketsFlow();
      const input = { show: 'Hamlet', seats: 2 };
      const old = worker(store);
      expect(await old.run(flow, input, { runId: id })).toMatchObject({
        status: 'done',
      });
      old.close();
      const copied = (await store.history(id)).calls.filter(
        (c) => c.superstep === 2,
      );
      await store.delete(id);
      const w = worker(store, { dieIn: 'email_tickets' });
      await w.run(flow, input, { runId: id }).catch(() => undefined);
      w.close();
      await settle();
      const head = (await store.head(id))!;
      await b.insertCalls(id, copied, head.calls + copied.length);

      const bad = await run('runs', 'verify', id);
      expect(bad.code).toBe(1);
      expect(bad.stdout).toMatch(/CORRUPT\s+reborn-1/);
      expect(bad.stdout).toMatch(
        new RegExp(
          `call record ${copied[0]!.segment}/1 \\(superstep 2\\) belongs to incarnation`,
        ),
      );
      const inspected = await run('runs', 'inspect', id, '--json');
      // The raised count breaks the head's seal, which inspect (recovery's reader) meets first.
      expect(JSON.parse(inspected.stdout)).toMatchObject({
        verdict: 'corrupt',
        problems: expect.arrayContaining([
          expect.stringMatching(/the run head .*does not match its signature/),
        ]) as unknown,
      });
      // runs show lists the copied records as corrupt, not as calls of this run.
      const shown = await run('runs', 'show', id, '--json');
      const calls = (
        JSON.parse(shown.stdout) as {
          calls: Array<{ segment: number; corrupt?: string }>;
        }
      ).calls.filter((c) => c.segment === copied[0]!.segment);
      expect(calls.length).toBeGreaterThan(0);
      for (const call of calls)
        expect(call.corrupt).toMatch(/belongs to incarnation/);
    } finally {
      await store.delete(id);
    }
  });

  it('runs inspect: the call in doubt and why, nothing written', async () => {
    const before = await store.history('crashed-1');
    const headBefore = await store.head('crashed-1');
    const out = await run('runs', 'inspect', 'crashed-1');
    expect(out.code).toBe(0);
    expect(out.stdout).toMatch(/verdict:\s+needs-decision/);
    expect(out.stdout).toMatch(
      /send#0\s+email_tickets\s+in doubt \(rerun only if idempotent\)\n\s+why:\s+started, no result recorded/,
    );
    const json = await run(
      'runs',
      'inspect',
      'crashed-1',
      '--idempotent',
      'email_tickets',
      '--json',
    );
    expect(JSON.parse(json.stdout)).toMatchObject({
      verdict: 'recoverable',
      inDoubt: [{ tool: 'email_tickets', action: 'rerun (idempotent)' }],
    });
    // What the operator checks at the mail provider: call id, arguments, the key, when it started.
    const [doubt] = (
      JSON.parse(json.stdout) as {
        inDoubt: Array<{ idempotencyKey: string; startedAt: number }>;
      }
    ).inDoubt;
    expect(doubt).toMatchObject({
      callId: 'send#0',
      args: { show: 'Hamlet' },
      idempotencyKey: expect.stringMatching(/^[A-Za-z0-9_-]{20,}$/),
      startedAt: expect.any(Number),
    });
    expect(out.stdout).toContain(`idempotency key: ${doubt!.idempotencyKey}`);
    expect(out.stdout).toMatch(/args:\s+\{"show":"Hamlet"\}/);
    expect(out.stdout).toMatch(/lease:\s+\S+ \((live|expired)\)/);
    // runs show lists the same call, the same key.
    const shownText = await run('runs', 'show', 'crashed-1');
    expect(shownText.stdout).toMatch(/In doubt \(may or may not have run\)/);
    expect(shownText.stdout).toContain(
      `idempotency key: ${doubt!.idempotencyKey}`,
    );
    const shownJson = await run('runs', 'show', 'crashed-1', '--json');
    expect(JSON.parse(shownJson.stdout)).toMatchObject({
      leaseLive: expect.any(Boolean),
      inDoubt: [{ callId: 'send#0', idempotencyKey: doubt!.idempotencyKey }],
      decisions: [],
    });
    expect(await store.history('crashed-1')).toEqual(before);
    expect((await store.head('crashed-1'))?.step).toBe(headBefore?.step);
    expect((await store.head('crashed-1'))?.segment).toBe(headBefore?.segment);

    const paused = await run('runs', 'inspect', 'paused-1', '--json');
    expect(JSON.parse(paused.stdout)).toMatchObject({
      verdict: 'paused',
      pending: { tool: 'email_tickets' },
    });
  });

  it('runs export + runs verify --bundle: offline, and an edited bundle fails', async () => {
    const file = join(dir, 'crashed-1.json');
    const exported = await run('runs', 'export', 'crashed-1', '--out', file);
    expect(exported.code).toBe(0);
    expect(exported.stdout).toMatch(/signed/);
    // Offline: no store at all.
    const ok = await cli(['runs', 'verify', '--bundle', file]);
    expect(ok.code).toBe(0);
    expect(ok.stdout).toMatch(/bundle signature: ok/);

    const bundle = JSON.parse(readFileSync(file, 'utf8')) as {
      calls: Array<{ sealed: string }>;
    };
    bundle.calls[0]!.sealed = bundle.calls[0]!.sealed.replace(
      'Hamlet',
      'Macbeth',
    );
    const edited = join(dir, 'edited.json');
    writeFileSync(edited, JSON.stringify(bundle));
    const bad = await cli(['runs', 'verify', '--bundle', edited, '--json']);
    expect(bad.code).toBe(1);
    expect(JSON.parse(bad.stdout)).toMatchObject({ ok: false, signed: false });

    const wrongKey = await cli(['runs', 'verify', '--bundle', file], {
      CHECKPOINT_KEY: 'some-other-secret-with-32-bytes-or-more',
    });
    expect(wrongKey.code).toBe(1);

    // To stdout without --out.
    const piped = await run('runs', 'export', 'done-1');
    expect(piped.code).toBe(0);
    expect(JSON.parse(piped.stdout)).toMatchObject({
      format: 'agent-adapter.bundle/2',
      runId: 'done-1',
    });
  });

  it('runs resolve: a charge in doubt that ran is recorded with its result; recovery replays it and never charges again', async () => {
    const charged: string[] = [];
    const charging = (dieIn?: string) => {
      const dying = new CrashingStore(store);
      const tool = (name: string) => async (a: { show: string }) => {
        if (name === 'charge_card') charged.push(a.show);
        if (dieIn === name) dying.kill(`inside ${name}`);
        return `${name} ${a.show}`;
      };
      const registry = new ToolRegistry()
        .register('hold_seats', tool('hold_seats'), { idempotent: true })
        .register('charge_card', tool('charge_card'))
        .register('email_tickets', tool('email_tickets'));
      return new FlowRunner(new Executor(registry), {
        checkpoints: dying,
        checkpointKey: KEY,
      });
    };
    const flow = ticketsFlow();
    const w1 = charging('charge_card');
    await w1
      .run(flow, { show: 'Lear', seats: 1 }, { runId: 'resolve-1' })
      .catch(() => undefined);
    w1.close();
    await settle();
    expect(charged).toEqual(['Lear']);

    const neither = await run(
      'runs',
      'resolve',
      'resolve-1',
      '--call',
      'pay#0',
    );
    expect(neither.code).toBe(2);
    expect(neither.stderr).toMatch(/exactly one of --ran .* or --not-run/);
    const wrong = await run(
      'runs',
      'resolve',
      'resolve-1',
      '--call',
      'mail#0',
      '--ran',
    );
    expect(wrong.code).toBe(2);
    expect(wrong.stderr).toMatch(
      /call mail#0 is not in doubt.*pay#0 \(charge_card\)/,
    );
    const notJson = await run(
      'runs',
      'resolve',
      'resolve-1',
      '--call',
      'pay#0',
      '--ran',
      '--result',
      '{nope',
    );
    expect(notJson.code).toBe(2);
    expect(notJson.stderr).toMatch(/--result is not JSON/);

    const ok = await run(
      'runs',
      'resolve',
      'resolve-1',
      '--call',
      'pay#0',
      '--ran',
      '--result',
      '"ch_42 (found at the provider)"',
      '--by',
      'ann',
      '--reason',
      'in the dashboard',
    );
    expect(ok.code).toBe(0);
    expect(ok.stdout).toMatch(/Resolved call pay#0 of run resolve-1: it ran/);
    const shown = JSON.parse(
      (await run('runs', 'show', 'resolve-1', '--json')).stdout,
    ) as {
      decisions: Array<{
        kind: string;
        calls: string[];
        by?: string;
        reason?: string;
      }>;
    };
    expect(shown.decisions).toEqual([
      expect.objectContaining({
        kind: 'resolve',
        calls: ['pay#0'],
        by: 'ann',
        reason: 'in the dashboard',
      }),
    ]);

    const w2 = charging();
    const result = await w2.recover(flow, 'resolve-1');
    w2.close();
    expect(result).toMatchObject({ status: 'done' });
    expect(charged).toEqual(['Lear']); // never charged again
    await store.delete('resolve-1'); // the later tests count the populated runs
  });

  it('runs cancel: a paused run ends failed; an ended run cannot be cancelled', async () => {
    const out = await run(
      'runs',
      'cancel',
      'paused-1',
      '--reason',
      'customer asked',
      '--by',
      'ann',
    );
    expect(out.code).toBe(0);
    expect(out.stdout).toMatch(/Cancelled run paused-1 \(was paused\)/);
    const shown = await run('runs', 'show', 'paused-1', '--json');
    expect(JSON.parse(shown.stdout)).toMatchObject({
      head: { status: 'failed' },
      latest: {
        reason: 'cancel',
        error: {
          name: 'RunCancelled',
          message: expect.stringMatching(
            /cancelled by operator.*customer asked/,
          ),
        },
      },
    });
    // The cancel is a decision on the run: who, when, why.
    expect(JSON.parse(shown.stdout)).toMatchObject({
      decisions: [
        {
          kind: 'cancel',
          by: 'ann',
          reason: 'customer asked',
          at: expect.any(Number),
        },
      ],
    });
    expect((await run('runs', 'show', 'paused-1')).stdout).toMatch(
      /Decisions\n.*\n\d+\s+cancel\s+-\s+ann\s+\d{4}-.*customer asked/,
    );
    expect((await run('runs', 'verify', 'paused-1')).code).toBe(0);
    const again = await run('runs', 'cancel', 'paused-1');
    expect(again.code).toBe(2);
    expect(again.stderr).toMatch(/already ended/);
  });

  it('runs fork: a new run from an old checkpoint, which a worker then finishes', async () => {
    const out = await run(
      'runs',
      'fork',
      'done-1',
      '--from-step',
      '2',
      '--run-id',
      'forked-1',
    );
    expect(out.code).toBe(0);
    expect(out.stdout).toMatch(/Forked run forked-1 from done-1 step 2/);
    const w = worker(store);
    const r = await w.recover(ticketsFlow(), 'forked-1');
    w.close();
    expect(r).toMatchObject({
      status: 'done',
      state: { note: 'email_tickets Hamlet' },
    });
    expect((await run('runs', 'verify', 'forked-1')).code).toBe(0);
    const missingStep = await run(
      'runs',
      'fork',
      'done-1',
      '--from-step',
      '42',
    );
    expect(missingStep.code).toBe(2);
    const noStep = await run('runs', 'fork', 'done-1');
    expect(noStep.code).toBe(2);
    expect(noStep.stderr).toMatch(/--from-step/);
  });

  it('runs fork of an unfinished run: refused without --cancel-source, nothing written', async () => {
    const before = await snapshot(store, 'crashed-1');
    const out = await run('runs', 'fork', 'crashed-1', '--from-step', '2');
    expect(out.code).toBe(2);
    expect(out.stderr).toMatch(/has not finished \(running\)/);
    expect(out.stderr).toMatch(/happen twice/);
    expect(out.stderr).toMatch(/--cancel-source/);
    expect(out.stderr).not.toMatch(/\n\s+at /);
    // Nothing written: no new run, the source as it was.
    expect((await store.list()).runs).toHaveLength(5);
    expect(await snapshot(store, 'crashed-1')).toEqual(before);
  });

  it('runs fork --cancel-source: the source ends cancelled, only the fork is recovered', async () => {
    const out = await run(
      'runs',
      'fork',
      'crashed-1',
      '--from-step',
      '2',
      '--run-id',
      'crashed-1b',
      '--cancel-source',
    );
    expect(out.code).toBe(0);
    expect(out.stdout).toMatch(/Cancelled run crashed-1 \(was running\)/);
    expect(out.stdout).toMatch(/Forked run crashed-1b from crashed-1 step 2/);
    const shown = await run('runs', 'show', 'crashed-1', '--json');
    expect(JSON.parse(shown.stdout)).toMatchObject({
      head: { status: 'failed' },
      latest: { reason: 'cancel', error: { name: 'RunCancelled' } },
    });
    // A worker's sweep: the fork only; the source's mail (in doubt) is not sent again.
    const ledger: LedgerEntry[] = [];
    const w = new FlowRunner(executorFor(ledger, 'sweeper'), {
      checkpoints: store,
      checkpointKey: KEY,
    });
    const all = await w.recoverAll(ticketsFlow(), {
      force: true,
      rerunInDoubt: true,
    });
    w.close();
    expect([...all.keys()]).toEqual(['crashed-1b']);
    expect(all.get('crashed-1b')).toMatchObject({ status: 'done' });
    expect(ledger.map((e) => e.tool)).toEqual(['email_tickets']);
    expect((await store.head('crashed-1'))?.status).toBe('failed');
    // Forking the cancelled source again needs no flag (a crash between the two writes).
    const again = await run('runs', 'fork', 'crashed-1', '--from-step', '2');
    expect(again.code).toBe(0);
    const id = /Forked run (\S+)/.exec(again.stdout)![1]!;
    expect(await store.delete(id)).toBe(true);
  });

  it('runs prune: finished runs before the date, dry run first', async () => {
    const future = new Date(Date.now() + 86_400_000).toISOString();
    const dry = await run(
      'runs',
      'prune',
      '--finished-before',
      future,
      '--dry-run',
      '--json',
    );
    expect(dry.code).toBe(0);
    // done-1, tampered-1, paused-1 and crashed-1 (cancelled), forked-1, crashed-1b.
    expect(JSON.parse(dry.stdout)).toMatchObject({ deleted: 6, dryRun: true });
    const past = await run('runs', 'prune', '--finished-before', '2000-01-01');
    expect(past.stdout).toMatch(/Deleted 0 finished run/);
    const pruned = await run('runs', 'prune', '--finished-before', future);
    expect(pruned.code).toBe(0);
    expect(pruned.stdout).toMatch(/Deleted 6 finished run/);
    expect((await store.list()).runs).toEqual([]);
    const bad = await run('runs', 'prune', '--finished-before', 'yesterday');
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/not a date/);
  });
}

describe('agent-adapter CLI: output cut off', () => {
  it('a reader that closes the pipe early (runs --help | head) ends the CLI quietly, exit 0', async () => {
    const hook = join(ROOT, 'test', 'utils', 'ts-register.js');
    const child = spawn(
      process.execPath,
      ['-r', hook, MAIN, 'runs', '--help'],
      {
        env: { ...process.env, NODE_OPTIONS: '' },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    // Closed before the child has written anything: its first write gets EPIPE.
    child.stdout.destroy();
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const code = await new Promise<number | null>((resolve) =>
      child.on('close', resolve),
    );
    expect(stderr).toBe('');
    expect(code).toBe(0);
  });
});

describe('agent-adapter CLI: usage errors', () => {
  it('unknown URL scheme, no store, missing key, bad arguments: exit 2, no stack trace', async () => {
    const scheme = await cli(['--store', 'mongodb://x', 'runs', 'list']);
    expect(scheme.code).toBe(2);
    expect(scheme.stderr).toMatch(/Unknown store URL scheme "mongodb:"/);

    const none = await cli(['runs', 'list'], { AGENT_ADAPTER_STORE: '' });
    expect(none.code).toBe(2);
    expect(none.stderr).toMatch(/No store: give --store/);

    const dir = mkdtempSync(join(tmpdir(), 'aa-cli-'));
    try {
      const file = join(dir, 'runs.db');
      const s = new SQLiteCheckpointStore(file);
      await populate(s);
      await s.close();
      const noKey = await cli(
        ['--store', `sqlite:${file}`, 'runs', 'verify', 'done-1'],
        {
          CHECKPOINT_KEY: '',
        },
      );
      expect(noKey.code).toBe(2);
      expect(noKey.stderr).toMatch(/CHECKPOINT_KEY is not set/);
      // The environment variable names the store too.
      const env = await cli(['runs', 'list', '--json'], {
        AGENT_ADAPTER_STORE: `sqlite:${file}`,
      });
      expect(env.code).toBe(0);
      const both = await cli(['--store', `sqlite:${file}`, 'runs', 'verify']);
      expect(both.code).toBe(2);
      expect(both.stderr).toMatch(/exactly one of <id>, --all or --bundle/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }

    const unknown = await cli(['runs', 'frobnicate']);
    expect(unknown.code).toBe(2);
    const help = await cli(['runs', '--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/inspect/);
    for (const r of [scheme, none, unknown])
      expect(r.stderr).not.toMatch(/\n\s+at /);
  });
});

describe('agent-adapter CLI: one behaviour per mistake', () => {
  const oneLine = (r: Cli) => {
    expect(r.stderr).toMatch(/^agent-adapter: [^\n]*\n$/);
    expect(r.stderr).not.toMatch(/\n\s+at |Unhandled error/);
  };

  it('an unreachable store: one line, exit 3, on every store', async () => {
    const started = Date.now();
    const redis = await cli(['--store', 'redis://127.0.0.1:1', 'runs', 'list']);
    expect([redis.code, redis.stderr]).toEqual([
      3,
      'agent-adapter: cannot connect to Redis at redis://127.0.0.1:1: connect ECONNREFUSED 127.0.0.1:1. Check the URL and that the server is up.\n',
    ]);
    expect(Date.now() - started).toBeLessThan(10_000);
    const pg = await cli([
      '--store',
      'postgres://postgres@127.0.0.1:1/test',
      'runs',
      'list',
    ]);
    expect(pg.code).toBe(3);
    for (const r of [redis, pg]) oneLine(r);
  });

  it('a mistyped tenant (schema, table prefix, Redis prefix): one line, exit 3, on every store', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'aa-cli-'));
    const file = join(dir, 'runs.db');
    const s = new SQLiteCheckpointStore(file);
    await populate(s);
    await s.close();
    const prefix = suiteId('aacli');
    const admin = new Redis(REDIS_URL);
    try {
      const good = new URL(REDIS_URL);
      good.searchParams.set('prefix', prefix);
      const redisStore = new RedisCheckpointStore(() => new Redis(REDIS_URL), {
        prefix,
      });
      await populate(redisStore);
      await redisStore.close();
      const typo = new URL(REDIS_URL);
      typo.searchParams.set('prefix', `${prefix}x`);
      const redis = await cli(['--store', typo.toString(), 'runs', 'list']);
      expect([redis.code, redis.stderr]).toEqual([
        3,
        `agent-adapter: no agent-adapter data under prefix "${prefix}x" on ${REDIS_URL.replace(/\/$/, '')}: check the prefix.\n`,
      ]);
      const ok = await cli(['--store', good.toString(), 'runs', 'list']);
      expect(ok.code).toBe(0);
      expect(ok.stdout).toMatch(/done-1/);

      const pgUrl = new URL(DATABASE_URL);
      pgUrl.searchParams.set('schema', 'aa_no_such_schema');
      const pg = await cli(['--store', pgUrl.toString(), 'runs', 'list']);
      const sqlite = await cli([
        '--store',
        `sqlite:${file}?tablePrefix=zz_`,
        'runs',
        'list',
      ]);
      for (const r of [redis, pg, sqlite]) {
        expect(r.code).toBe(3);
        oneLine(r);
      }
    } finally {
      await dropPrefix(admin, prefix);
      await admin.quit();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('runs list and prune read only the heads and need no key; every command that opens a record does', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'aa-cli-'));
    const file = join(dir, 'runs.db');
    const s = new SQLiteCheckpointStore(file);
    await populate(s);
    await s.close();
    try {
      const store = ['--store', `sqlite:${file}`];
      const noKey = { CHECKPOINT_KEY: '' };
      const listed = await cli([...store, 'runs', 'list'], noKey);
      expect(listed.code).toBe(0);
      expect(listed.stdout).toMatch(/done-1/);
      const shown = await cli([...store, 'runs', 'show', 'done-1'], noKey);
      expect(shown.code).toBe(2);
      expect(shown.stderr).toMatch(/CHECKPOINT_KEY is not set/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('records signed with a key the ring does not hold: "is CHECKPOINT_KEY the workers\' key?", not tampering', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'aa-cli-'));
    const file = join(dir, 'runs.db');
    const s = new SQLiteCheckpointStore(file);
    await populate(s);
    await s.close();
    try {
      const store = ['--store', `sqlite:${file}`];
      const other = { CHECKPOINT_KEY: 'another-secret-of-at-least-32-bytes!' };
      const verified = await cli([...store, 'runs', 'verify', 'done-1'], other);
      expect(verified.code).toBe(1);
      expect(verified.stdout).toMatch(
        /signed with an unknown key id "[^"]+": is CHECKPOINT_KEY the workers' key\?/,
      );
      const cancelled = await cli(
        [...store, 'runs', 'cancel', 'paused-1'],
        other,
      );
      expect(cancelled.code).toBe(1);
      oneLine(cancelled);
      expect(cancelled.stderr).toMatch(
        /signed with an unknown key id "[^"]+": is CHECKPOINT_KEY the workers' key\?/,
      );
      for (const r of [verified, cancelled])
        expect(r.stdout + r.stderr).not.toMatch(
          /backup|does not match its signature/,
        );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('agent-adapter CLI on SQLite', () => {
  cliSuite(() => {
    const dir = mkdtempSync(join(tmpdir(), 'aa-cli-sqlite-'));
    const file = join(dir, 'runs.db');
    let ds: DataSource | undefined;
    return {
      name: 'sqlite',
      url: () => `sqlite:${file}?tablePrefix=t_`,
      make: async () => new SQLiteCheckpointStore(file, { tablePrefix: 't_' }),
      rewriteCall: async (runId, k, sealed) => {
        ds ??= await new DataSource({
          type: 'better-sqlite3',
          database: file,
        }).initialize();
        const t = { calls: 't_calls', checkpoints: 't_checkpoints' };
        await editSqlCall(ds, t, () => '?', runId, k, sealed);
      },
      insertCalls: async (runId, records, headCalls) => {
        ds ??= await new DataSource({
          type: 'better-sqlite3',
          database: file,
        }).initialize();
        for (const r of records) {
          await ds.query(
            'INSERT INTO t_calls (run_id, superstep, segment, seq, sealed) VALUES (?, ?, ?, ?, ?)',
            [runId, r.superstep, r.segment, r.seq, r.sealed],
          );
        }
        await ds.query('UPDATE t_runs SET calls = ? WHERE run_id = ?', [
          headCalls,
          runId,
        ]);
      },
      deleteHead: async (runId) => {
        ds ??= await new DataSource({
          type: 'better-sqlite3',
          database: file,
        }).initialize();
        await ds.query('DELETE FROM t_runs WHERE run_id = ?', [runId]);
      },
      setLastCall: async (runId, k) => {
        ds ??= await new DataSource({
          type: 'better-sqlite3',
          database: file,
        }).initialize();
        await ds.query(
          'UPDATE t_runs SET last_segment = ?, last_superstep = ?, last_seq = ? WHERE run_id = ?',
          [k.segment, k.superstep, k.seq, runId],
        );
      },
      cleanup: async () => {
        await ds?.destroy();
        rmSync(dir, { recursive: true, force: true });
      },
    };
  });
});

describeWithService('postgres', 'agent-adapter CLI on Postgres', () => {
  cliSuite(() => {
    const schema = suiteId('aa_cli');
    const ds = new DataSource({ type: 'postgres', url: DATABASE_URL });
    const url = new URL(DATABASE_URL);
    url.searchParams.set('schema', schema);
    return {
      name: 'postgres',
      url: () => url.toString(),
      make: async () =>
        new SQLCheckpointStore(
          { type: 'postgres', url: DATABASE_URL },
          { schema },
        ),
      rewriteCall: async (runId, k, sealed) => {
        if (!ds.isInitialized) await ds.initialize();
        const t = {
          calls: `"${schema}"."aa_calls"`,
          checkpoints: `"${schema}"."aa_checkpoints"`,
        };
        await editSqlCall(ds, t, (i) => `$${i}`, runId, k, sealed);
      },
      insertCalls: async (runId, records, headCalls) => {
        if (!ds.isInitialized) await ds.initialize();
        for (const r of records) {
          await ds.query(
            `INSERT INTO "${schema}"."aa_calls" (run_id, superstep, segment, seq, sealed) VALUES ($1, $2, $3, $4, $5)`,
            [runId, r.superstep, r.segment, r.seq, r.sealed],
          );
        }
        await ds.query(
          `UPDATE "${schema}"."aa_runs" SET calls = $1 WHERE run_id = $2`,
          [headCalls, runId],
        );
      },
      deleteHead: async (runId) => {
        if (!ds.isInitialized) await ds.initialize();
        await ds.query(`DELETE FROM "${schema}"."aa_runs" WHERE run_id = $1`, [
          runId,
        ]);
      },
      setLastCall: async (runId, k) => {
        if (!ds.isInitialized) await ds.initialize();
        await ds.query(
          `UPDATE "${schema}"."aa_runs" SET last_segment = $1, last_superstep = $2, last_seq = $3 WHERE run_id = $4`,
          [k.segment, k.superstep, k.seq, runId],
        );
      },
      cleanup: async () => {
        if (!ds.isInitialized) await ds.initialize();
        await ds.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
        await ds.destroy();
      },
    };
  });
});

describeWithService('redis', 'agent-adapter CLI on Redis', () => {
  cliSuite(() => {
    const prefix = suiteId('aacli');
    const admin = new Redis(REDIS_URL);
    const url = new URL(REDIS_URL);
    url.searchParams.set('prefix', prefix);
    return {
      name: 'redis',
      url: () => url.toString(),
      make: async () =>
        new RedisCheckpointStore(() => new Redis(REDIS_URL), { prefix }),
      rewriteCall: async (runId, k, sealed) => {
        await admin.hset(
          `{${prefix}:${runId}}:run`,
          `call:${k.superstep}:${k.segment}:${k.seq}`,
          sealed,
        );
      },
      insertCalls: (runId, records, headCalls) =>
        redisRaw(
          () => admin,
          () => `{${prefix}:${runId}}`,
        ).insertCalls(undefined as never, runId, records, headCalls),
      deleteHead: (runId) =>
        redisRaw(
          () => admin,
          () => `{${prefix}:${runId}}`,
        ).deleteHead(undefined as never, runId),
      setLastCall: async (runId, k) => {
        await admin.hset(
          `{${prefix}:${runId}}:run`,
          'lastCall',
          `${k.segment}:${k.superstep}:${k.seq}`,
        );
      },
      cleanup: async () => {
        await dropPrefix(admin, prefix);
        await admin.quit();
      },
    };
  });
});
