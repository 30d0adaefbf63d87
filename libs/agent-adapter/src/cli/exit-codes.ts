/** Exit codes (also in docs/cli.md). */
export const EXIT = {
  ok: 0,
  /** verify/inspect found corrupt rows or a bad bundle. */
  problems: 1,
  /** The user's mistake: bad arguments, unknown URL scheme, missing key, unknown run, nothing to do. */
  usage: 2,
  /** The store could not be used (unreachable, tables missing) or an unexpected error. */
  failure: 3,
} as const;
