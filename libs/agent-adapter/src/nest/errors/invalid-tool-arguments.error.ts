// Framework-free, so it lives with the core errors and the root entry exports it too.
export { InvalidToolArguments } from '../../errors/errors';
