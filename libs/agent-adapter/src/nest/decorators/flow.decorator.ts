import { applyDecorators, Injectable, SetMetadata } from '@nestjs/common';
import { DURABLE_FLOW_METADATA } from '../durable.constants';
import type {
  FlowDecoratorOptions,
  FlowMetadata,
} from '../interfaces/flow-options.interface';

/**
 * Makes a provider class a durable flow: its `@Node()` methods are the nodes. The class is
 * injectable (no separate `@Injectable()`), and must stay a singleton (default scope).
 *
 * @param name the flow's name in every checkpoint (keep it stable across deployments)
 * @publicApi
 */
export function Flow<S extends object>(
  name: string,
  options: FlowDecoratorOptions<S> = {},
): ClassDecorator {
  const metadata: FlowMetadata = { ...(options as FlowDecoratorOptions), name };
  return applyDecorators(
    SetMetadata(DURABLE_FLOW_METADATA, metadata),
    Injectable(),
  );
}
