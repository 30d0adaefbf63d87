import { UnsealableValue } from '../../errors';
import { Messages } from '../../errors/messages';

/** A value that survives a JSON round trip unchanged. */
export type Json =
  null | boolean | number | string | Json[] | { [key: string]: Json };

/** What the encoder takes: JSON, any part of which may already be encoded (`CanonicalText`). */
export type Encodable =
  Json | CanonicalText | Encodable[] | { [key: string]: Encodable | undefined };

/**
 * RFC 8785 canonical JSON (keys sorted by UTF-16 code units, ECMAScript number and string forms)
 * of plain JSON data, checked in the same pass: anything that would not come back unchanged (a
 * function, a Date or other class instance, a cycle, NaN, an array hole) throws `UnsealableValue`
 * naming where it is. `undefined` object properties are left out, as JSON does.
 *
 * One pass that validates and writes, because this runs several times per superstep (every call
 * record and checkpoint is sealed): it replaced a validation walk plus the `canonicalize` package,
 * which the tests keep as the oracle this output must equal.
 *
 * A `CanonicalText` met inside the value is written as its text, verbatim: what the engine
 * encoded once (a call's arguments, a tool's result, a state key) is not encoded again when the
 * record or checkpoint that holds it is sealed.
 *
 * Arrays and objects nested more than `MAX_DEPTH` levels deep are refused (`UnsealableValue`), so
 * a deep value is a clear error instead of a stack overflow, here or in whoever reads it back.
 */
export function canonicalJson(value: unknown, path = '$'): string {
  return encode(value, [], [], path);
}

/**
 * `canonicalJson` of the object without its members named in `omit`: the same text as encoding a
 * copy without them, and no copy made (a checkpoint is sealed without its columns every superstep).
 */
export function canonicalJsonWithout(
  value: object,
  omit: ReadonlySet<string>,
): string {
  return encode(value, [], [], '$', omit);
}

/**
 * `canonicalJson` of a flat object of strings and numbers (a sealed record's coordinates, made
 * for every MAC): the same text, written without the general walk's bookkeeping. Anything else in
 * it (a nested value, `undefined`, a number JSON cannot hold) goes to `canonicalJson`, which
 * encodes it or names what is wrong.
 */
export function canonicalFlat(
  value: Readonly<Record<string, unknown>>,
): string {
  if (Object.getPrototypeOf(value) !== Object.prototype)
    return canonicalJson(value);
  let s = '{';
  for (const key of inOrder(Object.keys(value))) {
    const v = value[key];
    let text: string;
    if (typeof v === 'string')
      text = ESCAPED.test(v) ? JSON.stringify(v) : `"${v}"`;
    else if (typeof v === 'number' && Number.isFinite(v)) text = String(v);
    else return canonicalJson(value);
    if (s.length > 1) s += ',';
    s += memberPrefix(key) + text;
  }
  return s + '}';
}

/** Throws `UnsealableValue` unless `value` is plain JSON data (see `canonicalJson`). */
export function assertJson(value: unknown, path = '$'): asserts value is Json {
  canonicalJson(value, path);
}

/**
 * The canonical JSON text of a value, made once by the encoder and embedded verbatim wherever the
 * encoder meets it again. Only this module makes one (from `canonical` or `canonicalObject`), so its
 * text is always the encoder's own output: embedding it is the same as encoding the value again.
 * It is the engine's private, immutable copy of the value: `value()` parses a fresh copy for code
 * that may change it.
 */
export class CanonicalText {
  readonly #text: string;
  /** For an object made by `canonicalObject`: its members, each encoded. */
  readonly members?: ReadonlyMap<string, CanonicalText>;

  private constructor(
    text: string,
    members?: ReadonlyMap<string, CanonicalText>,
  ) {
    this.#text = text;
    if (members) this.members = members;
    Object.freeze(this);
  }

  get text(): string {
    return this.#text;
  }

  /** A fresh copy of the value (plain objects and arrays nobody else holds). */
  value(): Json {
    return JSON.parse(this.#text) as Json;
  }

  /** The text of a genuine CanonicalText; undefined for anything else (even a look-alike). */
  static textOf(v: object): string | undefined {
    return #text in v ? v.#text : undefined;
  }

  /** @internal Only for `canonical` and `canonicalObject` below. */
  static make(
    token: symbol,
    text: string,
    members?: ReadonlyMap<string, CanonicalText>,
  ): CanonicalText {
    if (token !== MAKER) throw new TypeError(Messages.canonicalTextMade());
    return new CanonicalText(text, members);
  }
}

const MAKER = Symbol('CanonicalText');

/**
 * How deep arrays and objects may nest in one encoded value (a state key, a call's arguments, a
 * tool's result). Far beyond real data; well within what `JSON.stringify` (about 4,000 levels on
 * Node 20's default stack), `JSON.parse` (no limit) and this recursive encoder (about 3,500) manage,
 * so what is stored can always be read and encoded again.
 */
export const MAX_DEPTH = 1000;

/** Encodes `value` once (checked as `canonicalJson` does) and keeps the text. */
export function canonical(value: unknown, path = '$'): CanonicalText {
  return CanonicalText.make(MAKER, canonicalJson(value, path));
}

/**
 * The canonical text of an object whose members are already encoded: the same text
 * `canonicalJson` gives for the object of their values, made by joining the members' texts. The
 * result keeps (a copy of) the members, so an object that changes in a few keys is made again from
 * the texts of the others.
 */
export function canonicalObject(
  members: ReadonlyMap<string, CanonicalText>,
): CanonicalText {
  const own = new Map<string, CanonicalText>();
  let s = '{';
  for (const key of inOrder([...members.keys()])) {
    const member = members.get(key)!;
    const text = CanonicalText.textOf(member);
    if (text === undefined) throw new TypeError(Messages.canonicalMember(key));
    if (own.size > 0) s += ',';
    s += memberPrefix(key) + text;
    own.set(key, member);
  }
  return CanonicalText.make(MAKER, s + '}', own);
}

/** A string JSON.stringify escapes: a control character, `"`, `\\`, or a UTF-16 surrogate. */
// eslint-disable-next-line no-control-regex -- control characters are what JSON escapes
const ESCAPED = /[\u0000-\u001f"\\\ud800-\udfff]/;

function encode(
  v: unknown,
  at: Array<string | number>,
  ancestors: object[],
  root: string,
  omit?: ReadonlySet<string>,
): string {
  switch (typeof v) {
    case 'string':
      // Most strings need no escape: quoted as they are, which JSON.stringify would also give.
      return ESCAPED.test(v) ? JSON.stringify(v) : `"${v}"`;
    case 'boolean':
      return v ? 'true' : 'false';
    case 'number':
      if (!Number.isFinite(v)) fail(root, at, Messages.unsealableNumber(v));
      // The same as JSON.stringify for a finite number (-0 included: "0").
      return String(v);
    case 'object':
      break;
    default:
      fail(root, at, Messages.unsealableType(typeof v));
  }
  if (v === null) return 'null';
  // The open arrays and objects are the depth: no counter to keep, no second pass.
  if (ancestors.length >= MAX_DEPTH) tooDeep(root, at);
  if (ancestors.includes(v)) fail(root, at, Messages.unsealableCycle());
  let s: string;
  if (Array.isArray(v)) {
    ancestors.push(v);
    s = '[';
    for (let i = 0; i < v.length; i++) {
      if (i > 0) s += ',';
      const item: unknown = v[i];
      // Leaves inline (most of what records hold): no recursion, no path to keep.
      if (typeof item === 'string' && i in v) {
        s += ESCAPED.test(item) ? JSON.stringify(item) : `"${item}"`;
        continue;
      }
      at.push(i);
      if (!(i in v) || item === undefined) {
        fail(root, at, Messages.unsealableHole());
      }
      s += encode(item, at, ancestors, root);
      at.pop();
    }
    s += ']';
  } else {
    const proto: unknown = Object.getPrototypeOf(v);
    if (proto !== Object.prototype && proto !== null) {
      const text =
        proto === CanonicalText.prototype ? CanonicalText.textOf(v) : undefined;
      if (text !== undefined) return text;
      const name =
        (v as { constructor?: { name?: string } }).constructor?.name ??
        'object';
      fail(root, at, Messages.unsealableInstance(name));
    }
    ancestors.push(v);
    const record = v as Record<string, unknown>;
    s = '{';
    let first = true;
    for (const key of inOrder(Object.keys(record))) {
      const item = record[key];
      if (item === undefined || omit?.has(key)) continue;
      if (!first) s += ',';
      first = false;
      // Leaves inline (most members of records and states): no recursion, no path to keep.
      if (typeof item === 'string') {
        s +=
          memberPrefix(key) +
          (ESCAPED.test(item) ? JSON.stringify(item) : `"${item}"`);
        continue;
      }
      if (typeof item === 'number' && Number.isFinite(item)) {
        s += memberPrefix(key) + String(item);
        continue;
      }
      at.push(key);
      s += memberPrefix(key) + encode(item, at, ancestors, root);
      at.pop();
    }
    s += '}';
  }
  ancestors.pop();
  return s;
}

/**
 * `keys` sorted in place by UTF-16 code units (as `sort()` does; keys are distinct). Objects have
 * few keys, mostly in order already (the engine builds its records that way): an insertion sort
 * then costs one comparison per key and allocates nothing, where `sort()` allocates every time.
 */
function inOrder(keys: string[]): string[] {
  if (keys.length > 32) return keys.sort();
  for (let i = 1; i < keys.length; i++) {
    const key = keys[i]!;
    let j = i - 1;
    while (j >= 0 && keys[j]! > key) {
      keys[j + 1] = keys[j]!;
      j--;
    }
    keys[j + 1] = key;
  }
  return keys;
}

/**
 * `"key":` of keys met before. Records, checkpoints and states repeat the same few keys every
 * superstep; quoting them again was a good part of what the encoder allocates. Bounded: keys of
 * user data beyond the first thousand short ones are quoted each time.
 */
const prefixes = new Map<string, string>();
function memberPrefix(key: string): string {
  let prefix = prefixes.get(key);
  if (prefix === undefined) {
    prefix = JSON.stringify(key) + ':';
    if (prefixes.size < 1024 && key.length <= 64) prefixes.set(key, prefix);
  }
  return prefix;
}

function fail(root: string, at: Array<string | number>, why: string): never {
  const path = at.map((s) => (typeof s === 'number' ? `[${s}]` : `.${s}`));
  throw new UnsealableValue(root + path.join(''), why);
}

/**
 * Whether `value` nests arrays and objects more than `MAX_DEPTH` levels deep (iterative: deep input
 * cannot overflow it). For code that hands input to recursive libraries before encoding it, to tell
 * why they ran out of stack; not on the hot path.
 */
export function nestedTooDeep(value: unknown): boolean {
  const open: Array<[unknown, number]> = [[value, 0]];
  const seen = new Set<object>();
  for (let next = open.pop(); next; next = open.pop()) {
    const [v, depth] = next;
    if (typeof v !== 'object' || v === null || seen.has(v)) continue;
    if (depth >= MAX_DEPTH) return true;
    seen.add(v);
    for (const item of Object.values(v)) open.push([item, depth + 1]);
  }
  return false;
}

/** `fail` for a value nested too deep, naming where with the first levels of its path only. */
export function tooDeep(root: string, at: Array<string | number>): never {
  const path = at
    .slice(0, 8)
    .map((s) => (typeof s === 'number' ? `[${s}]` : `.${s}`));
  // Where the walk stopped, and "..." for the deeper levels it did not name.
  const where = `${root}${path.join('')}...`;
  throw new UnsealableValue(where, Messages.unsealableDepth(MAX_DEPTH));
}
