import { FlowError } from '../errors';
import { assertJson, type Json } from '../exec/durable/canonical-json';
import { END } from './call-node';
import type { CompiledFlow } from './flow.graph';

type State = { [key: string]: Json };

/**
 * Merges the frontier's updates into the state in declaration order. A key written by two nodes
 * needs a reducer; with one, every update of the key is folded in (in that same order).
 */
export function mergeUpdates<S>(
  flow: CompiledFlow<S>,
  state: State,
  updates: ReadonlyArray<readonly [node: string, update: unknown]>,
): State {
  const merged: State = { ...state };
  const writer = new Map<string, string>();
  for (const [node, update] of updates) {
    if (update === undefined || update === null) continue;
    if (typeof update !== 'object' || Array.isArray(update)) {
      throw new FlowError(
        `Flow "${flow.name}": node "${node}" returned ${Array.isArray(update) ? 'an array' : typeof update}; a node returns an object of the state keys it changes, or nothing.`,
      );
    }
    for (const [key, value] of Object.entries(update)) {
      if (value === undefined) continue;
      const reduce = flow.reducers.get(key);
      const earlier = writer.get(key);
      if (!reduce && earlier !== undefined) {
        throw new FlowError(
          `Flow "${flow.name}": nodes "${earlier}" and "${node}" both wrote "${key}" in one superstep; declare a reducer for "${key}" or write it from one node.`,
        );
      }
      const next: unknown = reduce
        ? reduce(Object.hasOwn(merged, key) ? merged[key] : undefined, value)
        : value;
      assertJson(next, `state.${key} (written by node "${node}")`);
      // defineProperty, not assignment: a key named "__proto__" (from JSON a tool or model
      // returned) must be stored as data, not change the state's prototype.
      Object.defineProperty(merged, key, {
        value: next,
        enumerable: true,
        writable: true,
        configurable: true,
      });
      writer.set(key, node);
    }
  }
  return merged;
}

/** The nodes of the next superstep, in declaration order. */
export function nextFrontier<S>(
  flow: CompiledFlow<S>,
  frontier: readonly string[],
  state: State,
): string[] {
  const next = new Set<string>();
  for (const node of frontier) {
    for (const target of flow.edges.get(node) ?? []) next.add(target);
    const route = flow.routes.get(node);
    if (!route) continue;
    const picked = route.pick(flow.state.view(state));
    const targets =
      picked === null || picked === undefined
        ? []
        : typeof picked === 'string'
          ? [picked]
          : picked;
    for (const target of targets) {
      if (!route.targets.has(target)) {
        throw new FlowError(
          `Flow "${flow.name}": the route from "${node}" picked "${String(target)}", which is not one of its declared targets (${[...route.targets].join(', ')}).`,
        );
      }
      if (target !== END) next.add(target);
    }
  }
  return flow.order.filter((n) => next.has(n));
}
