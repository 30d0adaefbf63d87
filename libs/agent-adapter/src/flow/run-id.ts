import { Messages } from '../errors/messages';

/** 1-200 letters, digits, "_", ".", ":", "@" or "-": fits every store's keys and columns. */
const RUN_ID = /^[A-Za-z0-9_.:@-]{1,200}$/;

/**
 * The one check of a caller-given run id, made before the store is touched: `run`, `recover`,
 * `get`, `resume` and the operator CLI's run-id arguments refuse anything else with this
 * `TypeError`, so an odd id (empty, not a string, too long, a NUL byte, a brace that would break a
 * Redis hash tag) never reaches a driver.
 */
export function checkRunId(runId: unknown): asserts runId is string {
  if (typeof runId !== 'string' || !RUN_ID.test(runId))
    throw new TypeError(Messages.invalidRunId(runId));
}
