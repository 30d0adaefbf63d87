import type { RouteFn } from '../../flow/flow.interfaces';

/**
 * A conditional edge: after the node runs, `pick` chooses among `targets` (or `END`).
 * @publicApi
 */
export interface NodeRouteOptions {
  /** The name of a method of the flow class (called with the state), or a function of the state. */
  pick: string | RouteFn<never>;
  /** Every node `pick` may return (`END` too, when the branch may end there). */
  targets: readonly string[];
}

/**
 * Options of `@Node()`. The node's name is the method's name; the method receives
 * `(state, ctx)` and returns the state keys it changes (or nothing).
 * @publicApi
 */
export interface NodeOptions {
  /** The node runs in the first superstep. Every flow needs at least one. @default false */
  start?: boolean;
  /** The node(s) that run in the next superstep (unconditional edges). */
  next?: string | readonly string[];
  /** The run may end after this node. @default false */
  end?: boolean;
  /** A conditional edge instead of (or besides) `next`. */
  route?: NodeRouteOptions;
  /** How many times this node may run in one run. @default the flow's maxVisits */
  maxVisits?: number;
  /**
   * The method does no I/O of its own before its first tool call (it only computes the call's
   * arguments): its superstep then saves the previous checkpoint together with that call's
   * `started` record, in one store round trip. See `FlowNodeOptions.callsFirst`. @default false
   */
  callsFirst?: boolean;
}
