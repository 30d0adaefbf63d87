import {
  Flow,
  FlowRunner,
  Executor,
  MemoryCheckpointStore,
  ToolRegistry,
  UnsealableValue,
} from 'agent-adapter';
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

describe("a value nested 10,000 levels deep (past the encoder's 1,000)", () => {
  const deep = () => {
    let v: unknown = 1;
    for (let i = 0; i < 10_000; i++) v = { a: v };
    return v;
  };

  it('as initial state: refused with UnsealableValue before anything is stored', async () => {
    const store = new MemoryCheckpointStore();
    const flow = new Flow<{ tree: unknown }>('deep-state')
      .node('n', () => undefined)
      .end('n');
    const runner = new FlowRunner(new Executor(new ToolRegistry()), {
      checkpoints: store,
    });
    const error = await runner
      .run(flow, { tree: deep() }, { runId: 'deep' })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(UnsealableValue);
    expect((error as Error).message).toMatch(
      /^The value at state\.tree\.a.* cannot be stored durably: it is nested more than 1000 levels deep/,
    );
    expect(await store.latest('deep')).toBeUndefined();
    expect((await store.list()).runs).toEqual([]);
  });

  it('as initial state of a flow with a state class: the same error (class-transformer recurses first)', async () => {
    class Tree {
      tree: unknown = null;
    }
    const store = new MemoryCheckpointStore();
    const flow = new Flow<Tree>('deep-class', { state: Tree })
      .node('n', () => undefined)
      .end('n');
    const error = await new FlowRunner(new Executor(new ToolRegistry()), {
      checkpoints: store,
    })
      .run(flow, { tree: deep() }, { runId: 'deep' })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(UnsealableValue);
    expect((error as Error).message).toMatch(/nested more than 1000 levels/);
    expect(await store.latest('deep')).toBeUndefined();
  });

  it('as a tool result: the call is recorded unrecordable (in doubt), naming the limit', async () => {
    const store = new MemoryCheckpointStore();
    const registry = new ToolRegistry().register('grow', () => deep());
    const flow = new Flow<{ done: boolean }>('deep-result')
      .node('n', async (_s, ctx) => {
        await ctx.call('grow');
        return { done: true };
      })
      .end('n');
    const r = await new FlowRunner(new Executor(registry), {
      checkpoints: store,
    }).run(flow, { done: false }, { runId: 'grow' });
    expect(r.status).toBe('done');
    const bodies = (await store.history('grow')).calls.map(
      (c) => JSON.parse(c.sealed.split('.').slice(3).join('.')) as object,
    );
    expect(bodies).toContainEqual(
      expect.objectContaining({
        phase: 'unrecordable',
        reason: expect.stringMatching(
          /^The value at grow\(result\)\.a.* nested more than 1000 levels deep/,
        ) as unknown,
      }),
    );
  });
});
