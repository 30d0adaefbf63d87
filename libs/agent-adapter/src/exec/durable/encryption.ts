import { Messages } from '../../errors/messages';
import {
  createCipheriv,
  createDecipheriv,
  createHmac,
  randomBytes,
} from 'node:crypto';
import { CheckpointKeyError, CheckpointStoreCorrupt } from '../../errors';

/** The keys a cipher uses (a `KeyRing`: current for new values, any known id for old ones). */
export interface CipherKeys {
  readonly current: { readonly id: string };
  has(id: string): boolean;
  get(id: string): { readonly secret: Buffer };
}

/** How an encrypted value starts: `aa-enc1.<key id>.<iv>.<tag>.<ciphertext>` (base64url). */
const PREFIX = 'aa-enc1.';

/**
 * Payload encryption at rest (AES-256-GCM): what records hold that a database reader should not
 * see (run state, call arguments and results, pending approvals) is encrypted before the record
 * is sealed, so the seal covers the ciphertext and its coordinates as before. Keys come as a key
 * ring (current + previous, for rotation); each key's AES key is derived from its secret, so any
 * secret of 32+ bytes works and the ring's ids say which key a value needs.
 * @internal
 */
export class PayloadCipher {
  private readonly aesKeys = new Map<string, Buffer>();

  constructor(readonly ring: CipherKeys) {}

  static isEncrypted(value: unknown): value is string {
    return typeof value === 'string' && value.startsWith(PREFIX);
  }

  /** The JSON text `plain` as an encrypted value (a fresh IV every time). */
  encrypt(plain: string): string {
    const { id } = this.ring.current;
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.aesKey(id), iv);
    const ct = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()]);
    const tag = cipher.getAuthTag();
    return `${PREFIX}${id}.${iv.toString('base64url')}.${tag.toString('base64url')}.${ct.toString('base64url')}`;
  }

  /**
   * The JSON text back. A key id this ring does not have is a `CheckpointKeyError` (give the
   * worker the key); a value that does not decrypt under its key is `CheckpointStoreCorrupt`.
   */
  decrypt(value: string, runId: string, what: string): string {
    const [id, iv, tag, ct] = value.slice(PREFIX.length).split('.');
    if (!id || iv === undefined || tag === undefined || ct === undefined)
      throw corrupt(runId, what, 'malformed encrypted value');
    if (!this.ring.has(id)) {
      throw new CheckpointKeyError(
        Messages.encryptedUnknownKey(runId, what, id),
      );
    }
    try {
      const decipher = createDecipheriv(
        'aes-256-gcm',
        this.aesKey(id),
        Buffer.from(iv, 'base64url'),
      );
      decipher.setAuthTag(Buffer.from(tag, 'base64url'));
      return Buffer.concat([
        decipher.update(Buffer.from(ct, 'base64url')),
        decipher.final(),
      ]).toString('utf8');
    } catch {
      throw corrupt(runId, what, `it does not decrypt under key "${id}"`);
    }
  }

  private aesKey(id: string): Buffer {
    let key = this.aesKeys.get(id);
    if (!key) {
      key = createHmac('sha256', this.ring.get(id).secret)
        .update('agent-adapter payload encryption')
        .digest();
      this.aesKeys.set(id, key);
    }
    return key;
  }
}

/** A sealed record holds an encrypted value but this worker has no encryption key. */
export function noEncryptionKey(
  runId: string,
  what: string,
): CheckpointKeyError {
  return new CheckpointKeyError(Messages.noEncryptionKey(runId, what));
}

function corrupt(runId: string, what: string, why: string) {
  return new CheckpointStoreCorrupt(
    Messages.encryptedUnreadable(runId, what, why),
    runId,
  );
}
