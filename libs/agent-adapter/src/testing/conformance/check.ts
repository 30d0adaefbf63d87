import assert from 'node:assert/strict';

/**
 * The few assertions the conformance suite makes, on node:assert. Values are compared as the
 * JSON they stand for (a property set to undefined is the same as a missing one; a store may
 * return class instances or plain objects alike).
 */
function plain(value: unknown): unknown {
  return value === undefined
    ? undefined
    : (JSON.parse(JSON.stringify(value)) as unknown);
}

export function equal(actual: unknown, expected: unknown): void {
  assert.deepStrictEqual(plain(actual), plain(expected));
}

/** Every property of `expected` (deeply) has the same value in `actual`; others may exist. */
export function matches(actual: unknown, expected: object): void {
  assert.ok(
    actual !== null && typeof actual === 'object',
    `expected an object matching ${JSON.stringify(expected)}, got ${String(actual)}`,
  );
  for (const [key, want] of Object.entries(expected) as [string, unknown][]) {
    const got: unknown = (actual as Record<string, unknown>)[key];
    if (want !== null && typeof want === 'object' && !Array.isArray(want))
      matches(got, want);
    else assert.deepStrictEqual(plain(got), plain(want), `property "${key}"`);
  }
}

export function instanceOf(
  value: unknown,
  type: abstract new (...args: never[]) => unknown,
): void {
  assert.ok(
    value instanceof type,
    `expected an instance of ${type.name}, got ${value instanceof Error ? `${value.name}: ${value.message}` : String(value)}`,
  );
}

/**
 * The promise rejects with an instance of `type` whose message, if given, is exactly `message`
 * (a string) or matches it (a RegExp; see `containing`).
 */
export async function rejectsWith(
  promise: Promise<unknown>,
  type: abstract new (...args: never[]) => unknown,
  message?: string | RegExp,
): Promise<void> {
  await assert.rejects(promise, (error: unknown) => {
    instanceOf(error, type);
    if (typeof message === 'string')
      assert.strictEqual((error as Error).message, message);
    else if (message) assert.match((error as Error).message, message);
    return true;
  });
}

/** A RegExp that matches any text containing `text`. */
export function containing(text: string): RegExp {
  return new RegExp(text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'));
}

export { assert };
