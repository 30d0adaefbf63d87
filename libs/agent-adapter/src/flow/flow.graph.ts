import { createHash } from 'node:crypto';
import { FlowError } from '../errors';
import { Messages } from '../errors/messages';
import { canonicalJson } from '../exec/durable/canonical-json';
import { END, isCallNode, type CallNode } from './call-node';
import type { NodeFn, Reducer, RouteFn, StateClass } from './flow.interfaces';
import { StateCodec } from './state';

export interface CompiledNode<S> {
  name: string;
  run: NodeFn<S>;
  maxVisits: number;
  /** See `FlowNodeOptions.callsFirst`; true for `Call(...)` nodes. */
  callsFirst: boolean;
}

/** An immutable, checked graph. */
export interface NodeDef<S> {
  name: string;
  spec: NodeFn<S> | CallNode<S>;
  maxVisits?: number;
  callsFirst?: boolean;
}

export interface RouteDef<S> {
  from: string;
  pick: RouteFn<S>;
  targets: string[];
}

/** A graph as the builder (`Flow`) holds it: what `compileFlow` checks and digests. */
export interface FlowDefinition<S> {
  readonly name: string;
  readonly stateClass?: StateClass<S>;
  readonly maxVisits: number;
  readonly kind: 'flow' | 'loop';
  readonly nodes: readonly NodeDef<S>[];
  readonly edges: ReadonlyArray<readonly [string, string]>;
  readonly routes: readonly RouteDef<S>[];
  readonly ends: ReadonlySet<string>;
  readonly starts: readonly string[];
  readonly reducers: ReadonlyMap<string, Reducer<unknown>>;
}

export interface CompiledFlow<S> {
  name: string;
  /** What its checkpoints and events call a run: a flow, or a tool loop. */
  kind: 'flow' | 'loop';
  digest: string;
  /** Node names in declaration order: the order updates merge in and frontiers are sorted by. */
  order: string[];
  nodes: Map<string, CompiledNode<S>>;
  starts: string[];
  edges: Map<string, string[]>;
  routes: Map<string, { pick: RouteFn<S>; targets: Set<string> }>;
  ends: Set<string>;
  reducers: Map<string, Reducer<unknown>>;
  state: StateCodec<S>;
}

/**
 * Whether every node of `frontier` only computes until its first call (`callsFirst`): the
 * checkpoint before them can go out with that call's `started` record, in one write.
 */
export function opensWithCalls<S>(
  flow: CompiledFlow<S>,
  frontier: readonly string[],
): boolean {
  return frontier.every((n) => flow.nodes.get(n)?.callsFirst === true);
}

export function compileFlow<S extends object>(
  flow: FlowDefinition<S>,
): CompiledFlow<S> {
  const fail = (problem: string): never => {
    throw new FlowError(Messages.graphProblem(flow.name, problem));
  };
  if (flow.nodes.length === 0) fail('it has no nodes');
  const order = flow.nodes.map((n) => n.name);
  const known = new Set(order);
  const check = (name: string, where: string) => {
    if (!known.has(name))
      fail(`${where} names node "${name}", which does not exist`);
  };

  const starts = flow.starts.length
    ? [...new Set(flow.starts)]
    : [order[0] as string];
  starts.forEach((s) => check(s, 'start'));
  const edges = new Map<string, string[]>();
  for (const [from, to] of flow.edges) {
    check(from, `edge ${from} -> ${to}`);
    check(to, `edge ${from} -> ${to}`);
    const list = edges.get(from) ?? [];
    if (!list.includes(to)) list.push(to);
    edges.set(from, list);
  }
  const routes = new Map<string, { pick: RouteFn<S>; targets: Set<string> }>();
  for (const r of flow.routes) {
    check(r.from, `route from "${r.from}"`);
    if (r.targets.length === 0)
      fail(`route from "${r.from}" declares no targets`);
    r.targets
      .filter((t) => t !== END)
      .forEach((t) => check(t, `route from "${r.from}"`));
    routes.set(r.from, { pick: r.pick, targets: new Set(r.targets) });
  }
  for (const end of flow.ends) {
    check(end, 'end');
    if (edges.has(end) || routes.has(end))
      fail(`node "${end}" is an end but also has outgoing edges`);
  }
  for (const name of order) {
    if (!flow.ends.has(name) && !edges.has(name) && !routes.has(name)) {
      fail(
        `node "${name}" has no outgoing edge or route and is not an end (add .end("${name}"))`,
      );
    }
  }

  // Reachability from the start: every node must be reachable, and so must an end.
  const reached = new Set<string>(starts);
  let endReachable = false;
  for (const queue = [...starts]; queue.length;) {
    const name = queue.shift() as string;
    if (flow.ends.has(name)) endReachable = true;
    const route = routes.get(name);
    if (route?.targets.has(END)) endReachable = true;
    for (const next of [
      ...(edges.get(name) ?? []),
      ...(route ? [...route.targets] : []),
    ]) {
      if (next !== END && !reached.has(next)) {
        reached.add(next);
        queue.push(next);
      }
    }
  }
  const unreachable = order.filter((n) => !reached.has(n));
  if (unreachable.length)
    fail(
      `node(s) ${unreachable.map((n) => `"${n}"`).join(', ')} cannot be reached from the start`,
    );
  if (!endReachable)
    fail(
      'no end can be reached from the start (mark the last node with .end(...))',
    );

  const nodes = new Map<string, CompiledNode<S>>();
  for (const def of flow.nodes) {
    const spec = def.spec;
    const run: NodeFn<S> = isCallNode<S>(spec)
      ? // Not async: the superstep runs nodes through `promised` (a throw of `args` rejects).
        (state, ctx) =>
          ctx
            .call(spec.tool, spec.args(state))
            .then((result) =>
              spec.into === undefined
                ? undefined
                : ({ [spec.into]: result } as Partial<S>),
            )
      : spec;
    nodes.set(def.name, {
      name: def.name,
      run,
      maxVisits: def.maxVisits ?? flow.maxVisits,
      // Not in the digest: it changes how writes are batched, not what the graph does.
      callsFirst: def.callsFirst ?? isCallNode<S>(spec),
    });
  }

  // The digest covers everything that decides which node runs when and what it calls; code inside
  // functions cannot be hashed reliably, so keep it deterministic (see docs/flows.md).
  const shape = {
    v: 1,
    flow: flow.name,
    state: flow.stateClass?.name ?? null,
    maxVisits: flow.maxVisits,
    nodes: flow.nodes.map((n) => ({
      name: n.name,
      maxVisits: n.maxVisits ?? null,
      ...(isCallNode<S>(n.spec)
        ? { call: n.spec.tool, into: n.spec.into ?? null }
        : { fn: true }),
    })),
    starts: [...starts].sort(),
    // From the deduplicated maps: writing an edge twice does not change what the graph does.
    edges: [...edges]
      .flatMap(([a, bs]) => bs.map((b) => `${a}\u0000${b}`))
      .sort(),
    routes: [...routes]
      .map(([from, r]) => ({ from, targets: [...r.targets].sort() }))
      .sort((a, b) => (a.from < b.from ? -1 : 1)),
    ends: [...flow.ends].sort(),
    reducers: [...flow.reducers.keys()].sort(),
  };
  const digest = createHash('sha256')
    .update(canonicalJson(shape))
    .digest('base64url');

  return {
    name: flow.name,
    kind: flow.kind,
    digest,
    order,
    nodes,
    starts: order.filter((n) => starts.includes(n)),
    edges,
    routes,
    ends: new Set(flow.ends),
    reducers: new Map(flow.reducers),
    state: new StateCodec(flow.name, flow.stateClass),
  };
}
