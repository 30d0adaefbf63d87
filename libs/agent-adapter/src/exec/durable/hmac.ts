import { createHash, type Hash } from 'node:crypto';

const BLOCK = 64;

/**
 * HMAC-SHA256 under one key (RFC 2104), for the many short messages the engine signs: the hash
 * states after the key's inner and outer pads are made once, and each message copies them.
 * `createHmac` sets up OpenSSL's MAC from scratch for every record (algorithm fetch, key schedule);
 * between store round trips, with the CPU's caches cold, that setup was a quarter of the runner's
 * CPU per superstep. Copying a hash state is a memory copy. The output is `createHmac`'s, byte for
 * byte (a test compares them).
 */
export class HmacSha256 {
  readonly #inner: Hash;
  readonly #outer: Hash;

  constructor(key: Uint8Array) {
    const block = Buffer.alloc(BLOCK);
    const material =
      key.length > BLOCK ? createHash('sha256').update(key).digest() : key;
    block.set(material);
    this.#inner = createHash('sha256').update(block.map((b) => b ^ 0x36));
    this.#outer = createHash('sha256').update(block.map((b) => b ^ 0x5c));
    block.fill(0);
  }

  /** The MAC of the concatenated parts (strings as UTF-8), base64url. */
  digest(...parts: Array<string | Uint8Array>): string {
    const inner = this.#inner.copy();
    for (const part of parts) inner.update(part);
    return this.#outer.copy().update(inner.digest()).digest('base64url');
  }
}
