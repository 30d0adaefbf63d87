import { SetMetadata } from '@nestjs/common';
import { DURABLE_NODE_METADATA } from '../durable.constants';
import type { NodeOptions } from '../interfaces/node-options.interface';

/**
 * Makes a method of a `@Flow()` class a node named after the method. It receives
 * `(state, ctx)` and returns the state keys it changes (or nothing).
 * @publicApi
 */
export function Node(options: NodeOptions = {}): MethodDecorator {
  return SetMetadata(DURABLE_NODE_METADATA, { ...options });
}
