import type { StateClass } from '../../flow/flow.interfaces';
import type { QueueOptions } from '../../flow/runner/queues';

/** Options of `@Flow(name, options)`. @publicApi */
export interface FlowDecoratorOptions<S extends object = object> {
  /** A class-validator class: input is validated (every violation named) and nodes get an instance. */
  state?: StateClass<S>;
  /**
   * How many times one node may run in one run (catches loops that never exit).
   * @default 25
   */
  maxVisits?: number;
  /**
   * The flow's own queue (named after the flow) and its flow control, for runs started with
   * `FlowRunner.enqueue`: the same on every worker. Without it the flow's queue has no limits.
   * The module's `queues` may name other queues; naming this one there too is refused.
   */
  queue?: QueueOptions;
}

/** What `@Flow()` stores. @internal */
export interface FlowMetadata extends FlowDecoratorOptions {
  name: string;
}
