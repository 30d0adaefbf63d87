import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { CheckpointKeyError } from '../../errors';
import { Messages } from '../../errors/messages';
import { PayloadCipher } from './encryption';
import { HmacSha256 } from './hmac';

/** A secret of at least 32 bytes: a Buffer, or a string (used as UTF-8 bytes). */
export type KeyMaterial = string | Uint8Array;

/**
 * Keys for sealing. `current` signs everything new; `previous` keys are only accepted when
 * verifying, so a key can be rotated without losing runs that are in flight. Ids are derived from
 * the secret unless given, so every worker with the same secret agrees on them.
 * @publicApi
 */
export interface KeyRingOptions {
  current: KeyMaterial | { id: string; secret: KeyMaterial };
  previous?: Array<KeyMaterial | { id: string; secret: KeyMaterial }>;
}

/** What `checkpointKey` accepts: one secret, or a ring for rotation. @publicApi */
export type CheckpointKey = KeyMaterial | KeyRingOptions | KeyRing;

interface Key {
  id: string;
  secret: Buffer;
  /** HMAC-SHA256 under the secret, its pad states made once: records and idempotency keys. */
  mac: HmacSha256;
}

const MIN_KEY_BYTES = 32;

export class KeyRing {
  readonly current: Key;
  private readonly byId = new Map<string, Key>();
  /**
   * Encrypts payloads (state, arguments, results) before they are sealed, when the runner was
   * given an `encryptionKey` (see `withEncryption`).
   */
  encryption?: PayloadCipher;

  constructor(options: KeyRingOptions) {
    const previous: unknown = options.previous ?? [];
    if (!Array.isArray(previous))
      throw new CheckpointKeyError(Messages.previousNotArray(previous));
    this.current = toKey(options.current);
    for (const key of [this.current, ...previous.map(toKey)]) {
      if (!this.byId.has(key.id)) this.byId.set(key.id, key);
    }
  }

  /**
   * This ring's sealing keys, with payloads encrypted under `key` (a secret or a ring). No secret
   * of `key` may be one of this ring's (key separation: a MAC key is never an encryption key).
   */
  withEncryption(key: CheckpointKey): KeyRing {
    const keys = KeyRing.from(key);
    for (const enc of keys.byId.values()) {
      for (const mac of this.byId.values()) {
        const same =
          enc.secret.length === mac.secret.length &&
          timingSafeEqual(enc.secret, mac.secret);
        if (same)
          throw new CheckpointKeyError(
            Messages.encryptionIsMac(enc.id, mac.id),
          );
      }
    }
    const ring = Object.create(KeyRing.prototype) as KeyRing;
    Object.assign(ring, this);
    ring.encryption = new PayloadCipher(keys);
    return ring;
  }

  static from(key: CheckpointKey): KeyRing {
    if (key instanceof KeyRing) return key;
    if (typeof key === 'string' || key instanceof Uint8Array)
      return new KeyRing({ current: key });
    return new KeyRing(key);
  }

  /** A random key for a store that never leaves this process (the memory store). */
  static ephemeral(): KeyRing {
    return new KeyRing({ current: randomBytes(MIN_KEY_BYTES) });
  }

  get(id: string): Key {
    const key = this.byId.get(id);
    if (!key) throw new CheckpointKeyError(Messages.unknownKeyId(id));
    return key;
  }

  has(id: string): boolean {
    return this.byId.has(id);
  }
}

function toKey(
  material: KeyMaterial | { id: string; secret: KeyMaterial },
): Key {
  const given =
    typeof material === 'object' && !(material instanceof Uint8Array)
      ? material
      : undefined;
  const raw = given ? given.secret : (material as KeyMaterial);
  if (
    raw === undefined ||
    raw === null ||
    (typeof raw !== 'string' && !(raw instanceof Uint8Array))
  ) {
    throw new CheckpointKeyError(Messages.keyTooShort(0));
  }
  const secret =
    typeof raw === 'string' ? Buffer.from(raw, 'utf8') : Buffer.from(raw);
  if (secret.length < MIN_KEY_BYTES)
    throw new CheckpointKeyError(Messages.keyTooShort(secret.length));
  // A derived id reveals nothing useful about the secret: it is itself an HMAC under it.
  const id =
    given?.id ??
    createHmac('sha256', secret)
      .update('agent-adapter key id')
      .digest('base64url')
      .slice(0, 10);
  if (!/^[A-Za-z0-9_-]+$/.test(id)) {
    throw new CheckpointKeyError(Messages.keyId(id));
  }
  return {
    id,
    secret,
    mac: new HmacSha256(secret),
  };
}
