/**
 * Where the library reports what it cannot throw: a lease renewal that failed, a listener that
 * threw. Give one in the runner options (`logger`); the Nest module gives Nest's `Logger`.
 * `meta` is what goes with the message (usually the caught error), for the logger to print.
 * @publicApi
 */
export interface DurableLogger {
  warn(message: string, ...meta: unknown[]): void;
  error(message: string, ...meta: unknown[]): void;
}

/** The default: the process's console (`console.warn`, `console.error`), looked up at each call. */
export const consoleLogger: DurableLogger = {
  warn: (message, ...meta) => console.warn(message, ...meta),
  error: (message, ...meta) => console.error(message, ...meta),
};
