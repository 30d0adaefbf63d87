import { FlowError } from '../errors';
import {
  canonical,
  canonicalObject,
  type CanonicalText,
  type Json,
} from '../exec/durable/canonical-json';
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
  return mergeEncoded(flow, flow.state.encode(state), updates).value() as State;
}

/**
 * `mergeUpdates` on the encoded state the runner holds (see `StateCodec.encode`): each written key
 * is encoded once, here (which also checks it can be stored); the other keys keep their texts. A
 * reducer gets a fresh copy of the stored value, never the stored text's own object.
 */
export function mergeEncoded<S>(
  flow: CompiledFlow<S>,
  state: CanonicalText,
  updates: ReadonlyArray<readonly [node: string, update: unknown]>,
): CanonicalText {
  const members = new Map(flow.state.encode(state).members);
  const writer = new Map<string, string>();
  // What a reducer folds into within this superstep: the value the previous update left.
  const current = new Map<string, unknown>();
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
        ? reduce(
            current.has(key) ? current.get(key) : members.get(key)?.value(),
            value,
          )
        : value;
      // A Map, not an object: a key named "__proto__" (from JSON a tool or model returned) is
      // stored as data, never as the state's prototype.
      members.set(
        key,
        canonical(next, `state.${key} (written by node "${node}")`),
      );
      current.set(key, next);
      writer.set(key, node);
    }
  }
  return canonicalObject(members);
}

/** The nodes of the next superstep, in declaration order. */
export function nextFrontier<S>(
  flow: CompiledFlow<S>,
  frontier: readonly string[],
  state: State | CanonicalText,
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
