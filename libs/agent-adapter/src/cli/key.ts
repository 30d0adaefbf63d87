import { KeyRing, type KeyRingOptions } from '../exec/durable/key-ring';
import { CheckpointKeyError } from '../errors';
import { CliError } from './cli.error';

export const KEY_ENV = 'CHECKPOINT_KEY';

/**
 * The key ring from the environment, as the workers have it. `CHECKPOINT_KEY` is either the secret
 * itself (its UTF-8 bytes, as a worker given `checkpointKey: process.env.CHECKPOINT_KEY` uses it)
 * or a JSON key ring for rotation: `{"current": "...", "previous": ["...", {"id": "k1",
 * "secret": "..."}]}` (the `checkpointKey` option's KeyRingOptions form).
 */
export function keyRingFromEnv(env: NodeJS.ProcessEnv): KeyRing {
  const raw = env[KEY_ENV];
  if (raw === undefined || raw === '') {
    throw new CliError(
      `${KEY_ENV} is not set: give the checkpoint key the workers use (the secret, or a JSON key ring {"current": ..., "previous": [...]}). It is needed to verify and to sign rows.`,
    );
  }
  let options: KeyRingOptions | string = raw;
  if (raw.trimStart().startsWith('{')) {
    try {
      options = JSON.parse(raw) as KeyRingOptions;
    } catch (error) {
      throw new CliError(
        `${KEY_ENV} looks like a JSON key ring but is not valid JSON (${(error as Error).message}).`,
      );
    }
  }
  try {
    return KeyRing.from(options);
  } catch (error) {
    if (error instanceof CheckpointKeyError)
      throw new CliError(`${KEY_ENV}: ${error.message}`);
    throw error;
  }
}
