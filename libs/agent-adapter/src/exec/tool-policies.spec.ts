/**
 * Tool policies (issue 5, part 5): `retry` for thrown errors (each attempt logged, the final error
 * sealed and replayed), `timeoutMs` (a timed-out idempotent call seals ToolTimeout; any other
 * tool's call is in doubt, since it may still be running). Each behaviour also under a crash,
 * with the crashing store, and replayed after recovery.
 */
import {
  CheckpointConflict,
  Flow,
  MemoryCheckpointStore,
  ToolFailed,
  ToolRegistry,
  ToolTimeout,
  idempotencyKey,
  type ToolOptions,
} from 'agent-adapter';
import { CrashingStore } from 'agent-adapter/testing';
import {
  bodyOf,
  callsInDoubt,
  diesOn,
  runnerOn,
  sleep,
} from '../../../../test/utils/specs';

/** The sealed bodies of a run's call records, in order (test inspection). */
async function logOf(store: MemoryCheckpointStore, runId: string) {
  return (await store.history(runId)).calls.map((c) => bodyOf(c.sealed));
}

/** What a node saw of a failed call, as plain data. */
function seen(e: unknown) {
  const f = e as ToolFailed;
  return {
    class: f.constructor.name,
    failed: e instanceof ToolFailed,
    timeout: e instanceof ToolTimeout,
    errorName: f.errorName,
    message: f.message,
    replayed: f.replayed,
  };
}

interface S {
  r?: unknown;
  after?: unknown;
}

/**
 * One node: calls `tool` (catching its failure into `r`), then `after` (which can kill the worker:
 * a crash in the same superstep, so recovery reruns it and must replay `tool`).
 */
function flowCalling(tool: string) {
  return new Flow<S>(`calls-${tool}`)
    .node('n', async (_s, ctx) => {
      const r = await ctx
        .call(tool, { seat: 7 })
        .catch((e: unknown) => ({ error: seen(e) }));
      return { r, after: await ctx.call('after') };
    })
    .end('n');
}

function registryWith(
  tool: string,
  handler: (a: { seat: number }) => unknown,
  options: ToolOptions<{ seat: number }>,
  after: () => unknown = () => 'after',
) {
  return new ToolRegistry()
    .register(tool, handler, options)
    .register('after', after, { idempotent: true });
}

/**
 * Runs the flow calling `tool` as `runId` on a worker that dies in `after` (the same superstep),
 * then recovers it on a live one: what the recovery returned.
 */
async function crashedAfterThenRecovered(
  tool: string,
  runId: string,
  registry: (after: () => unknown) => ToolRegistry,
) {
  const store = new MemoryCheckpointStore();
  const dying = new CrashingStore(store);
  await diesOn(
    runnerOn(
      dying,
      registry(() => dying.kill()),
    ).run(flowCalling(tool), {}, { runId }),
  );
  return runnerOn(
    store,
    registry(() => 'after'),
  ).recover(flowCalling(tool), runId);
}

describe('A tool attempt that fails in an odd way is a failed call, recorded `done`', () => {
  it.each([
    [
      'a result whose `then` getter throws',
      () => ({
        get then(): unknown {
          throw new Error('then getter');
        },
      }),
      { name: 'Error', message: 'then getter' },
    ],
    [
      'a thrown object with no prototype (no text of its own)',
      () => {
        throw Object.create(null);
      },
      { name: 'Error', message: '[object Object]' },
    ],
  ])('%s', async (_what, handler, error) => {
    const store = new MemoryCheckpointStore();
    const r = await runnerOn(store, registryWith('odd', handler, {})).run(
      flowCalling('odd'),
      {},
      { runId: 'odd' },
    );
    expect(r).toMatchObject({
      status: 'done',
      state: { r: { error: { failed: true, errorName: error.name } } },
    });
    const log = (await logOf(store, 'odd')).filter((b) => b.tool === 'odd');
    expect(log.map((b) => b.phase)).toEqual(['started', 'done']);
    expect(log[1]).toMatchObject({ outcome: { ok: false, error } });
  });
});

describe('Tool policies: retry', () => {
  it('retries a tool that throws: every attempt logged `started` (attempt, previous error), one `done`, the same idempotency key', async () => {
    const keys: string[] = [];
    let tries = 0;
    const registry = registryWith(
      'book',
      () => {
        keys.push(idempotencyKey());
        if (++tries < 3) throw new Error(`busy ${tries}`);
        return 'booked';
      },
      { retry: { attempts: 3 } },
    );
    const store = new MemoryCheckpointStore();
    const r = await runnerOn(store, registry).run(
      flowCalling('book'),
      {},
      { runId: 'r1' },
    );
    expect(r).toMatchObject({ status: 'done', state: { r: 'booked' } });
    expect(tries).toBe(3);
    expect(new Set(keys).size).toBe(1);
    const log = (await logOf(store, 'r1')).filter((b) => b.tool === 'book');
    expect(log.map((b) => b.phase)).toEqual([
      'started',
      'started',
      'started',
      'done',
    ]);
    expect(log[0]).not.toHaveProperty('attempt');
    expect(log[0]).not.toHaveProperty('previous');
    expect(log[1]).toMatchObject({
      attempt: 2,
      previous: { name: 'Error', message: 'busy 1' },
      args: { seat: 7 },
    });
    expect(log[2]).toMatchObject({
      attempt: 3,
      previous: { name: 'Error', message: 'busy 2' },
    });
    expect(log[3]).toMatchObject({
      attempts: 3,
      outcome: { ok: true, value: 'booked' },
    });
  });

  it('a call that needs no retry logs exactly what it did before (no attempt fields)', async () => {
    const registry = registryWith('book', () => 'booked', {
      retry: { attempts: 3 },
    });
    const store = new MemoryCheckpointStore();
    await runnerOn(store, registry).run(
      flowCalling('book'),
      {},
      { runId: 'x' },
    );
    const log = (await logOf(store, 'x')).filter((b) => b.tool === 'book');
    expect(log.map((b) => b.phase)).toEqual(['started', 'done']);
    for (const b of log) {
      expect(b).not.toHaveProperty('attempt');
      expect(b).not.toHaveProperty('attempts');
    }
  });

  it('gives up after `attempts`: the last error is sealed, the node gets it; backoff(attempt) is waited between tries', async () => {
    const asked: number[] = [];
    let tries = 0;
    const registry = registryWith(
      'book',
      () => {
        throw new RangeError(`no seats ${++tries}`);
      },
      {
        retry: {
          attempts: 3,
          backoff: (attempt) => {
            asked.push(attempt);
            return 20 * attempt;
          },
        },
      },
    );
    const store = new MemoryCheckpointStore();
    const t0 = Date.now();
    const r = await runnerOn(store, registry).run(
      flowCalling('book'),
      {},
      { runId: 'g' },
    );
    expect(Date.now() - t0).toBeGreaterThanOrEqual(20 + 40 - 2);
    expect(tries).toBe(3);
    expect(asked).toEqual([1, 2]);
    expect(r.state.r).toEqual({
      error: {
        class: 'ToolFailed',
        failed: true,
        timeout: false,
        errorName: 'RangeError',
        message: 'no seats 3',
        replayed: false,
      },
    });
    const done = (await logOf(store, 'g')).find((b) => b.phase === 'done');
    expect(done).toMatchObject({
      tool: 'book',
      attempts: 3,
      outcome: {
        ok: false,
        error: { name: 'RangeError', message: 'no seats 3' },
      },
    });
  });

  it('a number backoff waits that long before each retry', async () => {
    let tries = 0;
    const at: number[] = [];
    const registry = registryWith(
      'book',
      () => {
        at.push(Date.now());
        if (++tries < 2) throw new Error('busy');
        return 'ok';
      },
      { retry: { attempts: 2, backoff: 40 } },
    );
    await runnerOn(new MemoryCheckpointStore(), registry).run(
      flowCalling('book'),
      {},
    );
    expect(at).toHaveLength(2);
    expect(at[1]! - at[0]!).toBeGreaterThanOrEqual(38);
  });

  it('replay after recovery: the final error of a retried call replays as the same ToolFailed, the tool does not run again', async () => {
    let tries = 0;
    const r = await crashedAfterThenRecovered('book', 'rp', (after) =>
      registryWith(
        'book',
        () => {
          throw new TypeError(`declined ${++tries}`);
        },
        { retry: { attempts: 2 } },
        after,
      ),
    );
    expect(tries).toBe(2); // replayed, not retried again
    expect(r).toMatchObject({
      status: 'done',
      state: {
        after: 'after',
        r: {
          error: {
            class: 'ToolFailed',
            errorName: 'TypeError',
            message: 'declined 2',
            replayed: true,
          },
        },
      },
    });
  });

  it.each([
    [
      'before the second attempt is stored',
      'before' as const,
      'started, no result recorded',
    ],
    [
      'after the second attempt is stored',
      'after' as const,
      'started (attempt 2), no result recorded',
    ],
  ])(
    'a crash between attempts (%s) leaves a non-idempotent call in doubt: recovery needs a decision, writes nothing',
    async (_what, moment, why) => {
      let tries = 0;
      const store = new MemoryCheckpointStore();
      const dying = new CrashingStore(
        store,
        (w, m) =>
          m === moment &&
          w.calls.some((c) => bodyOf(c.record.sealed).attempt === 2),
      );
      const registry = registryWith(
        'book',
        () => {
          if (++tries < 2) throw new Error('busy');
          return 'booked';
        },
        { retry: { attempts: 3 } },
      );
      await diesOn(
        runnerOn(dying, registry).run(flowCalling('book'), {}, { runId: 'c' }),
      );
      expect(tries).toBe(1); // attempt 2 never ran
      const before = await store.history('c');
      const w2 = runnerOn(store, registry);
      expect(await callsInDoubt(w2.recover(flowCalling('book'), 'c'))).toEqual([
        ['book', why],
      ]);
      expect(await store.history('c')).toEqual(before);
      // Checked at its system: rerun. The call starts over (attempt 1) with its own budget.
      tries = 0;
      const r = await w2.recover(flowCalling('book'), 'c', {
        rerunInDoubt: true,
      });
      expect(r).toMatchObject({ status: 'done', state: { r: 'booked' } });
      expect(tries).toBe(2);
    },
  );

  it('a crash between attempts of an idempotent tool: recovery reruns it without a decision', async () => {
    let tries = 0;
    const store = new MemoryCheckpointStore();
    const dying = new CrashingStore(
      store,
      (w, m) =>
        m === 'before' &&
        w.calls.some((c) => bodyOf(c.record.sealed).attempt === 2),
    );
    const registry = registryWith(
      'lookup',
      () => {
        if (++tries === 1) throw new Error('flaky');
        return 'found';
      },
      { idempotent: true, retry: { attempts: 2 } },
    );
    await diesOn(
      runnerOn(dying, registry).run(flowCalling('lookup'), {}, { runId: 'i' }),
    );
    const r = await runnerOn(store, registry).recover(
      flowCalling('lookup'),
      'i',
    );
    expect(r).toMatchObject({ status: 'done', state: { r: 'found' } });
  });

  it('a worker cut off during a backoff starts no further attempt (fenced)', async () => {
    const store = new MemoryCheckpointStore();
    const byW1: string[] = [];
    let failed!: () => void;
    const firstFailed = new Promise<void>((r) => (failed = r));
    const w1 = runnerOn(
      store,
      registryWith(
        'book',
        () => {
          byW1.push('attempt');
          failed();
          throw new Error('busy');
        },
        // Long enough for w2 to take the run over before w1 would retry.
        { retry: { attempts: 5, backoff: 400 } },
      ),
    );
    const first = w1
      .run(flowCalling('book'), {}, { runId: 'f' })
      .catch((e: unknown) => e);
    await firstFailed;
    await sleep(5);
    // Another worker takes the run over while w1 waits to retry.
    const w2 = runnerOn(
      store,
      registryWith('book', () => 'booked by w2', { retry: { attempts: 5 } }),
    );
    const r = await w2.recover(flowCalling('book'), 'f', {
      rerunInDoubt: true,
    });
    expect(r.state.r).toBe('booked by w2');
    expect(await first).toBeInstanceOf(CheckpointConflict);
    expect(byW1).toEqual(['attempt']);
  });

  it.each<[string, () => number, string]>([
    ['gives a negative delay', () => -1, 'gave -1'],
    ['gives NaN', () => Number.NaN, 'gave NaN'],
    [
      'throws',
      () => {
        throw new Error('oops');
      },
      'gave an error \\(oops\\)',
    ],
  ])(
    'a backoff function that %s ends the call with a TypeError naming the tool and retry.backoff',
    async (_what, backoff, gave) => {
      let tries = 0;
      const registry = registryWith(
        'book',
        () => {
          tries++;
          throw new Error('busy');
        },
        { retry: { attempts: 3, backoff } },
      );
      const r = await runnerOn(new MemoryCheckpointStore(), registry).run(
        flowCalling('book'),
        {},
      );
      expect(tries).toBe(1);
      expect(r.state.r).toMatchObject({
        error: {
          errorName: 'TypeError',
          message: expect.stringMatching(
            new RegExp(
              `^Tool "book": retry\\.backoff\\(1\\) ${gave}; .*failed with Error: busy`,
            ),
          ) as unknown,
        },
      });
    },
  );
});

describe('Tool policies: timeoutMs', () => {
  it('an idempotent tool that takes too long: the node gets ToolTimeout at once, sealed as the call`s error', async () => {
    let late = false;
    const registry = registryWith(
      'lookup',
      async () => {
        await sleep(400);
        late = true;
        return 'late';
      },
      { idempotent: true, timeoutMs: 15 },
    );
    const store = new MemoryCheckpointStore();
    const t0 = Date.now();
    const r = await runnerOn(store, registry).run(
      flowCalling('lookup'),
      {},
      { runId: 't' },
    );
    expect(Date.now() - t0).toBeLessThan(300); // did not wait for the tool
    expect(late).toBe(false);
    expect(r).toMatchObject({
      status: 'done',
      state: {
        r: {
          error: {
            class: 'ToolTimeout',
            failed: true,
            timeout: true,
            errorName: 'ToolTimeout',
            message:
              '"lookup" did not finish within 15 ms (timeoutMs); it may still be running',
            replayed: false,
          },
        },
      },
    });
    const log = (await logOf(store, 't')).filter((b) => b.tool === 'lookup');
    expect(log.map((b) => b.phase)).toEqual(['started', 'done']);
    expect(log[1]).toMatchObject({
      outcome: { ok: false, error: { name: 'ToolTimeout' } },
    });
  });

  it('replay after recovery: a sealed timeout replays as the same ToolTimeout, the tool does not run again', async () => {
    let runs = 0;
    const r = await crashedAfterThenRecovered('lookup', 'tr', (after) =>
      registryWith(
        'lookup',
        async () => {
          runs++;
          await sleep(100);
          return 'late';
        },
        { idempotent: true, timeoutMs: 10 },
        after,
      ),
    );
    expect(runs).toBe(1);
    expect(r.state.r).toMatchObject({
      error: { class: 'ToolTimeout', errorName: 'ToolTimeout', replayed: true },
    });
  });

  it('a tool that is not idempotent and times out is in doubt: the node gets ToolTimeout, a recovery of the superstep needs a decision', async () => {
    let charges = 0;
    const store = new MemoryCheckpointStore();
    const dying = new CrashingStore(store);
    const registry = (after: () => unknown, ms = 100) =>
      registryWith(
        'charge',
        async () => {
          charges++;
          await sleep(ms);
          return 'charged';
        },
        { timeoutMs: 15 },
        after,
      );
    let seenLive: unknown;
    const flow = flowCalling('charge');
    await diesOn(
      runnerOn(
        dying,
        registry(() => {
          seenLive = 'after ran';
          dying.kill();
        }),
      ).run(flow, {}, { runId: 'nd' }),
    );
    expect(seenLive).toBe('after ran'); // the node went on after its ToolTimeout
    const log = (await logOf(store, 'nd')).filter((b) => b.tool === 'charge');
    expect(log.map((b) => b.phase)).toEqual(['started', 'unrecordable']);
    expect(log[1]?.reason).toBe(
      'timed out after 15 ms; it may still be running',
    );
    const before = await store.history('nd');
    const w2 = runnerOn(
      store,
      registry(() => 'after', 0),
    );
    expect(await callsInDoubt(w2.recover(flow, 'nd'))).toEqual([
      [
        'charge',
        'ran, but its result could not be recorded (timed out after 15 ms; it may still be running)',
      ],
    ]);
    expect(await store.history('nd')).toEqual(before);
    expect(charges).toBe(1);
    const r = await w2.recover(flow, 'nd', { rerunInDoubt: true });
    expect(r).toMatchObject({ status: 'done', state: { r: 'charged' } });
    expect(charges).toBe(2);
  });

  it('a tool that is not idempotent is never retried after a timeout (its first attempt may still be running)', async () => {
    let charges = 0;
    const registry = registryWith(
      'charge',
      async () => {
        charges++;
        await sleep(60);
        return 'charged';
      },
      { timeoutMs: 10, retry: { attempts: 3 } },
    );
    const store = new MemoryCheckpointStore();
    const r = await runnerOn(store, registry).run(
      flowCalling('charge'),
      {},
      { runId: 'nr' },
    );
    expect(charges).toBe(1);
    expect(r.state.r).toMatchObject({ error: { class: 'ToolTimeout' } });
    const log = (await logOf(store, 'nr')).filter((b) => b.tool === 'charge');
    expect(log.map((b) => b.phase)).toEqual(['started', 'unrecordable']);
    await sleep(70); // the abandoned attempt finishes quietly
  });

  it('an idempotent tool is retried after a timeout; the next attempt records the timeout as its previous error', async () => {
    let runs = 0;
    const registry = registryWith(
      'lookup',
      async () => {
        if (++runs === 1) await sleep(80);
        return `found on ${runs}`;
      },
      { idempotent: true, timeoutMs: 20, retry: { attempts: 2 } },
    );
    const store = new MemoryCheckpointStore();
    const r = await runnerOn(store, registry).run(
      flowCalling('lookup'),
      {},
      { runId: 'ir' },
    );
    expect(r.state.r).toBe('found on 2');
    const log = (await logOf(store, 'ir')).filter((b) => b.tool === 'lookup');
    expect(log[1]).toMatchObject({
      phase: 'started',
      attempt: 2,
      previous: { name: 'ToolTimeout' },
    });
    expect(log[2]).toMatchObject({ phase: 'done', attempts: 2 });
  });

  it('a tool that finishes in time is unaffected; an uncaught timeout fails the run with ToolTimeout', async () => {
    const fast = registryWith('lookup', () => 'quick', {
      idempotent: true,
      timeoutMs: 1000,
    });
    const ok = await runnerOn(new MemoryCheckpointStore(), fast).run(
      flowCalling('lookup'),
      {},
    );
    expect(ok.state.r).toBe('quick');

    const registry = new ToolRegistry().register('slow', () => sleep(60), {
      timeoutMs: 10,
    });
    const flow = new Flow('uncaught')
      .node('n', async (_s, ctx) => ({ r: await ctx.call('slow') }))
      .end('n');
    const r = await runnerOn(new MemoryCheckpointStore(), registry).run(
      flow,
      {},
    );
    expect(r).toMatchObject({
      status: 'failed',
      error: { name: 'ToolTimeout', node: 'n' },
    });
    await sleep(60);
  });
});
