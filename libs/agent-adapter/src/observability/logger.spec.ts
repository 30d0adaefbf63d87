/**
 * The logger port: what the runner cannot throw goes to its `logger` (the console by default).
 */
import {
  DurableError,
  DurableEvents,
  Executor,
  Flow,
  FlowRunner,
  MemoryCheckpointStore,
  ToolRegistry,
  type DurableLogger,
} from 'agent-adapter';
import { normalizeRunnerOptions } from '../flow/runner/flow-runner.options';

class S {
  note = '';
}

const flow = () =>
  new Flow('logged', { state: S }).node('a', () => ({ note: 'a' })).end('a');

function recording(): DurableLogger & { lines: string[] } {
  const lines: string[] = [];
  return {
    lines,
    warn: (message, ...meta) =>
      lines.push(`warn ${message} ${meta.map(String).join(' ')}`),
    error: (message, ...meta) =>
      lines.push(`error ${message} ${meta.map(String).join(' ')}`),
  };
}

describe('DurableLogger', () => {
  afterEach(() => jest.restoreAllMocks());

  it("gets a checkpoint.saved listener's failure, and the default events' listener errors", async () => {
    const logger = recording();
    const events = new DurableEvents(() => {
      throw new Error('reporter bug');
    });
    events.on('checkpoint.saved', () => {
      throw new Error('listener bug');
    });
    const runner = new FlowRunner(new Executor(new ToolRegistry()), {
      logger,
      events,
    });
    expect((await runner.run(flow(), {})).status).toBe('done');
    expect(logger.lines).toContain(
      'warn agent-adapter: a checkpoint.saved listener failed Error: reporter bug',
    );

    const own = recording();
    const settings = normalizeRunnerOptions({ logger: own });
    settings.events.on('run.recovered', () => {
      throw new Error('listener bug');
    });
    settings.events.emit('run.recovered', {
      kind: 'flow',
      runId: 'r',
      step: 1,
      replayed: [],
      rerun: [],
    });
    expect(own.lines).toEqual([
      'error agent-adapter: a "run.recovered" listener threw Error: listener bug',
    ]);
  });

  it('gets a failed lease renewal', async () => {
    const logger = recording();
    const store = new MemoryCheckpointStore();
    jest.spyOn(store, 'renewLeases').mockRejectedValue(new Error('store down'));
    let release!: () => void;
    const blocked = new Promise<void>((r) => (release = r));
    const registry = new ToolRegistry().register('wait', async () => {
      await blocked;
      return 'ok';
    });
    const runner = new FlowRunner(new Executor(registry), {
      checkpoints: store,
      leaseMs: 100,
      workerId: 'w1',
      logger,
    });
    const waiting = new Flow('renewing', { state: S })
      .node('a', async (_s, ctx) => ({ note: await ctx.call<string>('wait') }))
      .end('a');
    const run = runner.run(waiting, {});
    await new Promise((r) => setTimeout(r, 250));
    release();
    await run;
    runner.close();
    expect(logger.lines[0]).toBe(
      'warn agent-adapter: lease renewal failed for worker w1 Error: store down',
    );
  });

  it('is the console by default', () => {
    const warn = jest.spyOn(console, 'warn').mockImplementation(() => {});
    const error = jest.spyOn(console, 'error').mockImplementation(() => {});
    const { logger, events } = normalizeRunnerOptions();
    logger.warn('w', 1);
    events.on('checkpoint.saved', () => {
      throw new Error('x');
    });
    events.emit('checkpoint.saved', {
      kind: 'flow',
      runId: 'r',
      step: 1,
      status: 'done',
    });
    expect(warn).toHaveBeenCalledWith('w', 1);
    expect(error).toHaveBeenCalledWith(
      'agent-adapter: a "checkpoint.saved" listener threw',
      expect.any(Error),
    );
  });

  it('is refused unless it has warn and error (DurableSetupError)', () => {
    for (const logger of [{}, { warn: () => {} }, 'console']) {
      expect(
        () =>
          new FlowRunner(new Executor(new ToolRegistry()), {
            logger: logger as unknown as DurableLogger,
          }),
      ).toThrow(
        expect.objectContaining({
          name: 'DurableSetupError',
          message: expect.stringContaining('FlowRunner: logger must be'),
        }) as Error,
      );
    }
    expect(new DurableError('x')).toBeInstanceOf(Error);
  });
});
