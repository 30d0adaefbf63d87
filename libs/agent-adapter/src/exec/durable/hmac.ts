import { createHash, hash, type Hash } from 'node:crypto';

const BLOCK = 64;
const DIGEST = 32;
/** Messages up to this many bytes are hashed in one call from a reused buffer; longer ones stream. */
const ONE_SHOT_MAX = 16 * 1024;
/** One buffer for every key's one-shot messages: hashing is synchronous, so it is never shared. */
let scratch = Buffer.allocUnsafe(1024);

/**
 * HMAC-SHA256 under one key (RFC 2104), for the many short messages the engine signs (about a
 * dozen records, checkpoints and head seals per three-step run). `createHmac` sets up OpenSSL's MAC
 * from scratch for every message, and copying prepared hash states (the previous way) made two
 * `Hash` objects per message: most of the signing CPU was that setup, not hashing. A short message
 * is hashed with the one-shot `crypto.hash` twice, H(k^opad || H(k^ipad || m)), from one reused
 * buffer; a long one streams from the prepared inner state. The output is `createHmac`'s, byte
 * for byte (a test compares them).
 */
export class HmacSha256 {
  /** k ^ ipad, then k ^ opad: the first block of each hash. */
  readonly #pads: Buffer;
  /** k ^ opad followed by room for the inner digest. */
  readonly #outer: Buffer;
  readonly #inner: Hash;

  constructor(key: Uint8Array) {
    const block = Buffer.alloc(BLOCK);
    const material =
      key.length > BLOCK ? createHash('sha256').update(key).digest() : key;
    block.set(material);
    this.#pads = Buffer.alloc(2 * BLOCK);
    for (let i = 0; i < BLOCK; i++) {
      this.#pads[i] = block[i]! ^ 0x36;
      this.#pads[BLOCK + i] = block[i]! ^ 0x5c;
    }
    this.#outer = Buffer.alloc(BLOCK + DIGEST);
    this.#pads.copy(this.#outer, 0, BLOCK);
    this.#inner = createHash('sha256').update(this.#pads.subarray(0, BLOCK));
    block.fill(0);
  }

  /** The MAC of the concatenated parts (strings as UTF-8), base64url. */
  digest(...parts: Array<string | Uint8Array>): string {
    // UTF-8 takes at most 3 bytes per UTF-16 unit: a bound that needs no pass over the text.
    let bound = BLOCK;
    for (const part of parts)
      bound += part.length * (typeof part === 'string' ? 3 : 1);
    if (bound <= ONE_SHOT_MAX)
      this.#outer.write(this.#oneShot(parts, bound), BLOCK, 'hex');
    else this.#streamed(parts).copy(this.#outer, BLOCK);
    return hash('sha256', this.#outer, 'base64url');
  }

  /**
   * The inner digest, hex: the one output encoding `hash` takes without normalizing it (a
   * 'buffer' digest costs a third more while V8 still runs this unoptimized, as it does for a
   * process's first few hundred runs).
   */
  #oneShot(parts: Array<string | Uint8Array>, bound: number): string {
    if (scratch.length < bound) scratch = Buffer.allocUnsafe(ONE_SHOT_MAX);
    const buf = scratch;
    this.#pads.copy(buf, 0, 0, BLOCK);
    let at = BLOCK;
    for (const part of parts) {
      if (typeof part === 'string') at += buf.write(part, at, 'utf8');
      else {
        buf.set(part, at);
        at += part.length;
      }
    }
    const inner = hash('sha256', buf.subarray(0, at), 'hex');
    buf.fill(0, 0, BLOCK); // the key's pad does not outlive the call
    return inner;
  }

  #streamed(parts: Array<string | Uint8Array>): Buffer {
    const inner = this.#inner.copy();
    for (const part of parts) inner.update(part);
    return inner.digest();
  }
}
