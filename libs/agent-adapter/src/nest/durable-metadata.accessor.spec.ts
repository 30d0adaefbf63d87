import { Reflector } from '@nestjs/core';
import { INJECTABLE_WATERMARK } from '@nestjs/common/constants';
import { END } from '../flow/call-node';
import { Flow, Node, Tool } from './decorators';
import { DurableMetadataAccessor } from './durable-metadata.accessor';

class OrderState {
  show = '';
}

class ChargeArgs {
  seats = 0;
}

@Flow('tickets', { state: OrderState, maxVisits: 3 })
class TicketsFlow {
  @Node({ start: true, next: ['pay', 'mail'], maxVisits: 2 })
  hold(): void {}

  @Node({ route: { pick: 'choose', targets: ['mail', END] } })
  pay(): void {}

  @Node({ end: true })
  mail(): void {}

  choose(): string {
    return END;
  }
}

class Payments {
  @Tool({ name: 'charge_card', idempotent: true, args: ChargeArgs })
  charge(): void {}

  @Tool()
  refund(): void {}

  plain(): void {}
}

describe('DurableMetadataAccessor', () => {
  const accessor = new DurableMetadataAccessor(new Reflector());

  it('reads @Flow() options with the name', () => {
    expect(accessor.getFlowMetadata(TicketsFlow)).toEqual({
      name: 'tickets',
      state: OrderState,
      maxVisits: 3,
    });
    expect(accessor.getFlowMetadata(Payments)).toBeUndefined();
  });

  it('makes a @Flow() class injectable without @Injectable()', () => {
    expect(Reflect.getMetadata(INJECTABLE_WATERMARK, TicketsFlow)).toBe(true);
  });

  it('reads @Node() options per method', () => {
    const proto = TicketsFlow.prototype;
    expect(accessor.getNodeMetadata(proto.hold)).toEqual({
      start: true,
      next: ['pay', 'mail'],
      maxVisits: 2,
    });
    expect(accessor.getNodeMetadata(proto.pay)).toEqual({
      route: { pick: 'choose', targets: ['mail', END] },
    });
    expect(accessor.getNodeMetadata(proto.mail)).toEqual({ end: true });
    expect(accessor.getNodeMetadata(proto.choose)).toBeUndefined();
  });

  it('reads @Tool() options per method', () => {
    const proto = Payments.prototype;
    expect(accessor.getToolMetadata(proto.charge)).toEqual({
      name: 'charge_card',
      idempotent: true,
      args: ChargeArgs,
    });
    expect(accessor.getToolMetadata(proto.refund)).toEqual({});
    expect(accessor.getToolMetadata(proto.plain)).toBeUndefined();
    expect(accessor.getNodeMetadata(proto.charge)).toBeUndefined();
  });

  it('returns undefined for targets that cannot carry metadata', () => {
    for (const target of [undefined, null, 'TicketsFlow', 42, {}]) {
      expect(accessor.getFlowMetadata(target)).toBeUndefined();
      expect(accessor.getNodeMetadata(target)).toBeUndefined();
      expect(accessor.getToolMetadata(target)).toBeUndefined();
    }
  });
});
