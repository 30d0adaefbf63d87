import { DurableError } from '../errors/durable.error';

/**
 * A mistake of the CLI's user (bad option, unknown URL scheme, missing key, nothing to do): the
 * message is printed without a stack trace and the exit code is `exitCode` (2 unless told). A
 * `DurableError` like every error the library throws; the CLI maps it before the other
 * `DurableError`s, so its own exit code wins. Messages come from `CliMessages`.
 */
export class CliError extends DurableError {
  constructor(
    message: string,
    readonly exitCode = 2,
  ) {
    super(message);
  }
}
