import { UnsealableValue } from '../../errors';

/** A value that survives a JSON round trip unchanged. */
export type Json =
  null | boolean | number | string | Json[] | { [key: string]: Json };

/**
 * RFC 8785 canonical JSON (keys sorted by UTF-16 code units, ECMAScript number and string forms)
 * of plain JSON data, checked in the same pass: anything that would not come back unchanged (a
 * function, a Date or other class instance, a cycle, NaN, an array hole) throws `UnsealableValue`
 * naming where it is. `undefined` object properties are left out, as JSON does.
 *
 * One pass that validates and writes, because this runs several times per superstep (every call
 * record and checkpoint is sealed): it replaced a validation walk plus the `canonicalize` package,
 * which the tests keep as the oracle this output must equal.
 */
export function canonicalJson(value: unknown, path = '$'): string {
  const out: string[] = [];
  encode(value, out, [], [], path);
  return out.join('');
}

/** Throws `UnsealableValue` unless `value` is plain JSON data (see `canonicalJson`). */
export function assertJson(value: unknown, path = '$'): asserts value is Json {
  canonicalJson(value, path);
}

function encode(
  v: unknown,
  out: string[],
  at: Array<string | number>,
  ancestors: object[],
  root: string,
): void {
  switch (typeof v) {
    case 'string':
      out.push(JSON.stringify(v));
      return;
    case 'boolean':
      out.push(v ? 'true' : 'false');
      return;
    case 'number':
      if (!Number.isFinite(v)) fail(root, at, `${v} is not a finite number`);
      out.push(JSON.stringify(v));
      return;
    case 'object':
      break;
    default:
      fail(root, at, `a ${typeof v} is not JSON`);
  }
  if (v === null) {
    out.push('null');
    return;
  }
  if (ancestors.includes(v)) fail(root, at, 'it contains a cycle');
  ancestors.push(v);
  if (Array.isArray(v)) {
    out.push('[');
    for (let i = 0; i < v.length; i++) {
      if (i > 0) out.push(',');
      at.push(i);
      if (!(i in v) || v[i] === undefined) {
        fail(root, at, 'an array hole or undefined item is not JSON');
      }
      encode(v[i], out, at, ancestors, root);
      at.pop();
    }
    out.push(']');
  } else {
    const proto: unknown = Object.getPrototypeOf(v);
    if (proto !== Object.prototype && proto !== null) {
      const name =
        (v as { constructor?: { name?: string } }).constructor?.name ??
        'object';
      fail(root, at, `a ${name} instance is not plain JSON data`);
    }
    const record = v as Record<string, unknown>;
    out.push('{');
    let first = true;
    for (const key of Object.keys(record).sort()) {
      const item = record[key];
      if (item === undefined) continue;
      if (!first) out.push(',');
      first = false;
      out.push(JSON.stringify(key), ':');
      at.push(key);
      encode(item, out, at, ancestors, root);
      at.pop();
    }
    out.push('}');
  }
  ancestors.pop();
}

function fail(root: string, at: Array<string | number>, why: string): never {
  const path = at.map((s) => (typeof s === 'number' ? `[${s}]` : `.${s}`));
  throw new UnsealableValue(root + path.join(''), why);
}
