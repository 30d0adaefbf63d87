import { Injectable } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import type { CronMetadata } from './decorators/durable-cron.decorator';
import {
  DURABLE_CRON_METADATA,
  DURABLE_FLOW_METADATA,
  DURABLE_NODE_METADATA,
  DURABLE_TOOL_METADATA,
} from './durable.constants';
import type { FlowMetadata } from './interfaces/flow-options.interface';
import type { NodeOptions } from './interfaces/node-options.interface';
import type { ToolDecoratorOptions } from './interfaces/tool-options.interface';

/**
 * The only reader of the durable decorators' metadata: one typed getter per key.
 * @internal
 */
@Injectable()
export class DurableMetadataAccessor {
  constructor(private readonly reflector: Reflector) {}

  /** `@Flow()` options of a class, or undefined. */
  getFlowMetadata(target: unknown): FlowMetadata | undefined {
    return this.read<FlowMetadata>(DURABLE_FLOW_METADATA, target);
  }

  /** The `@DurableCron()`s of a class, in declaration order (none: empty). */
  getCronMetadata(target: unknown): CronMetadata[] {
    return this.read<CronMetadata[]>(DURABLE_CRON_METADATA, target) ?? [];
  }

  /** `@Node()` options of a method, or undefined. */
  getNodeMetadata(target: unknown): NodeOptions | undefined {
    return this.read<NodeOptions>(DURABLE_NODE_METADATA, target);
  }

  /** `@Tool()` options of a method, or undefined. */
  getToolMetadata(target: unknown): ToolDecoratorOptions | undefined {
    return this.read<ToolDecoratorOptions>(DURABLE_TOOL_METADATA, target);
  }

  private read<T>(key: string, target: unknown): T | undefined {
    // Reflect metadata lives on functions (classes, methods); anything else has none.
    if (typeof target !== 'function') return undefined;
    return this.reflector.get<T | undefined>(key, target);
  }
}
