import { ToolRegistry } from './tool.registry';

const handler = async () => 'ok';

describe('ToolRegistry', () => {
  it('registers tools by name and chains', () => {
    const registry = new ToolRegistry()
      .register('hold_seats', handler, { idempotent: true })
      .register('charge_card', handler)
      .register('ns.tool:v1-2', handler);
    expect(registry.has('hold_seats')).toBe(true);
    expect(registry.has('nope')).toBe(false);
    expect(registry.get('nope')).toBeUndefined();
    expect(registry.list().map((t) => t.name)).toEqual([
      'hold_seats',
      'charge_card',
      'ns.tool:v1-2',
    ]);
  });

  it('keeps the handler, description and parameters', async () => {
    const parameters = { type: 'object', required: ['show'] };
    const registry = new ToolRegistry().register(
      'lookup',
      (a: { show: string }) => `found ${a.show}`,
      { description: 'Finds a show', parameters },
    );
    const tool = registry.get('lookup');
    expect(tool).toMatchObject({
      name: 'lookup',
      description: 'Finds a show',
      parameters,
    });
    expect(await tool?.handler({ show: 'Hamlet' })).toBe('found Hamlet');
  });

  it('leaves description and parameters out when not given', () => {
    const tool = new ToolRegistry().register('t', handler).get('t');
    expect(tool).not.toHaveProperty('description');
    expect(tool).not.toHaveProperty('parameters');
  });

  it.each<
    [string, { idempotent?: boolean; readOnly?: boolean }, boolean, boolean]
  >([
    ['nothing', {}, false, false],
    ['idempotent', { idempotent: true }, true, false],
    ['idempotent: false', { idempotent: false }, false, false],
    ['readOnly', { readOnly: true }, true, true],
    [
      'readOnly with idempotent: false',
      { readOnly: true, idempotent: false },
      true,
      true,
    ],
  ])(
    'with %s is idempotent=%s readOnly=%s',
    (_what, options, idempotent, readOnly) => {
      const tool = new ToolRegistry().register('t', handler, options).get('t');
      expect(tool?.idempotent).toBe(idempotent);
      expect(tool?.readOnly).toBe(readOnly);
    },
  );

  it('refuses a name registered twice', () => {
    const registry = new ToolRegistry().register('charge_card', handler);
    expect(() => registry.register('charge_card', handler)).toThrow(
      /Tool "charge_card" is already registered/,
    );
    expect(registry.list()).toHaveLength(1);
  });

  it.each<[string, unknown]>([
    ['empty', ''],
    ['with a space', 'charge card'],
    ['with a slash', 'a/b'],
    ['too long', 'x'.repeat(129)],
    ['not a string', 42],
  ])('refuses a name that is %s', (_what, name) => {
    expect(() => new ToolRegistry().register(name as string, handler)).toThrow(
      /Tool name .* is invalid/,
    );
  });

  it('accepts a name of 128 characters', () => {
    expect(() =>
      new ToolRegistry().register('x'.repeat(128), handler),
    ).not.toThrow();
  });

  it('refuses a handler that is not a function', () => {
    expect(() => new ToolRegistry().register('t', 'nope' as never)).toThrow(
      /Tool "t": the handler must be a function/,
    );
  });
});
