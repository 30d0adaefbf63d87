import canonicalize from 'canonicalize';
import { UnsealableValue } from '../../errors';

/** A value that survives a JSON round trip unchanged. */
export type Json =
  null | boolean | number | string | Json[] | { [key: string]: Json };

/**
 * Throws `UnsealableValue` naming the first part of `value` that would not come back unchanged from
 * canonical JSON: only plain objects, arrays, strings, finite numbers, booleans and null pass.
 * `undefined` object properties are allowed (JSON drops them, and reading gives undefined back).
 */
export function assertJson(value: unknown, path = '$'): asserts value is Json {
  const seen = new Set<object>();
  const walk = (v: unknown, at: string): void => {
    switch (typeof v) {
      case 'string':
      case 'boolean':
        return;
      case 'number':
        if (!Number.isFinite(v))
          throw new UnsealableValue(at, `${v} is not a finite number`);
        return;
      case 'object':
        break;
      default:
        throw new UnsealableValue(at, `a ${typeof v} is not JSON`);
    }
    if (v === null) return;
    if (seen.has(v)) throw new UnsealableValue(at, 'it contains a cycle');
    seen.add(v);
    if (Array.isArray(v)) {
      for (let i = 0; i < v.length; i++) {
        if (!(i in v) || v[i] === undefined) {
          throw new UnsealableValue(
            `${at}[${i}]`,
            'an array hole or undefined item is not JSON',
          );
        }
        walk(v[i], `${at}[${i}]`);
      }
    } else {
      const proto: unknown = Object.getPrototypeOf(v);
      if (proto !== Object.prototype && proto !== null) {
        const name =
          (v as { constructor?: { name?: string } }).constructor?.name ??
          'object';
        throw new UnsealableValue(
          at,
          `a ${name} instance is not plain JSON data`,
        );
      }
      for (const [key, item] of Object.entries(v)) {
        if (item !== undefined) walk(item, `${at}.${key}`);
      }
    }
    seen.delete(v);
  };
  walk(value, path);
}

/** RFC 8785 canonical JSON (sorted keys, fixed number format) of a value checked by `assertJson`. */
export function canonicalJson(value: unknown, path?: string): string {
  assertJson(value, path);
  const text = canonicalize(value);
  if (text === undefined)
    throw new UnsealableValue(path ?? '$', 'it has no JSON form');
  return text;
}
