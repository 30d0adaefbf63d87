import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { Messages } from '../errors/messages';

/**
 * The longest worker id: the SQL stores keep it in the run head's `owner` column, VARCHAR(200)
 * (Postgres counts characters, not bytes or UTF-16 units); Redis has no lower limit.
 */
export const MAX_WORKER_ID = 200;

/**
 * A runner's worker id: the given one, checked (a string of 1-200 characters without control
 * characters, which Postgres refuses in text: a `TypeError` at construction instead of a driver
 * error at the first save), or `<hostname>:<pid>:<random>`.
 */
export function workerIdOf(given: unknown): string {
  if (given === undefined || given === null)
    return `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
  if (
    typeof given !== 'string' ||
    given === '' ||
    // eslint-disable-next-line no-control-regex -- control characters are what it looks for
    /[\u0000-\u001f\u007f]/.test(given) ||
    // Characters as Postgres counts them (code points); only long ids are counted.
    (given.length > MAX_WORKER_ID && [...given].length > MAX_WORKER_ID)
  ) {
    throw new TypeError(Messages.badWorkerId(given, MAX_WORKER_ID));
  }
  return given;
}
