import { asError, FlowError } from '../errors';
import { Messages } from '../errors/messages';
import {
  inNode,
  type NodeScope,
  type SuperstepScope,
} from '../exec/call-context';
import {
  canonical,
  canonicalObject,
  type CanonicalText,
  type Json,
} from '../exec/durable/canonical-json';
import type {
  Checkpoint,
  PendingApproval,
  SealedError,
} from '../exec/durable/records';
import type { Executor } from '../exec/executor';
import { sleepFor, sleepInRun, sleepUntil } from '../exec/sleep';
import { publishFrom } from '../exec/publish';
import { promised } from '../exec/promised';
import { END } from './call-node';
import type { CompiledFlow } from './flow.graph';
import type { NodeContext } from './flow.interfaces';
import type { SuperstepOutcome } from './runner/run-transitions';

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
      throw new FlowError(Messages.nodeReturned(flow.name, node, update));
    }
    for (const [key, value] of Object.entries(update)) {
      if (value === undefined) continue;
      const reduce = flow.reducers.get(key);
      const earlier = writer.get(key);
      if (!reduce && earlier !== undefined) {
        throw new FlowError(Messages.bothWrote(flow.name, earlier, node, key));
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
          Messages.routePicked(flow.name, node, target, [...route.targets]),
        );
      }
      if (target !== END) next.add(target);
    }
  }
  return flow.order.filter((n) => next.has(n));
}

const fulfilled = <T>(value: T): PromiseSettledResult<T> => ({
  status: 'fulfilled',
  value,
});
const rejected = (reason: unknown): PromiseSettledResult<never> => ({
  status: 'rejected',
  reason,
});

/**
 * Runs the frontier's nodes concurrently on one snapshot of the state and merges what they return:
 * the next state, frontier and visits; the run's error; the approval a call waits for (the run
 * pauses, whatever the nodes made of it); or when the run wakes from its nodes' sleeps.
 */
export async function runFrontier<S extends object>(
  flow: CompiledFlow<S>,
  cp: Checkpoint,
  scope: SuperstepScope,
  executor: Executor,
): Promise<SuperstepOutcome | { pause: PendingApproval } | { sleep: number }> {
  const visits = { ...cp.visits };
  for (const name of cp.frontier) {
    const node = flow.nodes.get(name);
    if (!node)
      return {
        error: {
          name: 'FlowError',
          message: `node "${name}" is not in the flow`,
          node: name,
        },
      };
    visits[name] = (visits[name] ?? 0) + 1;
    if ((visits[name] ?? 0) > node.maxVisits) {
      return {
        error: {
          name: 'FlowError',
          message: `node "${name}" would run more than ${node.maxVisits} times (maxVisits); the flow loops without end`,
          node: name,
        },
      };
    }
  }
  const state = flow.state.encode(cp.state);
  const runs = cp.frontier.map((name) => {
    const node = flow.nodes.get(name)!;
    const nodeScope: NodeScope = { step: scope, node: name, nextIndex: 0 };
    const ctx: NodeContext = {
      runId: cp.runId,
      flow: cp.flow,
      node: name,
      superstep: cp.superstep,
      identity: cp.identity,
      call: <R>(tool: string, args?: unknown) =>
        executor.call(nodeScope, tool, args) as Promise<R>,
      skipCall: () => {
        nodeScope.nextIndex++;
      },
      sleep: (ms: number) => sleepInRun(nodeScope, sleepFor(name, ms)),
      sleepUntil: (at: Date | number) =>
        sleepInRun(nodeScope, sleepUntil(name, at)),
      publish: (data: Json) => publishFrom(scope, name, undefined, data),
    };
    return inNode(nodeScope, () =>
      promised(() => node.run(flow.state.view(state), ctx)),
    );
  });
  // One node (most supersteps): its own settlement, without allSettled's promise per node.
  const settled =
    runs.length === 1
      ? [await runs[0]!.then(fulfilled, rejected)]
      : await Promise.allSettled(runs);
  // Calls a node left running (not awaited) finish before the checkpoint; later ones are refused.
  while (scope.inflight.size) await Promise.allSettled([...scope.inflight]);
  scope.closed = true;
  // The superstep's stream entries are stored before its checkpoint: an ended run's stream is whole.
  if (!scope.stream.idle) await scope.stream.settled();
  if (scope.stream.failure !== undefined) throw scope.stream.failure;
  // A refused or lost call write means this worker lost the run, whatever a node made of it.
  if (scope.log.failure !== undefined) throw scope.log.failure;
  // A call waits for an approval: the run pauses, whatever the nodes made of it. A node sleeps:
  // the run sleeps (a pause wins: after the decision the sleep replays, and sleeps what is left).
  if (scope.paused) return { pause: scope.paused };
  if (scope.sleeping !== undefined) return { sleep: scope.sleeping };
  const updates: Array<readonly [string, unknown]> = [];
  for (const [i, result] of settled.entries()) {
    const node = cp.frontier[i] as string;
    if (result.status === 'rejected')
      return { error: sealError(result.reason, node) };
    updates.push([node, result.value]);
  }
  try {
    const merged = mergeEncoded(flow, state, updates);
    return {
      state: merged,
      frontier: nextFrontier(flow, cp.frontier, merged),
      visits,
    };
  } catch (error) {
    return { error: sealError(error) };
  }
}

/** An error as a checkpoint seals it: name, message and the node it came from. */
export function sealError(error: unknown, node?: string): SealedError {
  const e = asError(error);
  return {
    name: e.name,
    message: e.message,
    ...(node !== undefined && { node }),
  };
}
