/**
 * What was thrown, as an `Error`: an `Error` as it is, anything else (a string, an object) wrapped
 * in one with its text. The one place the library turns a caught value into an error.
 */
export function asError(thrown: unknown): Error {
  return thrown instanceof Error ? thrown : new Error(textOf(thrown));
}

/** `String(thrown)`, or for an object with no text of its own (no prototype), its tag. */
function textOf(thrown: unknown): string {
  try {
    return String(thrown);
  } catch {
    return Object.prototype.toString.call(thrown);
  }
}
