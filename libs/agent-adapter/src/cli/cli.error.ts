/**
 * A mistake of the CLI's user (bad option, unknown URL scheme, missing key, nothing to do): the
 * message is printed without a stack trace and the exit code is 2.
 */
export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode = 2,
  ) {
    super(message);
    this.name = 'CliError';
  }
}
