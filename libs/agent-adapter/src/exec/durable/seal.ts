import { timingSafeEqual } from 'node:crypto';
import {
  canonicalFlat,
  canonicalJson,
  canonicalJsonWithout,
  type Encodable,
} from './canonical-json';
import type { HmacSha256 } from './hmac';
import type { KeyRing } from './key-ring';

/**
 * Where a sealed record sits: its kind and the stored columns that locate it (run id, step or
 * segment+seq, flow, ...). They are part of the MAC input, so a record copied into another run or
 * position, or a row whose columns were edited, fails verification.
 */
export interface Coordinates {
  kind: 'checkpoint' | 'call' | 'head' | 'bundle' | 'entry';
  [column: string]: string | number;
}

const VERSION = 'aa2';
/**
 * Earlier formats, refused by name (nothing was released in them, so nothing migrates): `aa1`
 * sealed call records without the run's incarnation.
 */
const RETIRED = new Map([
  [
    'aa1',
    'format aa1 (call records not bound to the run incarnation) is no longer read',
  ],
]);

/**
 * The stored form: `aa2.<key id>.<base64url HMAC-SHA256>.<canonical JSON body>`. The body is kept
 * verbatim, so verification needs no re-serialisation and the row stays readable in a SQL client.
 * Parts of `content` given as `CanonicalText` (already encoded, e.g. a call's arguments) are written
 * as their text: the body is the same as if they had been given as values.
 */
export function seal(
  ring: KeyRing,
  coords: Coordinates,
  content: Encodable,
  /** Members of `content` left out of the body (they are among the coordinates). */
  omit?: ReadonlySet<string>,
): string {
  const body =
    omit === undefined
      ? canonicalJson(content)
      : canonicalJsonWithout(content as object, omit);
  const key = ring.current;
  return `${VERSION}.${key.id}.${mac(key.mac, coords, body)}.${body}`;
}

export type Opened =
  | { ok: true; content: unknown; kid: string }
  | { ok: false; why: 'unreadable' | 'signature'; detail: string }
  /** Signed with a key id the ring does not hold: the reader's key ring, not the row, may be wrong. */
  | { ok: false; why: 'unknown-key'; detail: string; kid: string };

/** Verifies and parses a sealed string against the coordinates it was read from. Never throws. */
export function open(
  ring: KeyRing,
  coords: Coordinates,
  sealed: unknown,
): Opened {
  if (typeof sealed !== 'string')
    return { ok: false, why: 'unreadable', detail: 'not a string' };
  const parts =
    /^([a-z0-9]+)\.([A-Za-z0-9_-]+)\.([A-Za-z0-9_-]{43})\.([\s\S]*)$/.exec(
      sealed,
    );
  const retired = parts && RETIRED.get(parts[1] ?? '');
  if (retired) return { ok: false, why: 'unreadable', detail: retired };
  if (!parts || parts[1] !== VERSION) {
    return {
      ok: false,
      why: 'unreadable',
      detail: 'not a sealed record of this format',
    };
  }
  const [, , kid = '', sig = '', body = ''] = parts;
  if (!ring.has(kid)) {
    return {
      ok: false,
      why: 'unknown-key',
      detail: `signed with unknown key id "${kid}"`,
      kid,
    };
  }
  // Compare the text, not decoded bytes: base64url's last character has padding bits a decoder
  // ignores, so comparing bytes would accept several spellings of one signature.
  const expected = Buffer.from(mac(ring.get(kid).mac, coords, body));
  const given = Buffer.from(sig);
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
    return { ok: false, why: 'signature', detail: 'signature mismatch' };
  }
  try {
    return { ok: true, content: JSON.parse(body) as unknown, kid };
  } catch (error) {
    return {
      ok: false,
      why: 'unreadable',
      detail: `body is not JSON: ${String(error)}`,
    };
  }
}

function mac(key: HmacSha256, coords: Coordinates, body: string): string {
  return key.digest(`${VERSION}\n${canonicalFlat(coords)}\n`, body);
}
