import fc from 'fast-check';
import { FlowError } from '../errors';
import { Call, END } from './call-node';
import { Flow } from './flow.builder';
import type { Reducer } from './flow.interfaces';
import { thrownBy } from '../../../../test/utils/specs';

type S = Record<string, unknown>;
const noop = () => undefined;

/** a -> b, b ends: the smallest flow with an edge. */
const aToB = () =>
  new Flow('f').node('a', noop).node('b', noop).edge('a', 'b').end('b');

/** The FlowError `fn` throws (fails the test otherwise). */
const flowError = (fn: () => unknown): FlowError => thrownBy(FlowError, fn);

describe('Flow validation', () => {
  it('compiles a valid flow', () => {
    const flow = new Flow('tickets')
      .node('hold', Call('hold_seats', { into: 'note' }))
      .node('pay', noop)
      .node('send', noop)
      .edge('hold', 'pay')
      .edge('pay', 'send')
      .end('send');
    const compiled = flow.compile();
    expect(compiled.order).toEqual(['hold', 'pay', 'send']);
    expect(compiled.starts).toEqual(['hold']);
    expect(compiled.edges.get('hold')).toEqual(['pay']);
    expect([...compiled.ends]).toEqual(['send']);
    expect(flow.compile()).toBe(compiled);
    expect(flow.digest).toBe(compiled.digest);
  });

  it.each<[string, () => Flow<S>, RegExp]>([
    ['no nodes', () => new Flow('f'), /"f": it has no nodes/],
    [
      'an edge to an unknown node',
      () => new Flow('f').node('a', noop).edge('a', 'ghost').end('a'),
      /edge a -> ghost names node "ghost", which does not exist/,
    ],
    [
      'an edge from an unknown node',
      () => new Flow('f').node('a', noop).edge('ghost', 'a').end('a'),
      /names node "ghost"/,
    ],
    [
      'a route target that is unknown',
      () =>
        new Flow('f')
          .node('a', noop)
          .node('b', noop)
          .route('a', () => 'b', ['b', 'ghost'])
          .end('b'),
      /route from "a" names node "ghost", which does not exist/,
    ],
    [
      'a route from an unknown node',
      () =>
        new Flow('f')
          .node('a', noop)
          .route('ghost', () => END, [END])
          .end('a'),
      /route from "ghost" names node "ghost"/,
    ],
    [
      'a route without targets',
      () => new Flow('f').node('a', noop).route('a', () => null, []),
      /route from "a" declares no targets/,
    ],
    [
      'an unknown start',
      () => new Flow('f').node('a', noop).end('a').start('ghost'),
      /start names node "ghost"/,
    ],
    [
      'an unknown end',
      () => new Flow('f').node('a', noop).end('a', 'ghost'),
      /end names node "ghost"/,
    ],
    [
      'no reachable end',
      () =>
        new Flow('f')
          .node('a', noop)
          .node('b', noop)
          .edge('a', 'b')
          .edge('b', 'a'),
      /no end can be reached from the start/,
    ],
    [
      'a dead end not marked as an end',
      () =>
        new Flow('f')
          .node('a', noop)
          .node('b', noop)
          .node('c', noop)
          .edge('a', 'b')
          .edge('a', 'c')
          .end('c'),
      /node "b" has no outgoing edge or route and is not an end \(add \.end\("b"\)\)/,
    ],
    [
      'an unreachable node',
      () =>
        new Flow('f')
          .node('a', noop)
          .node('b', noop)
          .node('island', noop)
          .edge('a', 'b')
          .edge('island', 'b')
          .end('b'),
      /node\(s\) "island" cannot be reached from the start/,
    ],
    [
      'an end node with edges',
      () =>
        new Flow('f')
          .node('a', noop)
          .node('b', noop)
          .edge('a', 'b')
          .edge('b', 'a')
          .end('b'),
      /node "b" is an end but also has outgoing edges/,
    ],
    [
      'an end node with a route',
      () =>
        new Flow('f')
          .node('a', noop)
          .node('b', noop)
          .edge('a', 'b')
          .route('b', () => END, [END])
          .end('b'),
      /node "b" is an end but also has outgoing edges/,
    ],
  ])('refuses %s when compiled', (_what, build, message) => {
    const flow = build();
    const error = flowError(() => flow.compile());
    expect(error.message).toMatch(message);
  });

  it('accepts a route to END as a way to finish', () => {
    const flow = new Flow('f')
      .node('a', noop)
      .route('a', () => END, ['a', END]);
    expect(() => flow.compile()).not.toThrow();
  });

  it('refuses a node defined twice', () => {
    const flow = new Flow('f').node('a', noop);
    expect(flowError(() => flow.node('a', noop)).message).toMatch(
      /node "a" is defined twice/,
    );
  });

  it.each<[string, () => unknown, RegExp]>([
    [
      'an invalid flow name',
      () => new Flow('has space'),
      /Flow name "has space" is invalid/,
    ],
    [
      'an invalid node name',
      () => new Flow('f').node('a b', noop),
      /node name "a b" is invalid/,
    ],
    ['END as a node name', () => new Flow('f').node(END, noop), /is invalid/],
    [
      'a node that is not a function',
      () => new Flow('f').node('a', 42 as never),
      /must be a function or Call/,
    ],
    [
      'a bad node maxVisits',
      () => new Flow('f').node('a', noop, { maxVisits: 0 }),
      /maxVisits must be a positive integer/,
    ],
    [
      'a callsFirst that is not a boolean',
      () => new Flow('f').node('a', noop, { callsFirst: 'yes' as never }),
      /node "a" callsFirst must be true or false/,
    ],
    [
      'a bad flow maxVisits',
      () => new Flow('f', { maxVisits: 1.5 }),
      /maxVisits must be a positive integer/,
    ],
    [
      'two routes from one node',
      () =>
        new Flow('f')
          .node('a', noop)
          .route('a', () => END, [END])
          .route('a', () => END, [END]),
      /node "a" has two routes/,
    ],
    [
      'a route without a function',
      () => new Flow('f').route('a', 'b' as never, ['b']),
      /needs a function/,
    ],
    [
      'a reducer that is not a function',
      () => new Flow('f').reducer('k', 1 as never),
      /reducer for "k" must be a function/,
    ],
    [
      'Call without a tool',
      () => Call(''),
      /tool name must be a non-empty string/,
    ],
  ])('refuses %s while building', (_what, build, message) => {
    expect(flowError(build).message).toMatch(message);
  });

  it('may not change once compiled', () => {
    const flow = aToB();
    void flow.digest;
    const mutations: Array<() => unknown> = [
      () => flow.node('c', noop),
      () => flow.edge('a', 'a'),
      () => flow.route('a', () => END, [END]),
      () => flow.end('a'),
      () => flow.start('b'),
      () => flow.reducer('k', (_, b) => b),
    ];
    for (const mutate of mutations) {
      expect(flowError(mutate).message).toMatch(
        /already in use.*build a new Flow/,
      );
    }
    expect(flow.nodes.map((n) => n.name)).toEqual(['a', 'b']);
  });
});

describe('Flow digest', () => {
  interface Variant {
    name?: string;
    maxVisits?: number;
    extraNode?: boolean;
    cMaxVisits?: number;
    bTool?: string;
    bInto?: string | null;
    dAsCall?: boolean;
    extraEdge?: boolean;
    routeTargets?: string[];
    cEnds?: boolean;
    starts?: string[];
    reducers?: string[];
    reducerFn?: Reducer<NonNullable<unknown>>;
    state?: new () => object;
  }

  /** a -> b, a -> c; b routes to d or END; c -> d; d ends. */
  function build(v: Variant = {}): Flow<S> {
    const flow = new Flow<S>(v.name ?? 'f', {
      maxVisits: v.maxVisits ?? 10,
      ...(v.state && { state: v.state as new () => S }),
    });
    const into = v.bInto === undefined ? 'x' : v.bInto;
    flow
      .node('a', noop)
      .node('b', Call(v.bTool ?? 'tb', into === null ? {} : { into }))
      .node('c', noop, { maxVisits: v.cMaxVisits ?? 3 })
      .node('d', v.dAsCall ? Call('td') : noop);
    if (v.extraNode) flow.node('e', noop).edge('a', 'e').edge('e', 'd');
    flow.edge('a', 'b').edge('a', 'c');
    if (v.extraEdge) flow.edge('a', 'd');
    flow.route('b', () => 'd', v.routeTargets ?? ['d', END]);
    if (v.cEnds) flow.end('c');
    else flow.edge('c', 'd');
    flow.end('d');
    if (v.starts) flow.start(...v.starts);
    for (const key of v.reducers ?? ['x']) {
      flow.reducer(key, v.reducerFn ?? ((_, b) => b));
    }
    return flow;
  }

  const base = build().digest;

  it('is a stable base64url SHA-256', () => {
    expect(base).toMatch(/^[A-Za-z0-9_-]{43}$/);
  });

  it('is equal for two identically built flows', () => {
    expect(build().digest).toBe(base);
    expect(build({ reducerFn: (a, b) => a ?? b }).digest).toBe(base);
    // The default start is the first node: naming it changes nothing.
    expect(build({ starts: ['a'] }).digest).toBe(base);
  });

  it('marks Call(...) nodes callsFirst, and function nodes only when they say so', () => {
    const nodes = new Flow('f')
      .node('a', Call('t'))
      .node('b', noop)
      .node('c', noop, { callsFirst: true })
      .node('d', Call('t'), { callsFirst: false })
      .edge('a', 'b')
      .edge('b', 'c')
      .edge('c', 'd')
      .end('d')
      .compile().nodes;
    expect(['a', 'b', 'c', 'd'].map((n) => nodes.get(n)!.callsFirst)).toEqual([
      true,
      false,
      true,
      false,
    ]);
  });

  it('is equal whatever nodes say callsFirst (it batches store writes, not what runs)', () => {
    const marked = build();
    marked.nodes.find((n) => n.name === 'c')!.callsFirst = true;
    expect(marked.digest).toBe(base);
  });

  it.each<[string, Variant]>([
    ['the flow name', { name: 'g' }],
    ['the flow maxVisits', { maxVisits: 11 }],
    ['the state class', { state: class Order {} }],
    ['a node added', { extraNode: true }],
    ['a node maxVisits', { cMaxVisits: 4 }],
    ['a function node becoming a Call', { dAsCall: true }],
    ['the Call tool', { bTool: 'tb2' }],
    ['the Call into', { bInto: 'y' }],
    ['the Call into removed', { bInto: null }],
    ['an edge added', { extraEdge: true }],
    ['a route target removed', { routeTargets: ['d'] }],
    ['a route target added', { routeTargets: ['c', 'd', END] }],
    ['the ends (and edges)', { cEnds: true }],
    ['the starts', { starts: ['a', 'c'] }],
    ['a reducer key added', { reducers: ['x', 'y'] }],
    ['a reducer key changed', { reducers: ['z'] }],
    ['the reducers removed', { reducers: [] }],
  ])('changes with %s', (_what, variant) => {
    expect(build(variant).digest).not.toBe(base);
  });

  it('does not depend on the order edges, ends, starts and reducers are declared in', () => {
    const one = new Flow('f')
      .node('a', noop)
      .node('b', noop)
      .node('c', noop)
      .edge('a', 'b')
      .edge('a', 'c')
      .end('b', 'c')
      .start('a')
      .reducer('x', (_, v) => v)
      .reducer('y', (_, v) => v);
    const two = new Flow('f')
      .node('a', noop)
      .node('b', noop)
      .node('c', noop)
      .reducer('y', (_, v) => v)
      .end('c')
      .edge('a', 'c')
      .reducer('x', (_, v) => v)
      .start('a')
      .end('b')
      .edge('a', 'b');
    expect(two.digest).toBe(one.digest);
  });

  it('depends on node declaration order (the merge order)', () => {
    const ab = aToB();
    const ba = new Flow('f')
      .node('b', noop)
      .node('a', noop)
      .edge('a', 'b')
      .end('b')
      .start('a');
    expect(ba.digest).not.toBe(ab.digest);
  });

  it('does not depend on edge insertion order (property)', () => {
    // A chain n0 -> n1 -> ... -> nk (nk ends) plus extra forward edges.
    const graph = fc.integer({ min: 2, max: 7 }).chain((size) =>
      fc
        .array(fc.tuple(fc.nat(size - 1), fc.nat(size - 1)), { maxLength: 10 })
        // Only forward edges that skip a node (the chain has the others).
        .map((pairs) => [
          ...new Map(
            pairs
              .filter(([from, to]) => to > from + 1)
              .map(([from, to]) => [`${from}>${to}`, [from, to] as const]),
          ).values(),
        ])
        .chain((extra) => {
          const edges: Array<[string, string]> = [
            ...Array.from({ length: size - 1 }, (_, i): [string, string] => [
              `n${i}`,
              `n${i + 1}`,
            ]),
            ...extra.map(([f, t]): [string, string] => [`n${f}`, `n${t}`]),
          ];
          return fc.tuple(
            fc.constant(size),
            fc.constant(edges),
            fc.shuffledSubarray(edges, {
              minLength: edges.length,
              maxLength: edges.length,
            }),
          );
        }),
    );
    const make = (size: number, edges: Array<[string, string]>) => {
      const flow = new Flow('prop');
      for (let i = 0; i < size; i++) flow.node(`n${i}`, noop);
      for (const [from, to] of edges) flow.edge(from, to);
      return flow.end(`n${size - 1}`);
    };
    fc.assert(
      fc.property(graph, ([size, edges, shuffled]) => {
        expect(shuffled).toHaveLength(edges.length);
        expect(make(size, shuffled).digest).toBe(make(size, edges).digest);
      }),
      { numRuns: 150 },
    );
  });
});
