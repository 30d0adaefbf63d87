import fc from 'fast-check';
import type { Json } from './canonical-json';
import { KeyRing } from './key-ring';
import { CheckpointStoreCorrupt } from '../../errors';
import { open, seal, type Coordinates } from './seal';
import { openBody } from './sealed-body';

const SECRET = 'a-test-secret-of-at-least-32-bytes!';
/** fast-check's JSON values, typed as the library's Json. */
const json = fc.jsonValue() as fc.Arbitrary<Json>;

const ring = new KeyRing({ current: SECRET });
const BASE64URL =
  'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';

const callAt = (over: Partial<Coordinates> = {}): Coordinates => ({
  kind: 'call',
  runId: 'run-1',
  segment: 1,
  seq: 1,
  superstep: 0,
  ...over,
});

const checkpointAt = (over: Partial<Coordinates> = {}): Coordinates => ({
  kind: 'checkpoint',
  runId: 'run-1',
  step: 0,
  flow: 'tickets',
  status: 'running',
  segment: 1,
  ...over,
});

const coordinates: fc.Arbitrary<Coordinates> = fc.oneof(
  fc.record({
    kind: fc.constant('call' as const),
    runId: fc.string({ minLength: 1 }),
    segment: fc.nat(),
    seq: fc.nat(),
    superstep: fc.nat(),
  }),
  fc.record({
    kind: fc.constant('checkpoint' as const),
    runId: fc.string({ minLength: 1 }),
    step: fc.nat(),
    flow: fc.string({ minLength: 1 }),
    status: fc.constantFrom('running', 'paused', 'done', 'failed'),
    segment: fc.nat(),
  }),
);

/** `text` with the UTF-16 code unit at `at` xor-ed with `1 << bit`. */
function flipBit(text: string, at: number, bit: number): string {
  const code = text.charCodeAt(at) ^ (1 << bit);
  return text.slice(0, at) + String.fromCharCode(code) + text.slice(at + 1);
}

describe('seal / open', () => {
  it('has the documented layout: aa2.<key id>.<mac>.<canonical body>', () => {
    const sealed = seal(ring, callAt(), { b: 2, a: [1, 'x'] });
    const [version, kid, mac, ...body] = sealed.split('.');
    expect(version).toBe('aa2');
    expect(kid).toBe(ring.current.id);
    expect(mac).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(body.join('.')).toBe('{"a":[1,"x"],"b":2}');
  });

  it('round-trips arbitrary JSON content at arbitrary coordinates', () => {
    fc.assert(
      fc.property(json, coordinates, (content, coords) => {
        const opened = open(ring, coords, seal(ring, coords, content));
        expect(opened.ok).toBe(true);
        if (!opened.ok) return;
        expect(opened.kid).toBe(ring.current.id);
        expect(opened.content).toEqual(JSON.parse(JSON.stringify(content)));
      }),
      { numRuns: 200 },
    );
  });

  it('refuses a sealed string with any single bit of any character flipped', () => {
    fc.assert(
      fc.property(
        json,
        coordinates,
        fc.nat(),
        fc.integer({ min: 0, max: 6 }),
        (content, coords, position, bit) => {
          const sealed = seal(ring, coords, content);
          const tampered = flipBit(sealed, position % sealed.length, bit);
          expect(open(ring, coords, tampered).ok).toBe(false);
        },
      ),
      { numRuns: 200 },
    );
  });

  it('refuses every single-bit change at every position of one record', () => {
    const coords = checkpointAt();
    const sealed = seal(ring, coords, { state: { seats: 2 }, note: 'é ok' });
    const accepted: string[] = [];
    for (let at = 0; at < sealed.length; at++) {
      for (let bit = 0; bit < 7; bit++) {
        if (open(ring, coords, flipBit(sealed, at, bit)).ok) {
          accepted.push(`position ${at} bit ${bit}`);
        }
      }
    }
    expect(accepted).toEqual([]);
  });

  it('refuses every other character at every position of the signature', () => {
    // Only the exact signature text may verify. The last of the 43 base64url
    // characters carries 4 bits of the MAC and 2 padding bits; a lenient
    // decoder would accept 3 other spellings of the same MAC.
    const coords = callAt();
    const sealed = seal(ring, coords, { phase: 'done' });
    const start = sealed.indexOf('.', 4) + 1;
    const accepted: string[] = [];
    for (let i = 0; i < 43; i++) {
      const at = start + i;
      for (const c of BASE64URL) {
        if (c === sealed[at]) continue;
        const tampered = sealed.slice(0, at) + c + sealed.slice(at + 1);
        if (open(ring, coords, tampered).ok) accepted.push(`mac[${i}]=${c}`);
      }
    }
    expect(accepted).toEqual([]);
  });

  it('refuses the record at other coordinates', () => {
    const content = { phase: 'started', tool: 'charge_card' };
    const call = callAt();
    const sealedCall = seal(ring, call, content);
    for (const other of [
      callAt({ runId: 'run-2' }),
      callAt({ seq: 2 }),
      callAt({ segment: 2 }),
      callAt({ superstep: 1 }),
      { ...call, kind: 'checkpoint' as const },
      callAt({ seq: '1' }),
    ]) {
      expect(open(ring, other, sealedCall)).toMatchObject({
        ok: false,
        why: 'signature',
      });
    }
    const cp = checkpointAt();
    const sealedCp = seal(ring, cp, content);
    for (const other of [
      checkpointAt({ runId: 'run-2' }),
      checkpointAt({ step: 1 }),
      checkpointAt({ flow: 'other' }),
      checkpointAt({ status: 'done' }),
      checkpointAt({ segment: 2 }),
    ]) {
      expect(open(ring, other, sealedCp).ok).toBe(false);
    }
    expect(open(ring, cp, sealedCp).ok).toBe(true);
  });

  it('refuses any change of coordinates (property)', () => {
    fc.assert(
      fc.property(json, coordinates, coordinates, (content, coords, other) => {
        fc.pre(JSON.stringify(coords) !== JSON.stringify(other));
        expect(open(ring, other, seal(ring, coords, content)).ok).toBe(false);
      }),
      { numRuns: 150 },
    );
  });

  it('refuses a record sealed under another key', () => {
    const other = new KeyRing({
      current: { id: ring.current.id, secret: 'x'.repeat(32) },
    });
    const coords = callAt();
    expect(open(ring, coords, seal(other, coords, { a: 1 }))).toMatchObject({
      ok: false,
      why: 'signature',
      detail: 'signature mismatch',
    });
  });

  it('reports records it cannot read without throwing', () => {
    const coords = callAt();
    expect(open(ring, coords, 42)).toMatchObject({
      ok: false,
      why: 'unreadable',
    });
    expect(open(ring, coords, undefined)).toMatchObject({
      ok: false,
      why: 'unreadable',
    });
    expect(open(ring, coords, '')).toMatchObject({
      ok: false,
      why: 'unreadable',
    });
    expect(open(ring, coords, '{"a":1}')).toMatchObject({
      ok: false,
      why: 'unreadable',
    });
    const sealed = seal(ring, coords, { a: 1 });
    expect(open(ring, coords, sealed.replace(/^aa2/, 'aa3'))).toMatchObject({
      ok: false,
      why: 'unreadable',
    });
  });

  it('refuses the earlier format aa1 by name (no migration: it was never released)', () => {
    const coords = callAt();
    const sealed = seal(ring, coords, { a: 1 }).replace(/^aa2/, 'aa1');
    expect(open(ring, coords, sealed)).toEqual({
      ok: false,
      why: 'unreadable',
      detail: expect.stringMatching(/format aa1 .*no longer read/) as unknown,
    });
  });

  it('refuses content that is not JSON', () => {
    expect(() => seal(ring, callAt(), { at: new Date() } as never)).toThrow(
      /\$\.at/,
    );
  });
});

describe('key rotation', () => {
  const OLD = 'the-old-key-that-signed-yesterday!!';
  const NEW = 'the-new-key-that-signs-from-today!!';
  const oldRing = new KeyRing({ current: OLD });
  const rotated = new KeyRing({ current: NEW, previous: [OLD] });
  const coords = checkpointAt();

  it('verifies records sealed with a previous key', () => {
    const opened = open(rotated, coords, seal(oldRing, coords, { v: 1 }));
    expect(opened).toEqual({
      ok: true,
      content: { v: 1 },
      kid: oldRing.current.id,
    });
  });

  it('seals with the current key only', () => {
    const sealed = seal(rotated, coords, { v: 2 });
    expect(sealed.split('.')[1]).toBe(rotated.current.id);
    expect(rotated.current.id).not.toBe(oldRing.current.id);
    // A worker that only has the old key cannot read what the new one wrote.
    expect(open(oldRing, coords, sealed)).toMatchObject({
      ok: false,
      why: 'unknown-key',
      kid: rotated.current.id,
    });
  });

  it('refuses a record signed with a key id the ring does not have', () => {
    const opened = open(
      new KeyRing({ current: NEW }),
      coords,
      seal(oldRing, coords, 1),
    );
    expect(opened).toMatchObject({
      ok: false,
      why: 'unknown-key',
      kid: oldRing.current.id,
    });
    expect(opened.ok === false && opened.detail).toContain(oldRing.current.id);
  });

  it('a record with an unknown key id is CheckpointStoreCorrupt naming the key, not tampering', () => {
    const record = { runId: 'run-1', sealed: seal(oldRing, coords, { v: 1 }) };
    let caught: unknown;
    try {
      openBody(
        new KeyRing({ current: NEW }),
        coords,
        record,
        'call record 1',
        [],
      );
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(CheckpointStoreCorrupt);
    expect(caught).toMatchObject({ unknownKeyId: oldRing.current.id });
    expect((caught as Error).message).toMatch(
      /is signed with an unknown key id "[^"]+", a key this worker's key ring does not hold/,
    );
    expect((caught as Error).message).not.toMatch(/backup|does not match/);
  });

  it('refuses a record whose key id was swapped for a known one', () => {
    const sealed = seal(oldRing, coords, { v: 1 });
    const swapped = sealed.replace(oldRing.current.id, rotated.current.id);
    expect(open(rotated, coords, swapped)).toMatchObject({
      ok: false,
      detail: 'signature mismatch',
    });
  });
});
