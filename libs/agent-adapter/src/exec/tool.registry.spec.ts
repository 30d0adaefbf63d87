import { DurableSetupError } from '../errors';
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

  it('only(names): a registry of some tools, with the same definitions; unknown names refused', () => {
    const all = new ToolRegistry()
      .register('a', () => 1, { readOnly: true, description: 'A' })
      .register('b', () => 2)
      .register('c', () => 3);
    const some = all.only(['c', 'a']);
    expect(some.list().map((t) => t.name)).toEqual(['c', 'a']);
    expect(some.get('a')).toBe(all.get('a'));
    expect(some.has('b')).toBe(false);
    expect(() => all.only(['a', 'nope'])).toThrow(
      'Tool "nope" is not registered. Registered tools: a, b, c.',
    );
  });

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

  it('keeps the policies: an approval policy, retry (backoff defaults to 0), timeoutMs', () => {
    const policy = (a: { amount: number }) => a.amount > 100;
    const registry = new ToolRegistry()
      .register('refund', (a: { amount: number }) => a.amount, {
        approval: policy,
        retry: { attempts: 3 },
        timeoutMs: 500,
      })
      .register('plain', handler);
    expect(registry.get('refund')).toMatchObject({
      approval: policy,
      retry: { attempts: 3, backoff: 0 },
      timeoutMs: 500,
    });
    expect(registry.get('plain')).toMatchObject({ approval: false });
    expect(registry.get('plain')).not.toHaveProperty('retry');
    expect(registry.get('plain')).not.toHaveProperty('timeoutMs');
  });

  it.each<[string, object, string]>([
    [
      'idempotent',
      { idempotent: 'yes' },
      'idempotent must be true or false, got "yes"',
    ],
    ['readOnly', { readOnly: 1 }, 'readOnly must be true or false, got 1'],
    [
      'approval',
      { approval: 'always' },
      'approval must be true, false, a function (args, ctx) => boolean, or { timeoutMs, onTimeout, when? }',
    ],
    ['retry', { retry: null }, 'retry must be an object'],
    ['retry', { retry: 3 }, 'retry must be an object'],
    [
      'retry.attempts',
      { retry: {} },
      'retry.attempts must be an integer from 1 to 1000, got undefined',
    ],
    [
      'retry.attempts',
      { retry: { attempts: 0 } },
      'retry.attempts must be an integer from 1 to 1000, got 0',
    ],
    [
      'retry.attempts',
      { retry: { attempts: 1.5 } },
      'retry.attempts must be an integer',
    ],
    [
      'retry.attempts',
      { retry: { attempts: 1001 } },
      'retry.attempts must be an integer',
    ],
    [
      'retry.backoff',
      { retry: { attempts: 2, backoff: -1 } },
      'retry.backoff must be a number of milliseconds',
    ],
    [
      'retry.backoff',
      { retry: { attempts: 2, backoff: Number.NaN } },
      'retry.backoff must be',
    ],
    [
      'retry.backoff',
      { retry: { attempts: 2, backoff: '1s' } },
      'retry.backoff must be',
    ],
    [
      'timeoutMs',
      { timeoutMs: 0 },
      'timeoutMs must be a number of milliseconds from 1',
    ],
    ['timeoutMs', { timeoutMs: -5 }, 'timeoutMs must be'],
    ['timeoutMs', { timeoutMs: Number.POSITIVE_INFINITY }, 'timeoutMs must be'],
    ['timeoutMs', { timeoutMs: 2 ** 31 }, 'timeoutMs must be'],
    ['timeoutMs', { timeoutMs: '100' }, 'timeoutMs must be'],
  ])(
    'refuses a bad %s with a DurableSetupError naming the tool and the option (%j)',
    (_option, options, message) => {
      const registry = new ToolRegistry();
      const attempt = () =>
        registry.register('charge_card', handler, options as never);
      expect(attempt).toThrow(DurableSetupError);
      expect(attempt).toThrow(`Tool "charge_card": ${message}`);
      expect(registry.has('charge_card')).toBe(false);
    },
  );

  it('accepts the edges of the ranges', () => {
    expect(() =>
      new ToolRegistry().register('t', handler, {
        retry: { attempts: 1000, backoff: 0 },
        timeoutMs: 2 ** 31 - 1,
      }),
    ).not.toThrow();
    expect(() =>
      new ToolRegistry().register('t', handler, {
        retry: { attempts: 1, backoff: (n) => n * 10 },
        timeoutMs: 1,
      }),
    ).not.toThrow();
  });

  it("types an approval policy's arguments from the handler", () => {
    const registry = new ToolRegistry().register(
      'refund',
      (a: { amount: number }) => a.amount,
      { approval: (a) => a.amount > 100 },
    );
    registry.register('r2', (a: { amount: number }) => a, {
      // @ts-expect-error: the policy's args are the handler's: an unknown field does not compile
      approval: (a) => a.nope === 1,
    });
    expect(registry.has('refund')).toBe(true);
  });
});
