import { DurableError } from '../../errors/durable.error';
import type { StateViolation } from '../../errors/errors';

/**
 * A `@Tool({ args: Dto })` method was called with arguments its DTO refuses. The method did not
 * run and nothing was logged. `violations` names every one.
 * @publicApi
 */
export class InvalidToolArguments extends DurableError {
  readonly tool: string;
  readonly violations: StateViolation[];

  constructor(tool: string, violations: StateViolation[]) {
    super(
      `Invalid arguments for tool "${tool}": ${violations
        .map((v) => `${v.path}: ${v.messages.join('; ')}`)
        .join(' | ')}. The tool did not run.`,
    );
    this.tool = tool;
    this.violations = violations;
  }
}
