export { DurableError } from './durable.error';
export * from './errors';
export * from './agent-errors';
export { asError } from './as-error';
