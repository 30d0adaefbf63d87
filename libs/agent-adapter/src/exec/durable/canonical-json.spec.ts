import fc from 'fast-check';
import canonicalize from 'canonicalize';
import { UnsealableValue } from '../../errors';
import {
  assertJson,
  canonical,
  canonicalFlat,
  canonicalJson,
  canonicalObject,
  CanonicalText,
  MAX_DEPTH,
} from './canonical-json';
import { thrownBy } from '../../../../../test/utils/specs';

/** The UnsealableValue `fn` throws (fails the test if it throws nothing or something else). */
const unsealable = (fn: () => unknown): UnsealableValue =>
  thrownBy(UnsealableValue, fn);

/** A deep copy of a JSON value whose object keys are in another (seeded) order. */
function reorderKeys(value: unknown, seed: number): unknown {
  let s = seed >>> 0 || 1;
  const next = () => {
    s = (Math.imul(s, 1103515245) + 12345) >>> 0;
    return s;
  };
  const walk = (v: unknown): unknown => {
    if (Array.isArray(v)) return v.map(walk);
    if (typeof v !== 'object' || v === null) return v;
    const entries = Object.entries(v)
      .map(([k, item]) => [k, walk(item), next()] as const)
      .sort((a, b) => a[2] - b[2])
      .map(([k, item]) => [k, item] as const);
    // fromEntries defines own data properties (a "__proto__" key stays a key).
    return Object.fromEntries(entries);
  };
  return walk(value);
}

describe('assertJson', () => {
  it('accepts plain JSON data', () => {
    const values: unknown[] = [
      null,
      true,
      false,
      0,
      -1.5,
      1e300,
      '',
      'text',
      [],
      {},
      [1, 'a', null, { b: [true] }],
      { a: { b: { c: [1, 2, { d: null }] } } },
      Object.assign(Object.create(null) as object, { a: 1 }),
    ];
    for (const v of values) expect(() => assertJson(v)).not.toThrow();
  });

  it('accepts every arbitrary JSON value', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (v) => {
        assertJson(v);
      }),
      { numRuns: 200 },
    );
  });

  it('allows undefined object properties (JSON drops them)', () => {
    expect(() => assertJson({ a: undefined, b: 1 })).not.toThrow();
    expect(canonicalJson({ a: undefined, b: 1 })).toBe('{"b":1}');
  });

  it('allows the same object twice when it is not a cycle', () => {
    const shared = { x: 1 };
    expect(canonicalJson({ a: shared, b: [shared, shared] })).toBe(
      '{"a":{"x":1},"b":[{"x":1},{"x":1}]}',
    );
  });

  it.each<[string, unknown, string, RegExp]>([
    ['a function', { a: [1, () => 2] }, '$.a[1]', /function/],
    ['a symbol', { s: Symbol('x') }, '$.s', /symbol/],
    ['a bigint', [0, { n: 1n }], '$[1].n', /bigint/],
    ['NaN', { a: { b: NaN } }, '$.a.b', /NaN is not a finite number/],
    ['Infinity', [Infinity], '$[0]', /Infinity/],
    ['-Infinity', { x: -Infinity }, '$.x', /-Infinity/],
    ['a Date', { when: new Date(0) }, '$.when', /Date instance/],
    ['a Map', { m: new Map() }, '$.m', /Map instance/],
    ['a Set', [new Set([1])], '$[0]', /Set instance/],
    ['a boxed string', { s: new String('x') }, '$.s', /String instance/],
    ['undefined at the top', undefined, '$', /undefined/],
  ])('rejects %s, naming its path', (_what, value, path, why) => {
    const error = unsealable(() => assertJson(value));
    expect(error.path).toBe(path);
    expect(error.message).toContain(path);
    expect(error.message).toMatch(why);
  });

  it('rejects class instances, naming the class', () => {
    class Money {
      amount = 1;
    }
    const error = unsealable(() => assertJson({ price: new Money() }));
    expect(error.path).toBe('$.price');
    expect(error.message).toMatch(/Money instance/);
  });

  it('rejects a cycle at the place it closes', () => {
    const a: Record<string, unknown> = { list: [] };
    (a.list as unknown[]).push({ back: a });
    const error = unsealable(() => assertJson(a));
    expect(error.path).toBe('$.list[0].back');
    expect(error.message).toMatch(/cycle/);
  });

  it('rejects array holes and undefined items', () => {
    // eslint-disable-next-line no-sparse-arrays
    const holey = [1, , 3];
    expect(unsealable(() => assertJson({ a: holey })).path).toBe('$.a[1]');
    expect(unsealable(() => assertJson([1, 2, undefined])).path).toBe('$[2]');
    expect(unsealable(() => assertJson(new Array(2))).path).toBe('$[0]');
  });

  it('rejects a function hidden as toJSON (canonicalize would call it)', () => {
    const error = unsealable(() => assertJson({ a: { toJSON: () => 1 } }));
    expect(error.path).toBe('$.a.toJSON');
  });

  it('prefixes paths with the given root', () => {
    const error = unsealable(() => assertJson({ a: NaN }, 'state'));
    expect(error.path).toBe('state.a');
    expect(unsealable(() => canonicalJson([() => 0], 'tool(args)')).path).toBe(
      'tool(args)[0]',
    );
  });

  it('names the index of a non-JSON item at any position', () => {
    fc.assert(
      fc.property(
        fc.array(fc.jsonValue(), { maxLength: 8 }),
        fc.nat(),
        fc.constantFrom<unknown>(() => 0, Symbol('s'), 1n, NaN, new Date(0)),
        (items, at, bad) => {
          const i = at % (items.length + 1);
          const value = [...items.slice(0, i), bad, ...items.slice(i)];
          expect(unsealable(() => assertJson({ list: value })).path).toBe(
            `$.list[${i}]`,
          );
        },
      ),
      { numRuns: 100 },
    );
  });
});

describe('canonicalJson', () => {
  it('sorts keys and writes no whitespace', () => {
    expect(
      canonicalJson({ b: 1, a: [true, null, 'x'], c: { z: 0, y: 1 } }),
    ).toBe('{"a":[true,null,"x"],"b":1,"c":{"y":1,"z":0}}');
  });

  it('writes numbers in their shortest ES form', () => {
    expect(canonicalJson([1.0, 1e21, 0.1, -0, 100])).toBe(
      '[1,1e+21,0.1,0,100]',
    );
  });

  it('refuses what assertJson refuses', () => {
    expect(() => canonicalJson({ a: new Date(0) })).toThrow(UnsealableValue);
  });

  it('is a fixed point through JSON.parse', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (v) => {
        const text = canonicalJson(v);
        expect(canonicalJson(JSON.parse(text))).toBe(text);
      }),
      { numRuns: 200 },
    );
  });

  it('does not depend on the key order of the input objects', () => {
    fc.assert(
      fc.property(fc.jsonValue(), fc.integer(), (v, seed) => {
        expect(canonicalJson(reorderKeys(v, seed))).toBe(canonicalJson(v));
      }),
      { numRuns: 200 },
    );
  });

  it('does not depend on key order for wide objects either', () => {
    fc.assert(
      fc.property(
        fc.dictionary(fc.string(), fc.jsonValue({ maxDepth: 1 }), {
          minKeys: 5,
          maxKeys: 20,
        }),
        fc.integer(),
        (v, seed) => {
          expect(canonicalJson(reorderKeys(v, seed))).toBe(canonicalJson(v));
        },
      ),
      { numRuns: 100 },
    );
  });
});

describe('canonicalFlat (coordinates: flat objects of strings and numbers)', () => {
  const anyString = fc.string({ unit: 'binary', maxLength: 12 });
  it('writes exactly what canonicalize writes', () => {
    fc.assert(
      fc.property(
        fc.dictionary(
          anyString,
          fc.oneof(
            anyString,
            fc.integer(),
            fc.double({ noNaN: true, noDefaultInfinity: true }),
          ),
          { maxKeys: 8 },
        ),
        (flat) => {
          expect(canonicalFlat(flat)).toBe(canonicalize(flat));
        },
      ),
      { numRuns: 1000 },
    );
  });

  it('hands anything else to canonicalJson: the same text, or the same error', () => {
    const odd = fc.oneof(
      fc.jsonValue({ maxDepth: 2 }),
      fc.constantFrom<unknown>(undefined, NaN, Infinity, () => 0, 1n),
    );
    fc.assert(
      fc.property(fc.dictionary(anyString, odd, { maxKeys: 6 }), (value) => {
        let expected: string | Error;
        try {
          expected = canonicalJson(value);
        } catch (error) {
          expected = error as Error;
        }
        if (typeof expected === 'string')
          expect(canonicalFlat(value)).toBe(expected);
        else expect(() => canonicalFlat(value)).toThrow(expected.message);
      }),
      { numRuns: 1000 },
    );
    const instance = new Date(0) as unknown as Record<string, unknown>;
    expect(() => canonicalFlat(instance)).toThrow(UnsealableValue);
  });
});

describe('canonicalJson against the canonicalize package (RFC 8785 reference)', () => {
  it('writes exactly what canonicalize writes, for any JSON value', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        expect(canonicalJson(value)).toBe(canonicalize(value));
      }),
      { numRuns: 500 },
    );
  });

  it('writes strings of any UTF-16 code units (controls, quotes, backslashes, lone surrogates) as canonicalize does', () => {
    const unit = fc.oneof(
      fc.integer({ min: 0, max: 0xffff }),
      fc.constantFrom(0x22, 0x5c, 0x2028, 0xd800, 0xdbff, 0xdc00, 0xdfff),
    );
    fc.assert(
      fc.property(fc.array(unit, { maxLength: 24 }), (codes) => {
        const text = String.fromCharCode(...codes);
        expect(canonicalJson(text)).toBe(canonicalize(text));
        expect(canonicalJson({ [text]: [text] })).toBe(
          canonicalize({ [text]: [text] }),
        );
      }),
      { numRuns: 2000 },
    );
  });

  it('writes every finite number as canonicalize does (-0 included)', () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.double({ noNaN: true, noDefaultInfinity: true }),
          fc.integer(),
          fc.constant(-0),
        ),
        (n) => expect(canonicalJson(n)).toBe(canonicalize(n)),
      ),
      { numRuns: 2000 },
    );
  });

  it('agrees on objects of any width (few keys are sorted in place, many by sort())', () => {
    fc.assert(
      fc.property(
        fc.dictionary(
          fc.oneof(fc.string(), fc.string({ unit: 'binary' })),
          fc.integer(),
          { minKeys: 0, maxKeys: 80 },
        ),
        (value) => {
          expect(canonicalJson(value)).toBe(canonicalize(value));
        },
      ),
      { numRuns: 300 },
    );
  });

  it('agrees on keys that sort differently by code unit than by code point', () => {
    const value = {
      '\u{1F600}': 1,
      '\uFB33': 2,
      a: [1e21, 1e-7, -0, 0.1],
      é: 'x\u2028y',
    };
    expect(canonicalJson(value)).toBe(canonicalize(value));
  });
});

describe('CanonicalText (encoded once, embedded verbatim)', () => {
  it('holds exactly the canonical text, and hands out fresh copies', () => {
    const value = { b: [1, { c: 'x' }], a: null };
    const text = canonical(value);
    expect(text.text).toBe(canonicalJson(value));
    const copy = text.value() as { b: unknown[] };
    expect(copy).toEqual(value);
    copy.b.push(2);
    expect(text.value()).toEqual(value);
    expect(Object.isFrozen(text)).toBe(true);
  });

  it('is embedded as the same text its value would give, anywhere in a value', () => {
    fc.assert(
      fc.property(fc.jsonValue(), fc.jsonValue(), (a, b) => {
        const plain = { args: a, outcome: { ok: true, value: b }, list: [a] };
        const mixed = {
          args: canonical(a),
          outcome: { ok: true, value: canonical(b) },
          list: [canonical(a)],
        };
        expect(canonicalJson(mixed)).toBe(canonicalJson(plain));
        expect(canonicalJson(mixed)).toBe(canonicalize(plain));
      }),
      { numRuns: 300 },
    );
  });

  it('joins encoded members into the text of their object', () => {
    fc.assert(
      fc.property(fc.dictionary(fc.string(), fc.jsonValue()), (record) => {
        const members = new Map(
          Object.entries(record).map(([k, v]) => [k, canonical(v)] as const),
        );
        expect(canonicalObject(members).text).toBe(canonicalize(record));
      }),
      { numRuns: 300 },
    );
  });

  it('cannot be forged: look-alikes are class instances, the constructor is closed', () => {
    const fake = Object.create(CanonicalText.prototype) as object;
    Object.defineProperty(fake, 'text', { value: '{"forged":true}' });
    expect(() => canonicalJson({ a: fake })).toThrow(UnsealableValue);
    expect(() =>
      (
        CanonicalText as unknown as {
          make(token: symbol, text: string): unknown;
        }
      ).make(Symbol('CanonicalText'), '1'),
    ).toThrow(TypeError);
  });

  it('checks what it encodes like canonicalJson', () => {
    expect(() => canonical({ a: new Date(0) }, 'tool(args)')).toThrow(
      UnsealableValue,
    );
  });
});

describe('nesting depth', () => {
  /** `levels` arrays (or objects) around 1. */
  const nested = (levels: number, kind: 'array' | 'object'): unknown => {
    let v: unknown = 1;
    for (let i = 0; i < levels; i++) v = kind === 'array' ? [v] : { a: v };
    return v;
  };

  it.each(['array', 'object'] as const)(
    'encodes %ss nested MAX_DEPTH (1,000) levels deep, as JSON.stringify and canonicalize do',
    (kind) => {
      expect(MAX_DEPTH).toBe(1000);
      const value = nested(MAX_DEPTH, kind);
      const text = canonicalJson(value);
      expect(text).toBe(JSON.stringify(value));
      expect(text).toBe(canonicalize(value));
      // Embedded encoded text is not walked again: the depth counts from where encoding starts.
      expect(canonicalJson({ x: canonical(value) })).toBe(`{"x":${text}}`);
    },
  );

  it.each([
    ['array', MAX_DEPTH + 1],
    ['object', MAX_DEPTH + 1],
    ['array', 10_000],
    ['object', 10_000],
    ['array', 100_000],
  ] as const)(
    'refuses %ss nested %i levels deep with UnsealableValue, not a stack overflow',
    (kind, levels) => {
      const error = unsealable(() => canonicalJson(nested(levels, kind)));
      expect(error.message).toMatch(/nested more than 1000 levels deep/);
      // The path names where, without a thousand segments.
      expect(error.path).toMatch(/^\$(\[0\]|\.a){8}\.\.\.$/);
      expect(() => canonical(nested(levels, kind), 'tool(result)')).toThrow(
        UnsealableValue,
      );
    },
  );
});
