// Options are checked in the core (normalizeRunnerOptions), so the error lives with the core errors.
export { DurableSetupError } from '../../errors/errors';
