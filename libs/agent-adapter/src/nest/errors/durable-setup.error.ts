import { DurableError } from '../../errors/durable.error';

/**
 * The durable module or its decorators are misused: bad options, a request-scoped flow or tool,
 * duplicate names. Thrown at bootstrap; the message names the class and method.
 * @publicApi
 */
export class DurableSetupError extends DurableError {}
