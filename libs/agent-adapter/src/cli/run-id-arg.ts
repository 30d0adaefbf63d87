import { checkRunId } from '../flow/run-id';
import { CliError } from './cli.error';

/** A run id given on the command line, checked as the runner checks one: a usage error (exit 2). */
export function runIdArg(value: string): string {
  try {
    checkRunId(value);
  } catch (error) {
    if (error instanceof TypeError) throw new CliError(error.message);
    throw error;
  }
  return value;
}
