/**
 * OpenTelemetry spans of a run, with the real SDK (in-memory exporter): a span per run segment,
 * per superstep and per tool call, nested; replayed and rerun calls flagged after a recovery;
 * `checkpoint.saved` and `run.recovered` as span events; no state or argument value anywhere.
 */
import { context, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
  type ReadableSpan,
} from '@opentelemetry/sdk-trace-base';
import {
  Executor,
  Flow,
  FlowRunner,
  MemoryCheckpointStore,
  ToolRegistry,
} from 'agent-adapter';
import { CrashingStore, SimulatedCrash, settle } from 'agent-adapter/testing';

const KEY = 'a-tracing-test-key-of-32-bytes!!';
const exporter = new InMemorySpanExporter();
const contextManager = new AsyncLocalStorageContextManager();

beforeAll(() => {
  context.setGlobalContextManager(contextManager.enable());
  trace.setGlobalTracerProvider(
    new BasicTracerProvider({
      spanProcessors: [new SimpleSpanProcessor(exporter)],
    }),
  );
});
afterAll(() => {
  trace.disable();
  context.disable();
});
beforeEach(() => exporter.reset());

interface S {
  secret: string;
  a?: string;
  b?: string;
}

function setup(kill?: () => void) {
  const registry = new ToolRegistry()
    .register('quote', (x: { secret: string }) => `quote for ${x.secret}`)
    .register(
      'mail',
      () => {
        kill?.();
        return 'mailed';
      },
      { idempotent: true },
    );
  const flow = new Flow<S>('traced')
    .node('one', async (s, ctx) => ({
      a: await ctx.call<string>('quote', { secret: s.secret }),
    }))
    .node('two', async (s, ctx) => {
      const again = await ctx.call<string>('quote', { secret: s.secret });
      return { b: `${again} / ${await ctx.call<string>('mail', {})}` };
    })
    .edge('one', 'two')
    .end('two');
  return { registry, flow };
}

const named = (name: string) =>
  exporter.getFinishedSpans().filter((s) => s.name === name);
const parentOf = (span: ReadableSpan) => span.parentSpanContext?.spanId;

describe('tracing', () => {
  it('a run: one run span, a span per superstep inside it, a span per tool call inside those', async () => {
    const { registry, flow } = setup();
    const runner = new FlowRunner(new Executor(registry), {
      checkpoints: new MemoryCheckpointStore(),
    });
    const r = await runner.run(
      flow,
      { secret: 'Hamlet-1234' },
      { runId: 'traced-1' },
    );
    runner.close();
    expect(r.status).toBe('done');

    const [run, ...more] = named('agent-adapter.run');
    expect(more).toEqual([]);
    expect(run!.attributes).toMatchObject({
      'agent_adapter.run_id': 'traced-1',
      'agent_adapter.flow': 'traced',
      'agent_adapter.reason': 'start',
      'agent_adapter.status': 'done',
    });
    const steps = named('agent-adapter.superstep');
    expect(steps.map((s) => s.attributes['agent_adapter.superstep'])).toEqual([
      0, 1,
    ]);
    for (const s of steps) expect(parentOf(s)).toBe(run!.spanContext().spanId);
    const tools = named('agent-adapter.tool');
    expect(
      tools.map((t) => [
        t.attributes['agent_adapter.tool'],
        t.attributes['agent_adapter.call_index'],
      ]),
    ).toEqual([
      ['quote', 0],
      ['quote', 0],
      ['mail', 1],
    ]);
    expect(parentOf(tools[0]!)).toBe(steps[0]!.spanContext().spanId);
    expect(parentOf(tools[2]!)).toBe(steps[1]!.spanContext().spanId);
    // Every checkpoint of the segment is an event of its span (step 0 is saved before it opens,
    // in the caller's span).
    expect(
      run!.events
        .filter((e) => e.name === 'checkpoint.saved')
        .map((e) => e.attributes?.['agent_adapter.step']),
    ).toEqual([1, 2]);
    // Identifiers and flags only: no state or argument value is in any span.
    expect(
      JSON.stringify(
        exporter.getFinishedSpans().map((s) => [s.attributes, s.events]),
      ),
    ).not.toMatch(/Hamlet-1234/);
  });

  it('a recovery: its own run span (reason claim) with run.recovered, the finished call flagged replayed, the call in doubt rerun', async () => {
    const store = new MemoryCheckpointStore();
    const dying = new CrashingStore(store);
    const first = setup(() => dying.kill('inside mail'));
    const worker = new FlowRunner(new Executor(first.registry), {
      checkpoints: dying,
      checkpointKey: KEY,
    });
    await expect(
      worker.run(first.flow, { secret: 'Lear-5678' }, { runId: 'traced-2' }),
    ).rejects.toThrow(SimulatedCrash);
    await settle();
    worker.close();
    // The dying segment's span ends in error.
    expect(named('agent-adapter.run')[0]!.status.code).toBe(2);
    exporter.reset();

    const second = setup();
    const recoverer = new FlowRunner(new Executor(second.registry), {
      checkpoints: store,
      checkpointKey: KEY,
    });
    const r = await recoverer.recover(second.flow, 'traced-2');
    recoverer.close();
    expect(r.status).toBe('done');
    const [run] = named('agent-adapter.run');
    expect(run!.attributes['agent_adapter.reason']).toBe('claim');
    expect(run!.events.map((e) => e.name)).toContain('run.recovered');
    const tools = named('agent-adapter.tool');
    const quote = tools.find(
      (t) => t.attributes['agent_adapter.tool'] === 'quote',
    );
    const mail = tools.find(
      (t) => t.attributes['agent_adapter.tool'] === 'mail',
    );
    expect(quote!.attributes['agent_adapter.replayed']).toBe(true);
    expect(mail!.attributes['agent_adapter.rerun']).toBe(true);
    expect(JSON.stringify(tools.map((t) => t.attributes))).not.toMatch(
      /Lear-5678/,
    );
  });
});
