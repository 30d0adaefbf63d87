import { Logger } from '@nestjs/common';
import { RecoveryNeedsDecision, RunLeaseHeld } from '../errors';
import type { RecoveryOutcome, RunResult } from '../flow/flow.interfaces';
import type { DurableEventsBridge } from './durable-events.bridge';
import type { DurableFlowRunner } from './durable-flow.runner';
import type { DurableExplorer } from './durable.explorer';
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
) {
  const runner = {
    core: {
      recoverEach: (_flow: unknown, options: { signal?: AbortSignal }) =>
        flowSweep(options),
    },
    close: () => undefined,
  } as unknown as DurableFlowRunner;
  const explorer = {
    flows: () => [{ flow: { name: 'tickets' } }],
  } as unknown as DurableExplorer;
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
    close: () => undefined,
  } as unknown as ToolLoopRunner;
  return new RecoveryOrchestrator(
    runner,
    explorer,
    {} as DurableEventsBridge,
    loops,
    { recoveryConcurrency: 4 } as ResolvedDurableOptions,
    { recoverOnBoot: false } as DurableModuleExtras,
  );
}

const done = (i: number): RunResult<object> => ({
  runId: `run-${i}`,
  status: 'done',
  step: 3,
  state: {},
});

describe('RecoveryOrchestrator.sweep', () => {
  let lines: string[];
  beforeEach(() => {
    lines = [];
    for (const level of ['log', 'warn', 'error'] as const)
      jest
        .spyOn(Logger.prototype, level)
        .mockImplementation((message: unknown, ..._rest: unknown[]) => {
          lines.push(`${level}: ${String(message)}`);
        });
  });
  afterEach(() => jest.restoreAllMocks());

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
      'log: Bootstrap recovery done: 2600 unfinished run(s) in 1 flow(s).',
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
      'log: Bootstrap recovery done: 3 unfinished run(s) in 1 flow(s) and 1 tool loop(s).',
    ]);
  });

  it('starts no more recoveries once the application shuts down, and reports those already started', async () => {
    const { sweep, each } = outcomes(500, (i) => {
      if (i === 10) o.beforeApplicationShutdown();
      return done(i);
    });
    const o = orchestrator(each);
    const summary = await o.sweep();
    expect(sweep).toEqual({ pulled: 11, closed: true });
    expect(summary.counts.recovered).toBe(11);
  });
});
