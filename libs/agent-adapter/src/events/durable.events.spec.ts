import { DurableEvents, type CheckpointSavedEvent } from './durable.events';

const saved: CheckpointSavedEvent = {
  kind: 'flow',
  runId: 'r1',
  step: 1,
  status: 'running',
  flow: 'tickets',
};

describe('DurableEvents', () => {
  it('delivers an event to its listeners, in subscription order', () => {
    const events = new DurableEvents();
    const seen: string[] = [];
    events.on('checkpoint.saved', (e) => seen.push(`one ${e.step}`));
    events.on('checkpoint.saved', (e) => seen.push(`two ${e.runId}`));
    events.on('run.recovered', () => seen.push('recovered'));
    events.emit('checkpoint.saved', saved);
    expect(seen).toEqual(['one 1', 'two r1']);
  });

  it('emits with no listener', () => {
    expect(() =>
      new DurableEvents().emit('checkpoint.saved', saved),
    ).not.toThrow();
  });

  it('stops delivering after unsubscribe', () => {
    const events = new DurableEvents();
    const listener = jest.fn();
    const other = jest.fn();
    const off = events.on('checkpoint.saved', listener);
    events.on('checkpoint.saved', other);
    events.emit('checkpoint.saved', saved);
    off();
    off(); // twice is harmless
    events.emit('checkpoint.saved', { ...saved, step: 2 });
    expect(listener).toHaveBeenCalledTimes(1);
    expect(other).toHaveBeenCalledTimes(2);
    expect(other).toHaveBeenLastCalledWith({ ...saved, step: 2 });
  });

  it('reports a throwing listener and still calls the others', () => {
    const errors: Array<[unknown, string]> = [];
    const events = new DurableEvents((error, event) =>
      errors.push([error, event]),
    );
    const boom = new Error('listener bug');
    const before = jest.fn();
    const after = jest.fn();
    events.on('run.recovered', before);
    events.on('run.recovered', () => {
      throw boom;
    });
    events.on('run.recovered', after);
    const data = {
      kind: 'flow' as const,
      runId: 'r1',
      step: 2,
      replayed: [],
      rerun: [],
    };
    expect(() => events.emit('run.recovered', data)).not.toThrow();
    expect(before).toHaveBeenCalledWith(data);
    expect(after).toHaveBeenCalledWith(data);
    expect(errors).toEqual([[boom, 'run.recovered']]);
  });

  it('logs a throwing listener to console.error by default', () => {
    const log = jest
      .spyOn(console, 'error')
      .mockImplementation(() => undefined);
    try {
      const events = new DurableEvents();
      events.on('checkpoint.saved', () => {
        throw new Error('x');
      });
      const next = jest.fn();
      events.on('checkpoint.saved', next);
      events.emit('checkpoint.saved', saved);
      expect(next).toHaveBeenCalled();
      expect(log).toHaveBeenCalledWith(
        'agent-adapter: a "checkpoint.saved" listener threw',
        expect.any(Error),
      );
    } finally {
      log.mockRestore();
    }
  });

  it('lets a listener unsubscribe itself while the event is delivered', () => {
    const events = new DurableEvents();
    const calls: string[] = [];
    const off = events.on('checkpoint.saved', () => {
      calls.push('once');
      off();
    });
    events.on('checkpoint.saved', () => calls.push('always'));
    events.emit('checkpoint.saved', saved);
    events.emit('checkpoint.saved', saved);
    expect(calls).toEqual(['once', 'always', 'always']);
  });
});
