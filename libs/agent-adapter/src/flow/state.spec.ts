import { Flow, FlowRunner, Executor, ToolRegistry } from 'agent-adapter';
import { StateCodec } from './state';

describe('StateCodec.view', () => {
  it('gives a deep copy whose objects are plain in this realm (sealable when returned)', () => {
    const stored = { items: [{ a: 1 }], nested: { b: { c: [1, 2] } } };
    const view = new StateCodec<typeof stored>('f', undefined).view(stored);
    expect(view).toEqual(stored);
    expect(view.items[0]).not.toBe(stored.items[0]);
    // Under Jest the test runs in a vm context: structuredClone's objects would fail these.
    expect(Object.getPrototypeOf(view.items[0])).toBe(Object.prototype);
    expect(Object.getPrototypeOf(view.nested.b)).toBe(Object.prototype);
    expect(Array.isArray(view.items) && view.items instanceof Array).toBe(true);
  });

  it('a node may return objects it read from the state', async () => {
    interface S {
      items: Array<{ n: number }>;
    }
    const flow = new Flow<S>('grow')
      .node('add', (s) => ({ items: [...s.items, { n: s.items.length }] }))
      .end('add');
    const r = await new FlowRunner(new Executor(new ToolRegistry())).run(flow, {
      items: [{ n: 0 }],
    });
    expect(r.status).toBe('done');
    expect(r.state.items).toEqual([{ n: 0 }, { n: 1 }]);
  });
});

describe('the state the runner holds (encoded once per written key)', () => {
  it('is what was written: a node changing its returned object later changes nothing', async () => {
    interface S {
      box: { n: number };
      seen: number[];
    }
    let kept: { n: number } | undefined;
    const flow = new Flow<S>('late-write', { maxVisits: 3 })
      .node('put', (s) => {
        kept = { n: 1 };
        return { box: kept, seen: [...s.seen, s.box.n] };
      })
      .node('read', (s) => {
        return { seen: [...s.seen, s.box.n] };
      })
      .edge('put', 'read')
      .end('read');
    const registry = new ToolRegistry();
    const runner = new FlowRunner(new Executor(registry));
    const events: number[] = [];
    runner.events.on('checkpoint.saved', (e) => {
      // After the checkpoint that stored `box`, the node's own object is changed.
      if (e.step === 1 && kept) kept.n = 99;
      events.push(e.step);
    });
    const r = await runner.run(flow, { box: { n: 0 }, seen: [] });
    expect(r.status).toBe('done');
    expect(r.state.box).toEqual({ n: 1 });
    expect(r.state.seen).toEqual([0, 1]);
    const latest = await runner.store.latest(r.runId);
    expect(latest?.sealed).toContain('"box":{"n":1}');
  });

  it('hands a reducer a copy of the stored value, never the stored object', async () => {
    interface S {
      log: number[];
    }
    const flow = new Flow<S>('reduce-copy')
      .node('a', () => ({ log: [1] }))
      .reducer('log', (acc: number[] | undefined, add: number[]) => {
        // A reducer that mutates its accumulator in place still works.
        const out = acc ?? [];
        out.push(...add);
        return out;
      })
      .end('a');
    const r = await new FlowRunner(new Executor(new ToolRegistry())).run(flow, {
      log: [0],
    });
    expect(r.state.log).toEqual([0, 1]);
  });
});
