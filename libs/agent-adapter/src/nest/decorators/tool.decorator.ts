import { SetMetadata } from '@nestjs/common';
import { DURABLE_TOOL_METADATA } from '../durable.constants';
import type { ToolDecoratorOptions } from '../interfaces/tool-options.interface';

/**
 * Makes a method of any singleton provider a tool. Called inside a run (from a node), the call
 * goes through the executor: logged before and after it runs, replayed after a crash, fenced,
 * with `idempotencyKey()` available. Called anywhere else it is a plain method call.
 *
 * A tool takes one arguments object (JSON data) and, inside a run, always returns a Promise.
 * @publicApi
 */
export function Tool(options: ToolDecoratorOptions = {}): MethodDecorator {
  return SetMetadata(DURABLE_TOOL_METADATA, { ...options });
}
