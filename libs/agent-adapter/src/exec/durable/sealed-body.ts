import { CheckpointStoreCorrupt } from '../../errors';
import { Messages } from '../../errors/messages';
import { canonicalJson } from './canonical-json';
import { PayloadCipher, noEncryptionKey } from './encryption';
import type { KeyRing } from './key-ring';
import { open, type Coordinates } from './seal';

/** Sealing helpers shared by checkpoints and call records: encryption at rest, opening, errors. */
/**
 * `content` with each of `fields` (when present) replaced by its encrypted canonical JSON, when
 * the ring encrypts; `content` itself otherwise.
 */
export function hide<T extends object>(
  ring: KeyRing,
  content: T,
  fields: readonly string[],
): T {
  const cipher = ring.encryption;
  if (!cipher) return content;
  const out: Record<string, unknown> = {
    ...(content as Record<string, unknown>),
  };
  for (const field of fields) {
    const value = out[field];
    if (value !== undefined) out[field] = cipher.encrypt(canonicalJson(value));
  }
  return out as T;
}

/** `content` with its encrypted fields decrypted (a clear error without the key). */
export function reveal<T extends object>(
  ring: KeyRing,
  content: T,
  fields: readonly string[],
  runId: string,
  what: string,
): T {
  let out: Record<string, unknown> | undefined;
  for (const field of fields) {
    const value = (content as Record<string, unknown>)[field];
    if (!PayloadCipher.isEncrypted(value)) continue;
    if (!ring.encryption) throw noEncryptionKey(runId, what);
    out ??= { ...(content as Record<string, unknown>) };
    out[field] = JSON.parse(
      ring.encryption.decrypt(value, runId, `${what} (${field})`),
    ) as unknown;
  }
  return (out ?? content) as T;
}

/**
 * A sealed record's body, verified against the coordinates it was read from and with its encrypted
 * `secrets` decrypted; `CheckpointStoreCorrupt` naming `what` when it does not verify. The caller
 * checks the body's shape.
 */
export function openBody<T>(
  ring: KeyRing,
  coords: Coordinates,
  record: { runId: string; sealed: string },
  what: string,
  secrets: readonly string[],
): T {
  const opened = open(ring, coords, record.sealed);
  if (!opened.ok) throw corrupt(record.runId, what, opened);
  return (
    isObject(opened.content)
      ? reveal(ring, opened.content, secrets, record.runId, what)
      : opened.content
  ) as T;
}

export function corrupt(
  runId: string,
  what: string,
  opened:
    | { why: 'unreadable' | 'signature'; detail: string }
    | { why: 'unknown-key'; kid: string },
): CheckpointStoreCorrupt {
  if (opened.why === 'unknown-key')
    return new CheckpointStoreCorrupt(
      Messages.corruptUnknownKey(runId, what, opened.kid),
      runId,
      opened.kid,
    );
  return new CheckpointStoreCorrupt(
    opened.why === 'signature'
      ? Messages.corruptSignature(runId, `${what} (${opened.detail})`)
      : Messages.corruptUnreadable(runId, what, opened.detail),
    runId,
  );
}

export function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
