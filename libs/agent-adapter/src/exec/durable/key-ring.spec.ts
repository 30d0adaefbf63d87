import { CheckpointKeyError } from '../../errors';
import { KeyRing } from './key-ring';
import { thrownBy } from '../../../../../test/utils/specs';

const A = 'a'.repeat(32);
const B = 'b'.repeat(40);

describe('KeyRing', () => {
  it.each<[string, () => unknown, number]>([
    [
      'a 31-character string',
      () => new KeyRing({ current: 'k'.repeat(31) }),
      31,
    ],
    ['an empty string', () => new KeyRing({ current: '' }), 0],
    [
      'a 16-byte buffer',
      () => new KeyRing({ current: Buffer.alloc(16, 1) }),
      16,
    ],
    [
      'a short previous key',
      () => new KeyRing({ current: A, previous: ['short'] }),
      5,
    ],
    [
      'a short secret with an id',
      () => new KeyRing({ current: { id: 'k1', secret: 'x'.repeat(10) } }),
      10,
    ],
    ['a short key given to from()', () => KeyRing.from('too short'), 9],
  ])(
    'refuses %s, saying how long it is and how to make one',
    (_what, make, bytes) => {
      const { message } = thrownBy(CheckpointKeyError, make);
      expect(message).toContain(`is ${bytes} bytes; at least 32 are required`);
      expect(message).toMatch(/randomBytes\(32\)/);
    },
  );

  it('counts a string key in UTF-8 bytes', () => {
    expect(() => new KeyRing({ current: 'é'.repeat(16) })).not.toThrow();
    expect(() => new KeyRing({ current: 'é'.repeat(15) + 'x' })).toThrow(
      /is 31 bytes/,
    );
  });

  it('refuses a missing key', () => {
    expect(() => new KeyRing({ current: undefined as never })).toThrow(
      CheckpointKeyError,
    );
    expect(() => new KeyRing({ current: null as never })).toThrow(
      CheckpointKeyError,
    );
  });

  it.each<[string, unknown]>([
    ['a string', B],
    ['one { id, secret }', { id: 'k0', secret: B }],
    ['a number', 7],
  ])(
    'refuses previous keys given as %s (not an array) with a CheckpointKeyError naming the field',
    (_what, previous) => {
      const make = () =>
        new KeyRing({ current: A, previous: previous as never });
      expect(make).toThrow(CheckpointKeyError);
      expect(make).toThrow(
        /^The key ring's "previous" must be an array of the earlier keys/,
      );
      expect(make).not.toThrow(B); // no key material in the message
    },
  );

  it('derives the same id from the same secret, whatever its form', () => {
    const fromString = new KeyRing({ current: A });
    const fromBuffer = KeyRing.from(Buffer.from(A, 'utf8'));
    expect(fromString.current.id).toBe(fromBuffer.current.id);
    expect(fromString.current.id).toMatch(/^[A-Za-z0-9_-]{10}$/);
    expect(new KeyRing({ current: B }).current.id).not.toBe(
      fromString.current.id,
    );
  });

  it('does not reveal the secret in its id', () => {
    const ring = new KeyRing({ current: A });
    expect(A).not.toContain(ring.current.id);
    expect(ring.current.secret.equals(Buffer.from(A))).toBe(true);
  });

  it('takes explicit ids and refuses ids that would break the sealed format', () => {
    const ring = new KeyRing({ current: { id: 'k-2025_01', secret: A } });
    expect(ring.current.id).toBe('k-2025_01');
    expect(() => new KeyRing({ current: { id: 'k.1', secret: A } })).toThrow(
      CheckpointKeyError,
    );
    expect(() => new KeyRing({ current: { id: '', secret: A } })).toThrow(
      CheckpointKeyError,
    );
  });

  it('looks up current and previous keys by id', () => {
    const old = new KeyRing({ current: B });
    const ring = new KeyRing({
      current: A,
      previous: [B, { id: 'legacy', secret: B }],
    });
    expect(ring.has(ring.current.id)).toBe(true);
    expect(ring.has(old.current.id)).toBe(true);
    expect(ring.has('legacy')).toBe(true);
    expect(ring.get(old.current.id).secret.equals(Buffer.from(B))).toBe(true);
  });

  it('throws CheckpointKeyError for an unknown key id', () => {
    const ring = new KeyRing({ current: A });
    expect(ring.has('nope')).toBe(false);
    expect(() => ring.get('nope')).toThrow(CheckpointKeyError);
    expect(() => ring.get('nope')).toThrow(/"nope"/);
  });

  it('from() accepts a secret, options or a ring', () => {
    const ring = new KeyRing({ current: A });
    expect(KeyRing.from(ring)).toBe(ring);
    expect(KeyRing.from(A).current.id).toBe(ring.current.id);
    expect(
      KeyRing.from({ current: B, previous: [A] }).has(ring.current.id),
    ).toBe(true);
  });

  it('makes a fresh random ephemeral key each time', () => {
    const one = KeyRing.ephemeral();
    const two = KeyRing.ephemeral();
    expect(one.current.secret.length).toBeGreaterThanOrEqual(32);
    expect(one.current.id).not.toBe(two.current.id);
  });
});
