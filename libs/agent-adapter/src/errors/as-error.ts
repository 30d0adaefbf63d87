/**
 * What was thrown, as an `Error`: an `Error` as it is, anything else (a string, an object) wrapped
 * in one with its text. The one place the library turns a caught value into an error.
 */
export function asError(thrown: unknown): Error {
  return thrown instanceof Error ? thrown : new Error(String(thrown));
}
