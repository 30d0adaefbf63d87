import fc from 'fast-check';
import { FlowError, UnsealableValue } from '../errors';
import type { Json } from '../exec/durable/canonical-json';
import { END } from './call-node';
import { Flow } from './flow.builder';
import type { RouteFn } from './flow.interfaces';
import { mergeUpdates, nextFrontier } from './superstep';
import { thrownBy } from '../../../../test/utils/specs';

type S = Record<string, unknown>;
type State = { [key: string]: Json };
const noop = () => undefined;

/** Nodes n0..n(count-1) started in parallel, all ends; `reducers` declared. */
function parallel(
  count: number,
  reducers: Record<string, (a: never, b: never) => unknown> = {},
) {
  const flow = new Flow<S>('par');
  const names = Array.from({ length: count }, (_, i) => `n${i}`);
  for (const name of names) flow.node(name, noop);
  flow.start(...names).end(...names);
  for (const [key, reduce] of Object.entries(reducers)) {
    flow.reducer(key, reduce as never);
  }
  return flow.compile();
}

/** The FlowError `fn` throws (fails the test otherwise). */
const flowError = (fn: () => unknown): FlowError => thrownBy(FlowError, fn);

// Keys that are ordinary data keys (a "__proto__" key has its own test).
const key = fc
  .string({ minLength: 1, maxLength: 6 })
  .filter((k) => k !== '__proto__');

describe('mergeUpdates', () => {
  it('applies the updates over a copy of the state', () => {
    const flow = parallel(2);
    const state: State = { a: 1, b: 2 };
    const merged = mergeUpdates(flow, state, [
      ['n0', { a: 10 }],
      ['n1', { c: [1] }],
    ]);
    expect(merged).toEqual({ a: 10, b: 2, c: [1] });
    expect(state).toEqual({ a: 1, b: 2 });
  });

  it('skips nodes that return nothing and keys set to undefined', () => {
    const flow = parallel(3);
    expect(
      mergeUpdates(flow, { a: 1 }, [
        ['n0', undefined],
        ['n1', null],
        ['n2', { a: undefined, b: 2 }],
      ]),
    ).toEqual({ a: 1, b: 2 });
  });

  it('equals Object.assign in order when the nodes write disjoint keys (property)', () => {
    fc.assert(
      fc.property(
        fc.dictionary(key, fc.jsonValue(), { maxKeys: 5 }),
        fc.uniqueArray(fc.tuple(key, fc.jsonValue(), fc.nat(3)), {
          selector: ([k]) => k,
          maxLength: 12,
        }),
        (state, writes) => {
          const flow = parallel(4);
          const updates = [0, 1, 2, 3].map((n) => {
            const update: Record<string, unknown> = {};
            for (const [k, v, who] of writes) if (who === n) update[k] = v;
            return [`n${n}`, update] as const;
          });
          const merged = mergeUpdates(flow, state as State, updates);
          // As stored (and as every node view has always been): JSON, so -0 reads back as 0.
          expect(merged).toStrictEqual(
            JSON.parse(
              JSON.stringify(
                Object.assign({}, state, ...updates.map(([, u]) => u)),
              ),
            ),
          );
        },
      ),
      { numRuns: 200 },
    );
  });

  it('refuses one key written by two nodes without a reducer, naming both and the key', () => {
    const flow = parallel(3);
    const error = flowError(() =>
      mergeUpdates(flow, {}, [
        ['n0', { a: 1 }],
        ['n1', { b: 1 }],
        ['n2', { a: 1 }],
      ]),
    );
    expect(error.message).toMatch(/nodes "n0" and "n2" both wrote "a"/);
    expect(error.message).toMatch(/declare a reducer for "a"/);
  });

  it('refuses a shared key whichever two nodes write it (property)', () => {
    fc.assert(
      fc.property(
        fc.uniqueArray(fc.nat(4), { minLength: 2, maxLength: 2 }),
        key,
        (writers, k) => {
          const flow = parallel(5);
          const updates = [0, 1, 2, 3, 4].map(
            (n) =>
              [
                `n${n}`,
                writers.includes(n) ? { [k]: n } : { [`own${n}`]: n },
              ] as const,
          );
          const [first, second] = [...writers].sort((a, b) => a - b);
          const error = flowError(() => mergeUpdates(flow, {}, updates));
          expect(error.message).toContain(
            `nodes "n${first}" and "n${second}" both wrote "${k}"`,
          );
        },
      ),
      { numRuns: 100 },
    );
  });

  it('folds every update of a reduced key in declaration order (property)', () => {
    const concat = (a: unknown[] | undefined, b: unknown[]) => [
      ...(a ?? []),
      ...b,
    ];
    fc.assert(
      fc.property(
        fc.option(fc.array(fc.jsonValue({ maxDepth: 1 }), { maxLength: 3 }), {
          nil: undefined,
        }),
        fc.array(
          fc.option(fc.array(fc.integer(), { maxLength: 3 }), {
            nil: undefined,
          }),
          {
            minLength: 1,
            maxLength: 5,
          },
        ),
        (initial, perNode) => {
          const flow = parallel(perNode.length, { log: concat });
          const state = (
            initial === undefined ? {} : { log: initial }
          ) as State;
          const updates = perNode.map(
            (items, n) =>
              [
                `n${n}`,
                items === undefined ? undefined : { log: items },
              ] as const,
          );
          const written = perNode.filter((i): i is number[] => i !== undefined);
          const merged = mergeUpdates(flow, state, updates);
          // The state is JSON: a -0 the generator made comes back as 0.
          const json = <T>(v: T): T => JSON.parse(JSON.stringify(v)) as T;
          if (written.length === 0) {
            expect(merged).toEqual(json(state));
          } else {
            expect(merged.log).toEqual(
              json([...(initial ?? []), ...written.flat()]),
            );
          }
        },
      ),
      { numRuns: 200 },
    );
  });

  it('gives a reducer the current value and the update, in order', () => {
    const seen: Array<[unknown, unknown]> = [];
    const flow = parallel(3, {
      total: (a: number | undefined, b: number) => {
        seen.push([a, b]);
        return (a ?? 0) + b;
      },
    });
    const merged = mergeUpdates(flow, { total: 1 }, [
      ['n0', { total: 2 }],
      ['n1', {}],
      ['n2', { total: 3 }],
    ]);
    expect(merged.total).toBe(6);
    expect(seen).toEqual([
      [1, 2],
      [3, 3],
    ]);
  });

  it.each<[string, unknown, RegExp]>([
    ['a number', 42, /returned number/],
    ['a string', 'done', /returned string/],
    ['a boolean', true, /returned boolean/],
    ['an array', [{ a: 1 }], /returned an array/],
  ])('refuses a node that returns %s', (_what, update, message) => {
    const error = flowError(() =>
      mergeUpdates(parallel(1), {}, [['n0', update]]),
    );
    expect(error.message).toMatch(message);
    expect(error.message).toContain('node "n0"');
  });

  it('refuses a value that cannot be stored, naming the key and the node', () => {
    const error = thrownBy(UnsealableValue, () =>
      mergeUpdates(parallel(1), {}, [['n0', { when: new Date(0) }]]),
    );
    expect(error.path).toBe('state.when (written by node "n0")');
  });

  it('refuses a reducer result that cannot be stored', () => {
    const flow = parallel(1, { n: () => NaN });
    expect(() => mergeUpdates(flow, {}, [['n0', { n: 1 }]])).toThrow(
      UnsealableValue,
    );
  });

  it('stores a key named "__proto__" as a plain data key', () => {
    // JSON.parse makes "__proto__" an own key; the merged state must keep it one.
    const update = JSON.parse(
      '{"__proto__": {"polluted": true}, "a": 1}',
    ) as object;
    const merged = mergeUpdates(parallel(1), {}, [['n0', update]]);
    expect(Object.getPrototypeOf(merged)).toBe(Object.prototype);
    expect(Object.keys(merged).sort()).toEqual(['__proto__', 'a']);
    expect((merged as { polluted?: unknown }).polluted).toBeUndefined();
  });
});

describe('nextFrontier', () => {
  /** start -> (edges) ...; `route` from "start" picks among `targets`. */
  function graph(
    route?: { pick: RouteFn<S>; targets: string[] },
    edges: string[] = [],
  ) {
    const flow = new Flow<S>('g')
      .node('start', noop)
      .node('a', noop)
      .node('b', noop)
      .node('c', noop);
    for (const to of edges) flow.edge('start', to);
    if (route) flow.route('start', route.pick, route.targets);
    if (!route && edges.length === 0) flow.edge('start', 'a');
    flow.edge('a', 'c').edge('b', 'c').end('c');
    // b must be reachable for the flow to compile.
    if (!edges.includes('b') && !route?.targets.includes('b'))
      flow.edge('a', 'b');
    return flow.compile();
  }

  it('follows edges', () => {
    const flow = graph(undefined, ['a', 'b']);
    expect(nextFrontier(flow, ['start'], {})).toEqual(['a', 'b']);
    expect(nextFrontier(flow, ['a', 'b'], {})).toEqual(['c']);
  });

  it('ends a branch at an end node', () => {
    const flow = graph(undefined, ['a', 'b']);
    expect(nextFrontier(flow, ['c'], {})).toEqual([]);
  });

  it('follows a route that picks one name, several names, or none', () => {
    let picked: ReturnType<RouteFn<S>> = 'a';
    const flow = graph({ pick: () => picked, targets: ['a', 'b', END] });
    expect(nextFrontier(flow, ['start'], {})).toEqual(['a']);
    picked = ['b', 'a'];
    expect(nextFrontier(flow, ['start'], {})).toEqual(['a', 'b']);
    picked = null;
    expect(nextFrontier(flow, ['start'], {})).toEqual([]);
    picked = undefined;
    expect(nextFrontier(flow, ['start'], {})).toEqual([]);
    picked = [];
    expect(nextFrontier(flow, ['start'], {})).toEqual([]);
  });

  it('handles END picked by a route, alone or with other targets', () => {
    let picked: ReturnType<RouteFn<S>> = END;
    const flow = graph({ pick: () => picked, targets: ['a', END] });
    expect(nextFrontier(flow, ['start'], {})).toEqual([]);
    picked = [END, 'a'];
    expect(nextFrontier(flow, ['start'], {})).toEqual(['a']);
  });

  it('refuses a route that picks an undeclared target', () => {
    let picked: ReturnType<RouteFn<S>> = 'b';
    const flow = graph({ pick: () => picked, targets: ['a', END] }, ['b']);
    expect(flowError(() => nextFrontier(flow, ['start'], {})).message).toMatch(
      /route from "start" picked "b", which is not one of its declared targets \(a, __end__\)/,
    );
    picked = ['a', 'ghost'];
    expect(flowError(() => nextFrontier(flow, ['start'], {})).message).toMatch(
      /picked "ghost"/,
    );
  });

  it('combines edges and a route from one node', () => {
    const flow = graph({ pick: () => 'b', targets: ['b'] }, ['a']);
    expect(nextFrontier(flow, ['start'], {})).toEqual(['a', 'b']);
  });

  it('gives the route its own copy of the state', () => {
    const state: State = { n: 1, list: [1] };
    const flow = graph({
      pick: (s) => {
        (s.list as number[]).push(2);
        s.n = 99;
        return (s.n as number) > 1 ? 'a' : 'b';
      },
      targets: ['a', 'b'],
    });
    expect(nextFrontier(flow, ['start'], state)).toEqual(['a']);
    expect(state).toEqual({ n: 1, list: [1] });
  });

  it('returns the next nodes once each, in declaration order (property)', () => {
    const names = ['n0', 'n1', 'n2', 'n3', 'n4', 'n5'];
    fc.assert(
      fc.property(
        fc.array(fc.array(fc.constantFrom(...names, END), { maxLength: 4 }), {
          minLength: 1,
          maxLength: 3,
        }),
        fc.array(fc.constantFrom(...names.slice(1)), { maxLength: 4 }),
        (picks, edgeTargets) => {
          // r0..r2 each route to any node (or END); r0 also has edges.
          const flow = new Flow<S>('p');
          const routers = picks.map((_, i) => `r${i}`);
          for (const name of [...routers, ...names]) flow.node(name, noop);
          routers.forEach((r, i) => {
            if (i + 1 < routers.length) flow.edge(r, `r${i + 1}`);
            flow.route(r, () => picks[i] ?? null, [...names, END]);
          });
          for (const to of edgeTargets) flow.edge(routers[0] as string, to);
          for (const name of names) flow.end(name);
          const compiled = flow.compile();

          const frontier = [...routers].reverse();
          const next = nextFrontier(compiled, frontier, {});
          const expected = new Set<string>([
            ...routers.slice(1),
            ...edgeTargets,
            ...picks.flat().filter((p) => p !== END),
          ]);
          expect(next).toEqual(compiled.order.filter((n) => expected.has(n)));
          expect(new Set(next).size).toBe(next.length);
        },
      ),
      { numRuns: 150 },
    );
  });
});
