import { Logger } from '@nestjs/common';
import {
  CheckpointConflict,
  RecoveryNeedsDecision,
  RunLeaseHeld,
} from '../errors';
import { DurableEvents } from '../events/durable.events';
import type { CheckpointStore } from '../exec/checkpoints/checkpoint-store';
import type { Flow as CoreFlow } from '../flow/flow.builder';
import type { RecoveryOutcome, RunResult } from '../flow/flow.interfaces';
import type { DurableEventsBridge } from './durable-events.bridge';
import type { DurableFlowRunner } from './durable-flow.runner';
import { RESWEEP_MARGIN_MS } from './durable.constants';
import { FlowRegistry } from './flow.registry';
import type { ResolvedDurableOptions } from './durable.providers';
import type { DurableModuleExtras } from './interfaces/durable-module-options.interface';
import { RecoveryOrchestrator } from './recovery.orchestrator';
import type { DurableToolLoop, ToolLoopRunner } from './tool-loop.runner';

type Outcome = RunResult<object> | Error;

/**
 * `n` outcomes: i → what the sweep of run i gives. Like `recoverEach`, it starts nothing more once
 * its `signal` is aborted.
 */
function outcomes(n: number, of: (i: number) => Outcome) {
  const sweep = { pulled: 0, closed: false };
  async function* each(
    options: { signal?: AbortSignal } = {},
  ): AsyncGenerator<RecoveryOutcome<Outcome>> {
    try {
      for (let i = 0; i < n && !options.signal?.aborted; i++) {
        sweep.pulled++;
        yield [`run-${i}`, of(i)];
      }
    } finally {
      sweep.closed = true;
    }
  }
  return { sweep, each };
}

type Sweep = (options?: {
  signal?: AbortSignal;
}) => AsyncGenerator<RecoveryOutcome<Outcome>>;

function orchestrator(
  flowSweep: Sweep,
  loopSweeps: Array<[string, Sweep]> = [],
  more: {
    events?: DurableEvents;
    store?: Partial<CheckpointStore>;
    recoverOnBoot?: boolean;
  } = {},
) {
  const runner = {
    core: {
      recoverEach: (_flow: unknown, options: { signal?: AbortSignal }) =>
        flowSweep(options),
      drain: () => Promise.resolve(0),
    },
  } as unknown as DurableFlowRunner;
  const flows = new FlowRegistry();
  flows.register({
    flow: { name: 'tickets' } as CoreFlow<object>,
    cls: class TicketsFlow {},
    where: 'TicketsFlow (test)',
  });
  const loops = {
    all: () =>
      loopSweeps.map(
        ([name, each]) =>
          ({
            name,
            recoverEach: (options: { signal?: AbortSignal }) => each(options),
          }) as unknown as DurableToolLoop,
      ),
    markSwept: () => undefined,
    drain: () => [],
  } as unknown as ToolLoopRunner;
  return new RecoveryOrchestrator(
    runner,
    flows,
    { ready: () => Promise.resolve() } as unknown as DurableEventsBridge,
    loops,
    {
      recoveryConcurrency: 4,
      store: more.store,
    } as unknown as ResolvedDurableOptions,
    { recoverOnBoot: more.recoverOnBoot ?? false } as DurableModuleExtras,
    more.events,
  );
}

const done = (i: number): RunResult<object> => ({
  runId: `run-${i}`,
  status: 'done',
  step: 3,
  state: {},
});

/**
 * Every line Nest's Logger writes in the enclosing describe's tests, as `level: message`; the
 * array is emptied before each test.
 */
function captureLogLines(): string[] {
  const lines: string[] = [];
  beforeEach(() => {
    lines.length = 0;
    for (const level of ['log', 'warn', 'error'] as const)
      jest
        .spyOn(Logger.prototype, level)
        .mockImplementation((message: unknown, ..._rest: unknown[]) => {
          lines.push(`${level}: ${String(message)}`);
        });
  });
  afterEach(() => jest.restoreAllMocks());
  return lines;
}

describe('RecoveryOrchestrator.sweep', () => {
  const lines = captureLogLines();

  it('streams the outcomes: one log line per run, every run counted, at most 1,000 ids kept per outcome', async () => {
    const until = Date.now() - 1; // held runs, but no re-sweep (resweep is off)
    const { sweep, each } = outcomes(2_600, (i) =>
      i % 10 === 9
        ? new RecoveryNeedsDecision(`run-${i}`, [['charge_card', 'started']])
        : i % 10 === 8
          ? new RunLeaseHeld(`run-${i}`, 'w1', until)
          : i % 100 === 7
            ? new Error('boom')
            : done(i),
    );
    const summary = await orchestrator(each).sweep();
    expect(summary.counts).toEqual({
      recovered: 2_054,
      needsDecision: 260,
      held: 260,
      elsewhere: 0,
      accessDenied: 0,
      failed: 26,
    });
    expect(summary.recovered).toHaveLength(1_000);
    expect(summary.recovered.slice(0, 3)).toEqual(['run-0', 'run-1', 'run-2']);
    expect(summary.needsDecision).toHaveLength(260);
    expect(summary.held).toHaveLength(260);
    expect(summary.failed).toHaveLength(26);
    expect(sweep).toEqual({ pulled: 2_600, closed: true });
    // One line per run, then the total.
    expect(lines).toHaveLength(2_601);
    expect(lines[0]).toBe(
      'log: Run "run-0" of flow "tickets" recovered: done at step 3.',
    );
    expect(lines.filter((l) => l.includes('needs a decision'))).toHaveLength(
      260,
    );
    expect(lines.at(-1)).toBe(
      'log: Recovery sweep done: 2600 unfinished run(s) in 1 flow(s): 2054 recovered, 260 need a decision, 260 held by another worker, 26 failed.',
    );
  });

  it("goes on with the next flow or loop when one's listing fails, reporting what it recovered", async () => {
    async function* failing(): AsyncGenerator<RecoveryOutcome<Outcome>> {
      yield ['run-0', done(0)];
      throw new Error('connection lost');
    }
    const loop = outcomes(2, done);
    const summary = await orchestrator(failing, [
      ['support', loop.each],
    ]).sweep();
    expect(summary.recovered).toEqual(['run-0', 'run-0', 'run-1']);
    expect(lines).toEqual([
      'log: Run "run-0" of flow "tickets" recovered: done at step 3.',
      'error: Recovery of flow "tickets" could not list its runs: Error: connection lost',
      'log: Run "run-0" of flow "support" recovered: done at step 3.',
      'log: Run "run-1" of flow "support" recovered: done at step 3.',
      'log: Recovery sweep done: 3 unfinished run(s) in 1 flow(s) and 1 tool loop(s): 3 recovered.',
    ]);
  });

  it('starts no more recoveries once the application shuts down, and reports those already started', async () => {
    const { sweep, each } = outcomes(500, (i) => {
      if (i === 10) void o.beforeApplicationShutdown();
      return done(i);
    });
    const o = orchestrator(each);
    const summary = await o.sweep();
    expect(sweep).toEqual({ pulled: 11, closed: true });
    expect(summary.counts.recovered).toBe(11);
  });
});

describe('RecoveryOrchestrator: log lines an operator can trust (issue 15 item 7)', () => {
  const lines = captureLogLines();

  it('logs a lost recovery race (CheckpointConflict) as another worker having it, never at error', async () => {
    const { each } = outcomes(
      1,
      () =>
        new CheckpointConflict(
          'Run "run-0": step 3 is already saved (at step 3).',
          'run-0',
        ),
    );
    const store = {
      head: (runId: string) =>
        Promise.resolve({ runId, owner: 'w-2' } as never),
    };
    const summary = await orchestrator(each, [], { store }).sweep();
    expect(lines).toEqual([
      'log: Run "run-0" of flow "tickets": another worker (w-2) recovered it first; nothing to do here.',
      'log: Recovery sweep done: 1 unfinished run(s) in 1 flow(s): 1 recovered by another worker first.',
    ]);
    expect(summary.elsewhere).toEqual(['run-0']);
    expect(summary.counts.failed).toBe(0);
  });

  it('a run that waits for a time: "sleeps until", a paused one with its deadline; neither "recovered"', async () => {
    const at = Date.UTC(2031, 0, 2, 3, 4, 5);
    const iso = new Date(at).toISOString();
    const waiting: RunResult<object>[] = [
      { ...done(0), status: 'sleeping', wakeAt: at },
      {
        ...done(1),
        status: 'paused',
        pending: {
          node: 'n',
          index: 0,
          tool: 'refund',
          args: {},
          argsHash: 'h',
          deadline: at,
          onTimeout: 'fail',
        },
      },
    ];
    const { each } = outcomes(2, (i) => waiting[i]!);
    await orchestrator(each).sweep();
    expect(lines.slice(0, 2)).toEqual([
      `log: Run "run-0" of flow "tickets" sleeps until ${iso}: a worker with a takeover wakes it then.`,
      `warn: Run "run-1" of flow "tickets" is paused, waiting for an approval: resume it with its decision by its deadline (${iso}), when the clock fails the run.`,
    ]);
  });

  it('says which worker holds a lease and until when, and that it retries then', async () => {
    // An hour from now: a fixed date would schedule a real re-sweep once the clock reached it.
    const until = Date.now() + 3_600_000;
    const iso = new Date(until).toISOString();
    const { each } = outcomes(1, () => new RunLeaseHeld('run-0', 'w-2', until));
    const first = orchestrator(each);
    await first.sweep({ resweep: true });
    await first.beforeApplicationShutdown(); // clears the re-sweep it scheduled
    expect(lines[0]).toBe(
      `log: Run "run-0" of flow "tickets": worker "w-2" holds its lease until ${iso} (it may be alive), so it was not taken; retrying then.`,
    );
    lines.length = 0;
    await orchestrator(each).sweep();
    expect(lines[0]).toContain(
      `worker "w-2" holds its lease until ${iso} (it may be alive), so it was not taken; not retried by this sweep`,
    );
  });

  it('logs the boot summary once, with its counts, and the lease re-sweep on its own labelled line', async () => {
    let sweeps = 0;
    // At boot run-1 is held (a lease that has just expired: the re-sweep is due at once); the
    // re-sweep recovers it.
    async function* each(): AsyncGenerator<RecoveryOutcome<Outcome>> {
      sweeps++;
      if (sweeps === 1) {
        yield ['run-0', done(0)];
        yield [
          'run-1',
          new RunLeaseHeld('run-1', 'w-2', Date.now() - RESWEEP_MARGIN_MS),
        ];
      } else yield ['run-1', done(1)];
    }
    const o = orchestrator(each, [], { recoverOnBoot: true });
    o.onApplicationBootstrap();
    await o.waitUntilRecovered();
    const start = Date.now();
    while (sweeps < 2 || !lines.some((l) => l.includes('re-sweep'))) {
      if (Date.now() - start > 2_000) break;
      await new Promise((r) => setTimeout(r, 5));
    }
    const summaries = lines.filter((l) => / done: /.test(l));
    expect(summaries).toEqual([
      'log: Bootstrap recovery done: 2 unfinished run(s) in 1 flow(s): 1 recovered, 1 held by another worker.',
      'log: Lease re-sweep (runs held at bootstrap) done: 1 unfinished run(s) in 1 flow(s): 1 recovered.',
    ]);
    await o.beforeApplicationShutdown();
  });

  it('names the calls replayed and the calls run again (from run.recovered)', async () => {
    const events = new DurableEvents();
    const call = (tool: string, index: number) => ({ node: 'n', index, tool });
    async function* each(): AsyncGenerator<RecoveryOutcome<Outcome>> {
      // As the runner does: run.recovered is emitted before the recovery's outcome settles.
      events.emit('run.recovered', {
        kind: 'flow',
        runId: 'run-0',
        flow: 'tickets',
        step: 4,
        replayed: [
          call('charge_card', 0),
          call('hold_seats', 1),
          call('hold_seats', 2),
        ],
        rerun: [call('email_tickets', 3)],
      });
      yield ['run-0', { ...done(0), step: 4 }];
      events.emit('run.recovered', {
        kind: 'flow',
        runId: 'run-1',
        flow: 'tickets',
        step: 2,
        replayed: [],
        rerun: [],
      });
      yield ['run-1', { ...done(1), step: 2 }];
    }
    await orchestrator(each, [], { events }).sweep();
    expect(lines.slice(0, 2)).toEqual([
      'log: Run "run-0" of flow "tickets" recovered: done at step 4; replayed charge_card, hold_seats x2; ran again email_tickets (idempotent).',
      'log: Run "run-1" of flow "tickets" recovered: done at step 2; no finished call to replay, none run again.',
    ]);
  });
});
