export { DurableError } from './durable.error';
export * from './errors';
