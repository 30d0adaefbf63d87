import type { CheckpointStoreCorrupt } from '../errors';
import { KEY_ENV } from './key';

/**
 * The CLI's wording of a corrupt row. A row signed with a key id the operator's ring does not hold
 * is most likely the operator's key, not tampering: it asks about the key instead of advising a
 * restore (the library's error is `CheckpointStoreCorrupt` all the same, so recovery refuses it).
 */
export function corruptMessage(error: CheckpointStoreCorrupt): string {
  if (error.unknownKeyId === undefined) return error.message;
  const first = error.message.split('", a key ')[0] ?? error.message;
  return `${first}": is ${KEY_ENV} the workers' key?`;
}
