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
