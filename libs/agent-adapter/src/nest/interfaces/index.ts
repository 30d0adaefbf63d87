export * from './durable-module-options.interface';
export * from './flow-options.interface';
export * from './node-options.interface';
export * from './tool-options.interface';
