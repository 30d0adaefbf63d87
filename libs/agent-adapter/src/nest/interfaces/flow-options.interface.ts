import type { StateClass } from '../../flow/flow.interfaces';

/** Options of `@Flow(name, options)`. @publicApi */
export interface FlowDecoratorOptions<S extends object = object> {
  /** A class-validator class: input is validated (every violation named) and nodes get an instance. */
  state?: StateClass<S>;
  /**
   * How many times one node may run in one run (catches loops that never exit).
   * @default 25
   */
  maxVisits?: number;
}

/** What `@Flow()` stores. @internal */
export interface FlowMetadata extends FlowDecoratorOptions {
  name: string;
}
