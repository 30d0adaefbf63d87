import { Flow as CoreFlow } from '../flow/flow.builder';
import { DurableSetupError } from '../errors';
import { FlowRegistry, type DiscoveredFlow } from './flow.registry';

class TicketsFlow {}
class RefundsFlow {}

function found(name: string, cls: DiscoveredFlow['cls']): DiscoveredFlow {
  const flow = new CoreFlow<object>(name).node('only', () => undefined);
  return { flow, cls, where: `${cls.name} (AppModule)` };
}

describe('FlowRegistry', () => {
  it('finds a registered flow by name and by class, and lists flows in discovery order', () => {
    const registry = new FlowRegistry();
    const tickets = found('tickets', TicketsFlow);
    const refunds = found('refunds', RefundsFlow);
    registry.register(tickets);
    registry.register(refunds);

    expect(registry.get('tickets')).toBe(tickets);
    expect(registry.get(RefundsFlow)).toBe(refunds);
    expect(registry.get('other')).toBeUndefined();
    expect(registry.get(class OtherFlow {})).toBeUndefined();
    expect(registry.all()).toEqual([tickets, refunds]);
    expect(registry.names()).toEqual(['tickets', 'refunds']);
  });

  it('refuses a second flow with the same name, naming both classes', () => {
    const registry = new FlowRegistry();
    registry.register(found('tickets', TicketsFlow));
    const again = () => registry.register(found('tickets', RefundsFlow));
    expect(again).toThrow(DurableSetupError);
    expect(again).toThrow(
      'Flow "tickets" is defined twice: by TicketsFlow (AppModule) and by RefundsFlow (AppModule).',
    );
    expect(registry.get(RefundsFlow)).toBeUndefined();
  });

  it('runs the pending discovery once, before the first lookup', () => {
    const registry = new FlowRegistry();
    let scans = 0;
    registry.discoverWith(() => {
      scans++;
      registry.register(found('tickets', TicketsFlow));
    });
    expect(scans).toBe(0);
    expect(registry.names()).toEqual(['tickets']);
    expect(registry.get(TicketsFlow)?.flow.name).toBe('tickets');
    expect(registry.all()).toHaveLength(1);
    expect(scans).toBe(1);
  });

  it('throws a failed discovery again at every lookup (the application is not usable)', () => {
    const registry = new FlowRegistry();
    const failure = new DurableSetupError('Payments#charge: broken');
    let scans = 0;
    registry.discoverWith(() => {
      scans++;
      throw failure;
    });
    expect(() => registry.get('tickets')).toThrow(failure);
    expect(() => registry.all()).toThrow(failure);
    expect(scans).toBe(2);
  });
});
