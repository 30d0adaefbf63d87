export { DurableError } from './durable.error';
export * from './errors';
export { asError } from './as-error';
