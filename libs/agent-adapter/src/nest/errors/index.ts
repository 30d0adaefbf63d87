export { DurableSetupError } from './durable-setup.error';
export { InvalidToolArguments } from './invalid-tool-arguments.error';
