import { KeyRing, type KeyRingOptions } from '../exec/durable/key-ring';
import { asError, CheckpointKeyError } from '../errors';
import { CliError } from './cli.error';
import { CliMessages } from './cli.messages';

export const KEY_ENV = 'CHECKPOINT_KEY';
/** The payload encryption key, when the workers encrypt at rest (same forms as the key). */
export const ENCRYPTION_KEY_ENV = 'CHECKPOINT_ENCRYPTION_KEY';

/**
 * The key ring from the environment, as the workers have it. `CHECKPOINT_KEY` is either the secret
 * itself (its UTF-8 bytes, as a worker given `checkpointKey: process.env.CHECKPOINT_KEY` uses it)
 * or a JSON key ring for rotation: `{"current": "...", "previous": ["...", {"id": "k1",
 * "secret": "..."}]}` (the `checkpointKey` option's KeyRingOptions form).
 */
export function keyRingFromEnv(env: NodeJS.ProcessEnv): KeyRing {
  const raw = env[KEY_ENV];
  if (raw === undefined || raw === '') {
    throw new CliError(CliMessages.keyNotSet(KEY_ENV));
  }
  const ring = ringOf(KEY_ENV, raw);
  // Workers that encrypt payloads at rest: the same encryption key reads (and writes) them.
  const encryption = env[ENCRYPTION_KEY_ENV];
  if (!encryption) return ring;
  try {
    return ring.withEncryption(ringOf(ENCRYPTION_KEY_ENV, encryption));
  } catch (error) {
    if (error instanceof CheckpointKeyError)
      throw new CliError(CliMessages.keyOf(ENCRYPTION_KEY_ENV, error.message));
    throw error;
  }
}

function ringOf(name: string, raw: string): KeyRing {
  let options: KeyRingOptions | string = raw;
  if (raw.trimStart().startsWith('{')) {
    try {
      options = JSON.parse(raw) as KeyRingOptions;
    } catch (error) {
      throw new CliError(CliMessages.keyRingJson(name, asError(error).message));
    }
  }
  try {
    return KeyRing.from(options);
  } catch (error) {
    if (error instanceof CheckpointKeyError)
      throw new CliError(CliMessages.keyOf(name, error.message));
    throw error;
  }
}
