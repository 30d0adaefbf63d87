import { FlowError } from '../errors';
import { Messages } from '../errors/messages';
import { requireFeatures } from '../peers/optional-packages';
import type {
  FlowOptions,
  NodeFn,
  FlowNodeOptions,
  Reducer,
  RouteFn,
  StateClass,
} from './flow.interfaces';
import { END, isCallNode, type CallNode } from './call-node';
import {
  compileFlow,
  type CompiledFlow,
  type FlowDefinition,
  type NodeDef,
  type RouteDef,
} from './flow.graph';

export type { NodeDef, RouteDef } from './flow.graph';

/**
 * A graph of nodes run in supersteps. Build it once at start-up; it is checked (and its digest
 * computed) the first time a runner uses it, and may not change after that.
 * @publicApi
 */
export class Flow<
  S extends object = Record<string, unknown>,
> implements FlowDefinition<S> {
  readonly name: string;
  readonly stateClass?: StateClass<S>;
  readonly maxVisits: number;
  readonly kind: 'flow' | 'loop';
  readonly nodes: NodeDef<S>[] = [];
  readonly edges: Array<[string, string]> = [];
  readonly routes: RouteDef<S>[] = [];
  readonly ends = new Set<string>();
  readonly starts: string[] = [];
  readonly reducers = new Map<string, Reducer<unknown>>();
  private compiled?: CompiledFlow<S>;

  constructor(name: string, options: FlowOptions<S> = {}) {
    if (typeof name !== 'string' || !/^[A-Za-z0-9_.:-]{1,128}$/.test(name)) {
      throw new FlowError(Messages.flowName(name));
    }
    const maxVisits = options.maxVisits ?? 25;
    if (!Number.isInteger(maxVisits) || maxVisits < 1) {
      throw new FlowError(Messages.flowMaxVisits(name, maxVisits));
    }
    const kind = options.kind ?? 'flow';
    if (kind !== 'flow' && kind !== 'loop') {
      throw new FlowError(Messages.flowKind(name, kind));
    }
    if (options.state !== undefined) {
      // Checked here, when the flow is built (at start-up), not at its first run: a state class
      // needs class-validator and class-transformer (resolved only; loaded at the first run).
      requireFeatures(
        [
          {
            feature: 'stateClass',
            by: `its state class ${options.state.name || '(anonymous)'}`,
          },
        ],
        `Flow "${name}"`,
      );
      this.stateClass = options.state;
    }
    this.name = name;
    this.maxVisits = maxVisits;
    this.kind = kind;
  }

  /** Adds a node. The first node added is the start unless `.start()` says otherwise. */
  node(
    name: string,
    spec: NodeFn<S> | CallNode<S>,
    options: FlowNodeOptions = {},
  ): this {
    this.mutable();
    if (
      typeof name !== 'string' ||
      !/^[A-Za-z0-9_.:-]{1,128}$/.test(name) ||
      name === END
    ) {
      throw new FlowError(Messages.nodeName(this.name, name));
    }
    if (this.nodes.some((n) => n.name === name)) {
      throw new FlowError(Messages.nodeTwice(this.name, name));
    }
    if (typeof spec !== 'function' && !isCallNode(spec)) {
      throw new FlowError(Messages.nodeSpec(this.name, name));
    }
    if (
      options.maxVisits !== undefined &&
      (!Number.isInteger(options.maxVisits) || options.maxVisits < 1)
    ) {
      throw new FlowError(Messages.nodeMaxVisits(this.name, name));
    }
    if (
      options.callsFirst !== undefined &&
      typeof options.callsFirst !== 'boolean'
    ) {
      throw new FlowError(Messages.nodeCallsFirst(this.name, name));
    }
    this.nodes.push({
      name,
      spec,
      ...(options.maxVisits !== undefined && { maxVisits: options.maxVisits }),
      ...(options.callsFirst !== undefined && {
        callsFirst: options.callsFirst,
      }),
    });
    return this;
  }

  /** After `from` runs, `to` runs in the next superstep. */
  edge(from: string, to: string): this {
    this.mutable();
    this.edges.push([from, to]);
    return this;
  }

  /** After `from` runs, `pick(state)` chooses among `targets` (or END) for the next superstep. */
  route(from: string, pick: RouteFn<S>, targets: readonly string[]): this {
    this.mutable();
    if (typeof pick !== 'function')
      throw new FlowError(Messages.routeFunction(this.name, from));
    if (this.routes.some((r) => r.from === from)) {
      throw new FlowError(Messages.routeTwice(this.name, from));
    }
    this.routes.push({ from, pick, targets: [...targets] });
    return this;
  }

  /** The run ends after these nodes (when nothing else is left in the frontier). */
  end(...names: string[]): this {
    this.mutable();
    for (const name of names) this.ends.add(name);
    return this;
  }

  /** The node(s) of the first superstep (several run in parallel). */
  start(...names: string[]): this {
    this.mutable();
    this.starts.push(...names);
    return this;
  }

  /** Lets several nodes of one superstep write `key`; each update is folded in with `reduce`. */
  reducer<K extends keyof S & string>(
    key: K,
    reduce: Reducer<NonNullable<S[K]>>,
  ): this {
    this.mutable();
    if (typeof reduce !== 'function')
      throw new FlowError(Messages.reducerFunction(this.name, key));
    this.reducers.set(key, reduce as Reducer<unknown>);
    return this;
  }

  /** Checks the graph and computes its digest; throws `FlowError` naming the first problem. */
  compile(): CompiledFlow<S> {
    return (this.compiled ??= compileFlow(this));
  }

  /** The graph digest sealed into every checkpoint. */
  get digest(): string {
    return this.compile().digest;
  }

  private mutable(): void {
    if (this.compiled) {
      throw new FlowError(Messages.flowFrozen(this.name));
    }
  }
}
