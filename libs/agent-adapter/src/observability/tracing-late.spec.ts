/**
 * Spans go to an SDK only once one is registered: before, `traced` runs its function without a
 * span (and without the no-op span machinery); after, the same code path makes real spans.
 */
import { trace } from '@opentelemetry/api';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { traced } from './tracing';

afterAll(() => trace.disable());

it('without an SDK the function gets no span; an SDK registered later gets the spans from then on', async () => {
  expect(
    await traced(
      'before',
      () => ({}),
      async (span) => span,
    ),
  ).toBeUndefined();

  const exporter = new InMemorySpanExporter();
  trace.setGlobalTracerProvider(
    new BasicTracerProvider({
      spanProcessors: [new SimpleSpanProcessor(exporter)],
    }),
  );
  const span = await traced(
    'after',
    () => ({ n: 1 }),
    async (s) => s,
  );
  expect(span).toBeDefined();
  const finished = exporter.getFinishedSpans();
  expect(finished.map((s) => s.name)).toEqual(['after']);
  expect(finished[0]!.attributes).toEqual({ n: 1 });
});
