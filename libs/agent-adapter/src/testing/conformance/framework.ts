import { Messages } from '../../errors/messages';

/**
 * The test framework the conformance suite declares its tests in: jest's or vitest's globals, or
 * the functions a caller passes (`import { describe, it, afterAll } from 'vitest'`). Only these
 * three are used, and assertions are node:assert, so the library depends on no test framework.
 */
export interface TestFramework {
  describe: (name: string, body: () => void) => void;
  it: (name: string, test: () => Promise<void>) => void;
  afterAll: (hook: () => Promise<void>) => void;
}

type Globals = Partial<Record<keyof TestFramework, unknown>>;

/** `given`, or the framework's globals; a clear error when neither is there. */
export function resolveFramework(given?: TestFramework): TestFramework {
  if (given) return given;
  const globals = globalThis as Globals;
  const { describe, it, afterAll } = globals;
  if (
    typeof describe !== 'function' ||
    typeof it !== 'function' ||
    typeof afterAll !== 'function'
  ) {
    throw new TypeError(Messages.conformanceNeedsFramework());
  }
  return globals as TestFramework;
}
