import { createHmac, randomBytes } from 'node:crypto';
import { HmacSha256 } from './hmac';

describe('HmacSha256', () => {
  it.each([32, 63, 64, 65, 100, 200])(
    'equals createHmac for a %i-byte key, on strings, bytes and several parts',
    (size) => {
      for (let trial = 0; trial < 20; trial++) {
        const key = randomBytes(size);
        const mac = new HmacSha256(key);
        const parts = [
          'aa1\n{"kind":"call","runId":"r-1","seq":1}\n',
          `{"tool":"charge_card","note":"žluťoučký kůň 🐎 ${trial}"}`,
          randomBytes(trial * 7),
          '',
        ];
        const expected = createHmac('sha256', key);
        for (const part of parts) expected.update(part);
        expect(mac.digest(...parts)).toBe(expected.digest('base64url'));
      }
    },
  );

  it('gives the same MAC however often it is used (its pads are never consumed)', () => {
    const key = randomBytes(32);
    const mac = new HmacSha256(key);
    const first = mac.digest('one');
    mac.digest('two', 'three');
    expect(mac.digest('one')).toBe(first);
    expect(mac.digest()).toBe(createHmac('sha256', key).digest('base64url'));
  });
});

describe('HmacSha256 on long messages', () => {
  it('equals createHmac on both sides of the one-shot limit, and after a long message', () => {
    const key = randomBytes(40);
    const mac = new HmacSha256(key);
    for (const size of [5_000, 5_462, 5_463, 16_320, 16_400, 100_000]) {
      // Two- and three-byte UTF-8 characters, so the byte count nears the bound.
      const text = 'ž€'.repeat(size >> 1);
      const expected = createHmac('sha256', key).update('head\n').update(text);
      expect(mac.digest('head\n', text)).toBe(expected.digest('base64url'));
      const bytes = randomBytes(size);
      expect(mac.digest(bytes)).toBe(
        createHmac('sha256', key).update(bytes).digest('base64url'),
      );
    }
    expect(mac.digest('short')).toBe(
      createHmac('sha256', key).update('short').digest('base64url'),
    );
  });
});
