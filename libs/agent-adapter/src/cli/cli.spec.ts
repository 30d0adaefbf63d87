/**
 * The operator commands' logic on the memory store (the e2e suite runs the CLI itself as a child
 * process against SQLite, Postgres and Redis).
 */
import {
  CheckpointConflict,
  Flow,
  MemoryCheckpointStore,
  RecoveryNeedsDecision,
  RunCancelled,
  ToolRegistry,
  type CheckpointStore,
} from 'agent-adapter';
import { CrashingStore, settle } from 'agent-adapter/testing';
import { KeyRing } from '../exec/durable/key-ring';
import { openCheckpoint, sealCall, openCall } from '../exec/durable/records';
import { CliError } from './cli.error';
import { parseBefore } from './format';
import { inspectRun } from './inspect';
import { keyRingFromEnv } from './key';
import { forkRun } from './fork';
import { cancelRun, pruneRuns, showRun } from './operations';
import { runCli } from './program';
import { descriptorFromUrl } from './store-url';
import { exportRun, verifyBundle } from './audit-bundle';
import { verifyRun } from './verify';
import { KEY, ring, runnerOn } from '../../../../test/utils/specs';
import {
  crashed,
  snapshot,
  tickets,
  ticketsFlow as flow,
} from '../../../../test/utils/cli-tickets';

async function finished(store: CheckpointStore, runId: string) {
  const w = tickets(store);
  const r = await w.runner.run(flow(), { show: 'Hamlet' }, { runId });
  w.runner.close();
  return r;
}

describe('runs verify', () => {
  it('finds nothing wrong with a finished run or a crashed one', async () => {
    const store = new MemoryCheckpointStore();
    await finished(store, 'ok');
    await crashed(store, 'cut', 'charge_card');
    for (const id of ['ok', 'cut'])
      expect(await verifyRun(store, ring, id)).toMatchObject({ problems: [] });
    expect(await verifyRun(store, ring, 'missing')).toBeUndefined();
  });

  it('reports a tampered call, a missing call, and a row sealed with another key', async () => {
    const store = new MemoryCheckpointStore();
    await finished(store, 'r');
    const history = await store.history('r');
    const [first, second] = history.calls;
    // Swap two records' bodies (each signature no longer matches its position).
    const tampered = {
      checkpoints: history.checkpoints,
      calls: [{ ...first!, sealed: second!.sealed }, ...history.calls.slice(1)],
    };
    const { verifyHistory } = await import('./verify');
    const head = (await store.head('r'))!;
    const swapped = verifyHistory(ring, 'r', tampered, head);
    expect(swapped.map((p) => p.where)).toEqual([
      'call ' + `${first!.segment}/0/1`,
    ]);
    expect(swapped[0]!.detail).toMatch(/does not match its signature/);

    const missing = verifyHistory(
      ring,
      'r',
      { checkpoints: history.checkpoints, calls: history.calls.slice(1) },
      head,
    );
    expect(missing.map((p) => p.where)).toEqual(
      expect.arrayContaining(['call log of superstep 0', 'head']),
    );

    const other = KeyRing.from('another-secret-of-at-least-32-bytes!');
    const foreign = sealCall(other, openCall(ring, first!));
    const forged = verifyHistory(
      ring,
      'r',
      {
        checkpoints: history.checkpoints,
        calls: [foreign, ...history.calls.slice(1)],
      },
      head,
    );
    expect(forged[0]!.detail).toMatch(/unknown key id/);
  });

  it("reports a head whose last call key (unsealed) is not the log's last record: raised, lowered or gone", async () => {
    const store = new MemoryCheckpointStore();
    await finished(store, 'r');
    const history = await store.history('r');
    const { verifyHistory } = await import('./verify');
    const head = (await store.head('r'))!;
    const last = head.lastCall!;
    expect(last).toEqual({
      segment: history.calls.at(-1)!.segment,
      superstep: history.calls.at(-1)!.superstep,
      seq: history.calls.at(-1)!.seq,
    });
    expect(verifyHistory(ring, 'r', history, head)).toEqual([]);
    for (const edited of [
      { ...last, seq: last.seq + 1 },
      { ...last, superstep: last.superstep - 1 },
      undefined,
    ]) {
      const problems = verifyHistory(ring, 'r', history, {
        ...head,
        lastCall: edited,
      });
      expect(problems.map((p) => p.where)).toEqual(['head']);
      const kept = edited
        ? `record ${edited.seq} of segment ${edited.segment}, superstep ${edited.superstep}`
        : 'none';
      expect(problems[0]!.detail).toContain(
        `its last call record is ${kept}, the log's last is record ${last.seq} of segment ${last.segment}, superstep ${last.superstep}:`,
      );
    }
  });
});

describe('runs export / verify --bundle', () => {
  it('signs a bundle that verifies offline, and catches any edit', async () => {
    const store = new MemoryCheckpointStore();
    await crashed(store, 'b', 'email_tickets');
    const bundle = (await exportRun(store, ring, 'b'))!;
    expect(bundle).toMatchObject({
      format: 'agent-adapter.bundle/2',
      runId: 'b',
    });
    const copy = JSON.parse(JSON.stringify(bundle)) as typeof bundle;
    expect(verifyBundle(ring, copy)).toMatchObject({
      signed: true,
      problems: [],
    });

    // Dropping a record: the bundle signature and the row checks both see it.
    const dropped = { ...copy, calls: copy.calls.slice(0, -1) };
    const checked = verifyBundle(ring, dropped);
    expect(checked.signed).toBe(false);
    expect(checked.problems.map((p) => p.where)).toContain('bundle');
    expect(checked.problems.map((p) => p.where)).toContain('head');

    // Another key: nothing verifies.
    const other = KeyRing.from('another-secret-of-at-least-32-bytes!');
    expect(verifyBundle(other, copy).signed).toBe(false);

    // The head's last call key travels in the bundle and is checked like a stored one.
    expect(copy.head.lastCall).toBeDefined();
    const { lastCall: _gone, ...headless } = copy.head;
    expect(
      verifyBundle(ring, { ...copy, head: headless }).problems[1],
    ).toMatchObject({
      where: 'head',
      detail: expect.stringMatching(/^its last call record is none/),
    });

    // A key edited into something that is not one (a Redis field reads as NaNs) still exports:
    // left out of the bundle, which then reports the head.
    const garbled: CheckpointStore = Object.create(store) as CheckpointStore;
    garbled.head = async (id) => {
      const h = await store.head(id);
      return (
        h && { ...h, lastCall: { segment: NaN, superstep: NaN, seq: NaN } }
      );
    };
    const fromGarbled = (await exportRun(garbled, ring, 'b'))!;
    expect(fromGarbled.head.lastCall).toBeUndefined();
    expect(
      verifyBundle(ring, fromGarbled).problems.map((p) => p.where),
    ).toEqual(['head']);

    // A bundle of an earlier development build is refused by name.
    expect(() =>
      verifyBundle(ring, { ...copy, format: 'agent-adapter.bundle/1' }),
    ).toThrow(
      /format "agent-adapter.bundle\/1" \(no key of the head's last call record\)/,
    );
    expect(() => verifyBundle(ring, { hello: 1 })).toThrow(
      /Not an agent-adapter audit bundle/,
    );
  });
});

describe('runs inspect', () => {
  it('a crashed run: which calls replay, which are in doubt and why; writes nothing', async () => {
    const store = new MemoryCheckpointStore();
    await crashed(store, 'i', 'email_tickets');
    const before = await snapshot(store, 'i');
    const report = await inspectRun(store, ring, 'i');
    expect(report).toMatchObject({
      verdict: 'needs-decision',
      status: 'running',
      superstep: 2,
      frontier: ['send'],
      replay: [],
      inDoubt: [
        {
          node: 'send',
          tool: 'email_tickets',
          why: 'started, no result recorded',
          action: 'in doubt (rerun only if idempotent)',
          args: { show: 'Hamlet' },
        },
      ],
      problems: [],
    });
    expect(report.summary).toMatch(/RecoveryNeedsDecision/);
    expect(await snapshot(store, 'i')).toEqual(before);

    // The same verdict recover reaches.
    const w = tickets(store);
    await expect(w.runner.recover(flow(), 'i')).rejects.toThrow(
      RecoveryNeedsDecision,
    );

    const told = await inspectRun(store, ring, 'i', {
      idempotent: ['email_tickets'],
    });
    expect(told.verdict).toBe('recoverable');
    expect(told.inDoubt[0]!.action).toBe('rerun (idempotent)');
  });

  it('lists finished calls of the cut superstep as replays', async () => {
    const store = new MemoryCheckpointStore();
    // Parallel nodes: `a` finishes, `b` dies while its tool runs.
    const inner = store;
    const crashing = new CrashingStore(inner);
    const registry = new ToolRegistry()
      .register('fast', async () => 'fast ok', { idempotent: true })
      .register('slow', async () => {
        await new Promise((r) => setTimeout(r, 20));
        crashing.kill('inside slow');
      });
    const runner = runnerOn(crashing, registry);
    const par = new Flow<{ a?: string; b?: string }>('par')
      .node('start', async () => ({}))
      .node('a', async (_s, ctx) => ({ a: await ctx.call<string>('fast', {}) }))
      .node('b', async (_s, ctx) => ({ b: await ctx.call<string>('slow', {}) }))
      .edge('start', 'a')
      .edge('start', 'b')
      .end('a')
      .end('b');
    await runner.run(par, {}, { runId: 'par' }).catch(() => undefined);
    runner.close();
    await settle();
    const report = await inspectRun(store, ring, 'par');
    expect(report.replay).toEqual([
      expect.objectContaining({ node: 'a', tool: 'fast', outcome: 'value' }),
    ]);
    expect(report.inDoubt.map((c) => c.tool)).toEqual(['slow']);
  });

  it('a paused run and an ended run', async () => {
    const store = new MemoryCheckpointStore();
    const w = tickets(store, { approve: true });
    await w.runner.run(flow(), { show: 'Hamlet' }, { runId: 'p' });
    w.runner.close();
    const paused = await inspectRun(store, ring, 'p');
    expect(paused).toMatchObject({
      verdict: 'paused',
      pending: { tool: 'email_tickets', node: 'send' },
    });
    await finished(store, 'd');
    expect((await inspectRun(store, ring, 'd')).verdict).toBe('ended');
  });
});

describe('runs cancel', () => {
  it('ends a crashed run as failed with a sealed checkpoint; recovery then refuses it', async () => {
    const store = new MemoryCheckpointStore();
    await crashed(store, 'c', 'charge_card');
    const done = await cancelRun(store, ring, 'c', {
      reason: 'customer called',
      by: 'op',
    });
    expect(done).toMatchObject({ runId: 'c', was: 'running' });
    const cp = openCheckpoint(ring, (await store.latest('c'))!);
    expect(cp).toMatchObject({
      status: 'failed',
      reason: 'cancel',
      error: {
        name: 'RunCancelled',
        message: 'cancelled by operator (op): customer called',
      },
    });
    expect(cp.error).toEqual({
      name: RunCancelled.name,
      message: new RunCancelled('c', 'op', 'customer called').message,
    });
    expect((await verifyRun(store, ring, 'c'))?.problems).toEqual([]);
    await expect(tickets(store).runner.recover(flow(), 'c')).rejects.toThrow(
      CheckpointConflict,
    );
    await expect(cancelRun(store, ring, 'c')).rejects.toThrow(CliError);
  });

  it('fences a worker that is driving the run: it starts no call after the cancel', async () => {
    const store = new MemoryCheckpointStore();
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const ran: string[] = [];
    const registry = new ToolRegistry()
      .register(
        'hold_seats',
        async () => {
          ran.push('hold_seats');
          await gate;
          return 'held';
        },
        { idempotent: true },
      )
      .register('charge_card', async () => {
        ran.push('charge_card');
        return 'charged';
      })
      .register('email_tickets', async () => 'sent');
    const runner = runnerOn(store, registry);
    const running = runner.run(flow(), { show: 'Hamlet' }, { runId: 'live' });
    while (!ran.length) await new Promise((r) => setImmediate(r));
    await cancelRun(store, ring, 'live');
    release();
    await expect(running).rejects.toThrow(CheckpointConflict);
    runner.close();
    expect(ran).toEqual(['hold_seats']);
    expect((await store.head('live'))?.status).toBe('failed');
  });

  it('cancels a paused run', async () => {
    const store = new MemoryCheckpointStore();
    const w = tickets(store, { approve: true });
    await w.runner.run(flow(), { show: 'Hamlet' }, { runId: 'p' });
    w.runner.close();
    expect(await cancelRun(store, ring, 'p')).toMatchObject({ was: 'paused' });
    await expect(
      w.runner.resume(flow(), 'p', { approved: true }),
    ).rejects.toThrow(CheckpointConflict);
  });
});

describe('runs fork', () => {
  it('starts a new run from an old checkpoint, which recovers onto a changed graph', async () => {
    const store = new MemoryCheckpointStore();
    await finished(store, 'old');
    const forked = await forkRun(store, ring, 'old', 2, {
      newRunId: 'new',
      by: 'op',
    });
    expect(forked).toMatchObject({
      runId: 'new',
      from: { runId: 'old', step: 2 },
      frontier: ['send'],
    });
    const cp = openCheckpoint(ring, (await store.latest('new'))!);
    expect(cp).toMatchObject({
      step: 0,
      status: 'running',
      reason: 'fork',
      logBefore: 0,
      forkedFrom: { runId: 'old', step: 2 },
    });
    expect(cp.incarnation).toBe(cp.segment);

    // The graph changed (a node was added): the fork runs on it, the old run is untouched.
    const w = tickets(store);
    const r = await w.runner.recover(flow(true), 'new');
    w.runner.close();
    expect(r).toMatchObject({ status: 'done', state: { note: 'thanked' } });
    expect(w.ran).toEqual(['email_tickets']);
    expect((await verifyRun(store, ring, 'new'))?.problems).toEqual([]);
    expect((await store.head('old'))?.status).toBe('done');

    await expect(
      forkRun(store, ring, 'old', 2, { newRunId: 'new' }),
    ).rejects.toThrow(/already exists/);
    await expect(forkRun(store, ring, 'old', 9)).rejects.toThrow(
      /no checkpoint at step 9/,
    );
    await expect(forkRun(store, ring, 'old', 3)).rejects.toThrow(
      /no node left to run/,
    );
    await expect(
      forkRun(store, ring, 'old', 0, { newRunId: 'bad id' }),
    ).rejects.toThrow(/invalid/);
  });

  it('a run that is not forked still refuses a changed graph', async () => {
    const store = new MemoryCheckpointStore();
    await crashed(store, 'x', 'hold_seats');
    await expect(
      tickets(store).runner.recover(flow(true), 'x'),
    ).rejects.toThrow(/graph .* changed/);
  });
});

describe('runs prune', () => {
  it('deletes finished runs written before the date, page by page, and keeps the rest', async () => {
    let now = 1_000;
    const store = new MemoryCheckpointStore(() => now);
    for (let i = 0; i < 5; i++) await finished(store, `old-${i}`);
    await crashed(store, 'unfinished', 'charge_card');
    now = 5_000;
    await finished(store, 'recent');
    const dry = await pruneRuns(store, ring, 2_000, {
      dryRun: true,
      pageSize: 2,
    });
    expect(dry).toEqual({ deleted: 5, scanned: 6, dryRun: true, corrupt: [] });
    expect(await store.head('old-0')).toBeDefined();
    const pruned = await pruneRuns(store, ring, 2_000, { pageSize: 2 });
    expect(pruned).toEqual({
      deleted: 5,
      scanned: 6,
      dryRun: false,
      corrupt: [],
    });
    const left = (await store.list()).runs.map((r) => r.runId).sort();
    expect(left).toEqual(['recent', 'unfinished']);
  });
});

describe('runs show', () => {
  it('opens every row and marks the ones that do not verify', async () => {
    const store = new MemoryCheckpointStore();
    await finished(store, 's');
    const shown = await showRun(store, ring, 's');
    expect(shown.latest).toMatchObject({ status: 'done' });
    expect(shown.checkpoints.map((c) => c.reason)).toEqual([
      'start',
      'superstep',
      'superstep',
      'superstep',
    ]);
    expect(shown.calls.every((c) => c.corrupt === undefined)).toBe(true);
    const other = KeyRing.from('another-secret-of-at-least-32-bytes!');
    const blind = await showRun(store, other, 's');
    expect(blind.latest).toBeUndefined();
    expect(blind.checkpoints[0]!.corrupt).toMatch(
      /signed with an unknown key id "[^"]+": is CHECKPOINT_KEY the workers. key\?/,
    );
  });
});

describe('store URLs and keys', () => {
  it.each([
    [
      'postgres://u@h:5432/db?schema=t1&tablePrefix=x_&sslmode=disable',
      {
        type: 'postgres',
        url: 'postgres://u@h:5432/db?sslmode=disable',
        schema: 't1',
        tablePrefix: 'x_',
        createTables: false,
      },
    ],
    [
      'redis://h:6379/2?prefix=ten',
      { type: 'redis', url: 'redis://h:6379/2', prefix: 'ten' },
    ],
  ])('%s', (url, expected) => {
    expect(descriptorFromUrl(url)).toMatchObject(expected);
  });

  it('sqlite: a file that exists, never created', () => {
    expect(descriptorFromUrl(`sqlite:${__filename}?tablePrefix=t_`)).toEqual({
      type: 'sqlite',
      path: __filename,
      tablePrefix: 't_',
      createTables: false,
    });
    expect(descriptorFromUrl(`sqlite://${__filename}`)).toMatchObject({
      path: __filename,
    });
    expect(() => descriptorFromUrl('sqlite:/no/such.db')).toThrow(
      /no such file/,
    );
  });

  it.each([
    ['mongodb://x', /Unknown store URL scheme "mongodb:"/],
    ['runs.db', /Unknown store URL "runs.db"/],
    ['redis://h?prefx=a', /unknown parameter "prefx"/],
    ['redis://h?ttlSeconds=-1', /ttlSeconds must be a positive integer/],
  ])('refuses %s', (url, message) => {
    expect(() => descriptorFromUrl(url)).toThrow(CliError);
    expect(() => descriptorFromUrl(url)).toThrow(message);
  });

  it('reads the key or a JSON key ring from CHECKPOINT_KEY', () => {
    expect(keyRingFromEnv({ CHECKPOINT_KEY: KEY }).current.id).toBe(
      ring.current.id,
    );
    const rotated = keyRingFromEnv({
      CHECKPOINT_KEY: JSON.stringify({
        current: 'a-brand-new-secret-of-32-bytes-at-least',
        previous: [KEY],
      }),
    });
    expect(rotated.has(ring.current.id)).toBe(true);
    expect(() => keyRingFromEnv({})).toThrow(/CHECKPOINT_KEY is not set/);
    expect(() => keyRingFromEnv({ CHECKPOINT_KEY: 'short' })).toThrow(
      /at least 32 are required/,
    );
    expect(() => keyRingFromEnv({ CHECKPOINT_KEY: '{oops' })).toThrow(
      /not valid JSON/,
    );
  });

  it('reads the encryption key from CHECKPOINT_ENCRYPTION_KEY: runs encrypted at rest show in clear', async () => {
    const ENC = 'an-encryption-key-for-the-cli-32b!!';
    const store = new MemoryCheckpointStore();
    const runner = runnerOn(
      store,
      new ToolRegistry().register('t', () => 'secret-result'),
      { encryptionKey: ENC },
    );
    const flow = new Flow<{ v?: string }>('enc-cli')
      .node('n', async (_s, ctx) => ({ v: await ctx.call<string>('t', {}) }))
      .end('n');
    const r = await runner.run(flow, {}, { runId: 'enc-cli-1' });
    runner.close();
    const withKey = keyRingFromEnv({
      CHECKPOINT_KEY: KEY,
      CHECKPOINT_ENCRYPTION_KEY: ENC,
    });
    const shown = await showRun(store, withKey, r.runId);
    expect(shown.latest?.state).toEqual({ v: 'secret-result' });
    const without = await showRun(
      store,
      keyRingFromEnv({ CHECKPOINT_KEY: KEY }),
      r.runId,
    ).catch((e: unknown) => e);
    expect(String(without)).toMatch(
      /encrypted, and this worker has no encryption key/,
    );
    expect(() =>
      keyRingFromEnv({
        CHECKPOINT_KEY: KEY,
        CHECKPOINT_ENCRYPTION_KEY: 'short',
      }),
    ).toThrow(/CHECKPOINT_ENCRYPTION_KEY: .*at least 32/);
    expect(() =>
      keyRingFromEnv({ CHECKPOINT_KEY: KEY, CHECKPOINT_ENCRYPTION_KEY: KEY }),
    ).toThrow(
      /^CHECKPOINT_ENCRYPTION_KEY: The encryption key must not be a checkpoint key/,
    );
  });

  it('parses --finished-before', () => {
    expect(parseBefore('2026-01-31')).toBe(Date.parse('2026-01-31'));
    expect(parseBefore('30d', 100 * 86_400_000)).toBe(70 * 86_400_000);
    expect(() => parseBefore('yesterday')).toThrow(/not a date/);
  });
});

describe('run-id arguments', () => {
  const odd = ['', 'x'.repeat(201), 'a\0b', 'a{b}', 'order 7'];
  const commands = (id: string) => [
    ['runs', 'show', id],
    ['runs', 'verify', id],
    ['runs', 'inspect', id],
    ['runs', 'cancel', id],
    ['runs', 'export', id],
    ['runs', 'fork', id, '--from-step', '0'],
    ['runs', 'fork', 'ok-1', '--from-step', '0', '--run-id', id],
  ];

  it.each(odd.map((id) => [JSON.stringify(id).slice(0, 20), id]))(
    'every command refuses %s with the runner’s message, exit 2, before opening a store',
    async (_shown, id) => {
      const { runner } = tickets(new MemoryCheckpointStore());
      const expected = await runner
        .run(flow(), { show: 'H' }, { runId: id })
        .then(
          () => 'accepted',
          (e: unknown) => (e as Error).message,
        );
      for (const argv of commands(id)) {
        let stderr = '';
        const code = await runCli(argv, {
          stdout: () => undefined,
          stderr: (t) => (stderr += t),
          env: { CHECKPOINT_KEY: KEY },
        });
        // Today: the id goes to the store (here: none given, "No store"), or to its driver.
        expect([argv.join(' '), stderr]).toEqual([
          argv.join(' '),
          `agent-adapter: ${expected}\n`,
        ]);
        expect(code).toBe(2);
      }
    },
  );
});
