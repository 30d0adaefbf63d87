/**
 * OpenTelemetry spans, when the application has the optional peer `@opentelemetry/api` (and
 * registers an SDK): one span per run segment (`agent-adapter.run`), per superstep
 * (`agent-adapter.superstep`) and per tool call (`agent-adapter.tool`), with the run id, the step
 * and whether a call was replayed or ran again; `checkpoint.saved` and `run.recovered` are events
 * of the active span. Without the package every function here is a pass-through.
 *
 * Attributes carry identifiers and flags only: never state, arguments or results.
 */

import { loadOptionalPackage } from '../peers/optional-packages';

export type SpanAttributes = Record<string, string | number | boolean>;

/** The part of an OpenTelemetry span used here. */
export interface SpanLike {
  setAttribute(key: string, value: string | number | boolean): unknown;
  addEvent(name: string, attributes?: SpanAttributes): unknown;
  recordException(exception: Error): unknown;
  setStatus(status: { code: number; message?: string }): unknown;
  end(): void;
}

interface Tracer {
  startActiveSpan<T>(
    name: string,
    options: { attributes?: SpanAttributes },
    fn: (span: SpanLike) => T,
  ): T;
}

interface OtelApi {
  trace: {
    getTracerProvider(): {
      getTracer(name: string): Tracer;
      /** On the API's global proxy provider: the registered SDK's tracer, undefined without one. */
      getDelegateTracer?(name: string): Tracer | undefined;
    };
    getActiveSpan(): SpanLike | undefined;
  };
}

/** SpanStatusCode.ERROR */
const ERROR = 2;

let api: OtelApi | null | undefined;

function otel(): OtelApi | null {
  if (api === undefined) {
    try {
      api = loadOptionalPackage<OtelApi>('@opentelemetry/api') ?? null; // not installed: no tracing
    } catch {
      api = null; // installed but broken: no tracing either, never an error
    }
  }
  return api;
}

/**
 * Runs `fn` in a span named `name` (the active span for what it starts, so nested spans and
 * events land inside it). A thrown error is recorded on the span, unless `isError` says it is not
 * one (a pause). The attributes are asked for only when there is a span to put them on (this
 * wraps every superstep and tool call).
 */
export function traced<T>(
  name: string,
  attributes: () => SpanAttributes,
  fn: (span: SpanLike | undefined) => Promise<T>,
  isError: (error: unknown) => boolean = () => true,
): Promise<T> {
  const tracer = activeTracer();
  if (!tracer) return fn(undefined);
  const options = { attributes: attributes() };
  return tracer.startActiveSpan(name, options, async (span) => {
    try {
      return await fn(span);
    } catch (error) {
      if (isError(error)) {
        if (error instanceof Error) span.recordException(error);
        span.setStatus({
          code: ERROR,
          message: error instanceof Error ? error.message : String(error),
        });
      }
      throw error;
    } finally {
      span.end();
    }
  });
}

/**
 * The tracer spans go to, or undefined when they would go nowhere: the API is not installed, or no
 * SDK has registered a provider behind the API's global proxy. Every superstep and tool call asks,
 * and a no-op span still costs a tracer, a span, a context switch and two closures on that path.
 * Asked each time, so an SDK registered after the module loaded is used from then on.
 */
function activeTracer(): Tracer | undefined {
  const provider = otel()?.trace.getTracerProvider();
  if (!provider) return undefined;
  return provider.getDelegateTracer
    ? provider.getDelegateTracer('agent-adapter')
    : provider.getTracer('agent-adapter');
}

/**
 * An event on the active span, if there is one; its attributes are asked for only then (events
 * are emitted on every checkpoint).
 */
export function spanEvent(
  name: string,
  attributes: () => SpanAttributes,
): void {
  otel()?.trace.getActiveSpan()?.addEvent(name, attributes());
}

/** Whether there is an active span (for an event, see `spanEvent`). */
export function hasActiveSpan(): boolean {
  return otel()?.trace.getActiveSpan() !== undefined;
}
