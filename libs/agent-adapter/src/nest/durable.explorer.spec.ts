import { Inject, Injectable, Scope, type Provider } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import { Test } from '@nestjs/testing';
import { Type } from 'class-transformer';
import {
  IsInt,
  IsOptional,
  IsString,
  Max,
  Min,
  MinLength,
  ValidateNested,
} from 'class-validator';
import { DurableSetupError, FlowError } from '../errors';
import { MemoryCheckpointStore } from '../exec/checkpoints/memory.store';
import { Executor } from '../exec/executor';
import { idempotencyKey } from '../exec/idempotency-key';
import { ToolRegistry } from '../exec/tool.registry';
import { END } from '../flow/call-node';
import { Flow as CoreFlow } from '../flow/flow.builder';
import { FlowRunner as CoreFlowRunner } from '../flow/runner/flow-runner';
import { Flow, Node, Tool } from './decorators';
import { DurableMetadataAccessor } from './durable-metadata.accessor';
import { DURABLE_RESOLVED_OPTIONS } from './durable.constants';
import { DurableExplorer } from './durable.explorer';
import { FlowRegistry } from './flow.registry';
import { thrownBy } from '../../../../test/utils/specs';

class Counter {
  value = 0;
}

@Injectable()
class Payments {
  readonly calls: unknown[] = [];

  @Tool({ name: 'charge_card', description: 'charges' })
  async charge(a: { amount: number }): Promise<string> {
    this.calls.push(a);
    return `charged ${a.amount} (${idempotencyKey().length > 0 ? 'keyed' : ''})`;
  }

  @Tool({ readOnly: true })
  balance(): number {
    this.calls.push('balance');
    return this === undefined ? -1 : 100;
  }

  @Tool({ name: 'two_args' })
  async twoArgs(a: number, b: number): Promise<number> {
    return a + b;
  }
}

@Flow('count', { state: Counter, maxVisits: 5 })
class CountFlow {
  constructor(private readonly payments: Payments) {}

  @Node({ start: true, next: 'loop' })
  async begin(s: Counter): Promise<Partial<Counter>> {
    await this.payments.charge({ amount: s.value + 1 });
    return { value: s.value + 1 };
  }

  @Node({
    route: { pick: 'again', targets: ['loop', 'finish'] },
    callsFirst: true,
  })
  loop(s: Counter): Partial<Counter> {
    return { value: s.value + 1 };
  }

  @Node({ end: true, route: undefined })
  finish(): void {}

  again(s: Counter): string {
    return s.value < 3 ? 'loop' : 'finish';
  }
}

/** The same graph, written with the framework-free builder. */
function builderTwin(): CoreFlow<Counter> {
  return new CoreFlow<Counter>('count', { state: Counter, maxVisits: 5 })
    .node('begin', () => undefined)
    .node('loop', () => undefined)
    .node('finish', () => undefined)
    .start('begin')
    .edge('begin', 'loop')
    .route('loop', () => 'loop', ['loop', 'finish'])
    .end('finish');
}

async function explorerWith(...providers: Provider[]) {
  const moduleRef = await Test.createTestingModule({
    imports: [DiscoveryModule],
    providers: [
      DurableExplorer,
      DurableMetadataAccessor,
      FlowRegistry,
      { provide: ToolRegistry, useFactory: () => new ToolRegistry() },
      {
        provide: Executor,
        useFactory: (registry: ToolRegistry) => new Executor(registry),
        inject: [ToolRegistry],
      },
      // What the explorer reads of the module's options: its queues (none here).
      { provide: DURABLE_RESOLVED_OPTIONS, useValue: { queues: new Map() } },
      ...providers,
    ],
  }).compile();
  return {
    moduleRef,
    explorer: moduleRef.get(DurableExplorer),
    flows: moduleRef.get(FlowRegistry),
    registry: moduleRef.get(ToolRegistry),
    executor: moduleRef.get(Executor),
  };
}

describe('DurableExplorer', () => {
  describe('a valid application', () => {
    it('builds the same Flow the builder API makes (same digest)', async () => {
      const { explorer, flows } = await explorerWith(Payments, CountFlow);
      explorer.onModuleInit();
      const [found, ...rest] = flows.all();
      expect(rest).toEqual([]);
      expect(found!.flow).toBeInstanceOf(CoreFlow);
      expect(found!.cls).toBe(CountFlow);
      expect(found!.flow.digest).toBe(builderTwin().digest);
      const nodes = found!.flow.compile().nodes;
      expect(nodes.get('loop')!.callsFirst).toBe(true);
      expect(nodes.get('begin')!.callsFirst).toBe(false);
      expect(flows.get(CountFlow)).toBe(found);
      expect(flows.get('count')).toBe(found);
      expect(flows.get('other')).toBeUndefined();
    });

    it('runs the flow durably: @Tool calls inside a run go through the executor', async () => {
      // No onModuleInit: the first lookup runs the scan.
      const { flows, executor, moduleRef } = await explorerWith(
        Payments,
        CountFlow,
      );
      const store = new MemoryCheckpointStore();
      const runner = new CoreFlowRunner(executor, { checkpoints: store });
      const flow = flows.get(CountFlow)!.flow;
      const result = await runner.run(flow, { value: 0 });
      expect(result).toMatchObject({ status: 'done', state: { value: 3 } });
      expect(result.state).toBeInstanceOf(Counter);
      const { calls } = await store.history(result.runId);
      expect(calls).toHaveLength(2); // charge_card: started, done
      expect(moduleRef.get(Payments).calls).toEqual([{ amount: 1 }]);
      runner.close();
    });

    it('registers every @Tool with its options; outside a run the method is a plain call', async () => {
      const { explorer, registry, moduleRef } = await explorerWith(Payments);
      explorer.onModuleInit();
      expect(registry.get('charge_card')).toMatchObject({
        idempotent: false,
        description: 'charges',
      });
      expect(registry.get('balance')).toMatchObject({
        idempotent: true,
        readOnly: true,
      });
      const payments = moduleRef.get(Payments);
      // Wrapped on the instance, not on the prototype (other instances stay untouched).
      expect(Object.prototype.hasOwnProperty.call(payments, 'balance')).toBe(
        true,
      );
      expect(payments.balance).not.toBe(Payments.prototype.balance);
      expect(payments.balance()).toBe(100);
      await expect(payments.twoArgs(1, 2)).resolves.toBe(3);
    });

    it('refuses a tool call with several arguments inside a run', async () => {
      @Flow('adds')
      class AddsFlow {
        constructor(private readonly payments: Payments) {}
        @Node({ start: true, end: true })
        async add(): Promise<void> {
          await this.payments.twoArgs(1, 2);
        }
      }
      const { flows, executor } = await explorerWith(Payments, AddsFlow);
      const runner = new CoreFlowRunner(executor);
      const result = await runner.run(flows.get(AddsFlow)!.flow, {});
      expect(result.status).toBe('failed');
      expect(result.error?.message).toMatch(
        /Payments#twoArgs was called with 2 arguments inside a run/,
      );
      runner.close();
    });

    it('scans a useExisting alias once, and finds classes behind useValue and useFactory', async () => {
      const { explorer, flows, registry } = await explorerWith(
        Payments,
        { provide: 'PAYMENTS_ALIAS', useExisting: Payments },
        {
          provide: 'COUNT_BY_FACTORY',
          useFactory: (p: Payments) => new CountFlow(p),
          inject: [Payments],
        },
      );
      explorer.onModuleInit();
      expect(registry.list()).toHaveLength(3);
      expect(flows.get(CountFlow)?.flow.name).toBe('count');

      @Injectable()
      class Mail {
        @Tool({ name: 'mail' })
        send(): string {
          return 'sent';
        }
      }
      const byValue = await explorerWith({
        provide: 'MAIL',
        useValue: new Mail(),
      });
      byValue.explorer.onModuleInit();
      expect(byValue.registry.has('mail')).toBe(true);
    });

    it('routes with a pick function and END', async () => {
      @Flow('routed')
      class Routed {
        @Node({
          start: true,
          route: {
            pick: (s: { go?: boolean }) => (s.go ? 'b' : END),
            targets: ['b', END],
          },
        })
        a(): void {}

        @Node({ end: true })
        b(): Partial<{ reached: boolean }> {
          return { reached: true };
        }
      }
      const { flows, executor } = await explorerWith(Routed);
      const runner = new CoreFlowRunner(executor);
      const flow = flows.get('routed')!.flow;
      await expect(runner.run(flow, { go: true })).resolves.toMatchObject({
        status: 'done',
        state: { reached: true },
      });
      await expect(runner.run(flow, {})).resolves.toMatchObject({
        status: 'done',
        state: {},
      });
      runner.close();
    });
  });

  describe('JSON schema of @Tool({ args })', () => {
    class Address {
      @IsString()
      city!: string;
    }
    class BookArgs {
      @IsString()
      @MinLength(1)
      show!: string;

      @IsInt()
      @Min(1)
      @Max(10)
      seats!: number;

      @IsOptional()
      @ValidateNested()
      @Type(() => Address)
      deliverTo?: Address;
    }

    @Injectable()
    class Booking {
      @Tool({ name: 'book', args: BookArgs, description: 'books seats' })
      async book(a: BookArgs): Promise<string> {
        return a.show;
      }

      @Tool({
        name: 'book_explicit',
        args: BookArgs,
        parameters: { type: 'object', properties: {} },
      })
      async bookExplicit(a: BookArgs): Promise<string> {
        return a.show;
      }
    }

    it('is generated from the DTO, nested DTOs included, so a model can be shown it', async () => {
      const { explorer, registry } = await explorerWith(Booking);
      explorer.onModuleInit();
      expect(registry.get('book')?.parameters).toEqual({
        type: 'object',
        properties: {
          show: { type: 'string', minLength: 1 },
          seats: { type: 'integer', minimum: 1, maximum: 10 },
          deliverTo: { $ref: '#/definitions/Address' },
        },
        required: ['show', 'seats'],
        definitions: {
          Address: {
            type: 'object',
            properties: { city: { type: 'string' } },
            required: ['city'],
          },
        },
      });
    });

    it('gives way to explicit parameters', async () => {
      const { explorer, registry } = await explorerWith(Booking);
      explorer.onModuleInit();
      expect(registry.get('book_explicit')?.parameters).toEqual({
        type: 'object',
        properties: {},
      });
    });
  });

  describe('misuse (each a clear error naming Class#method)', () => {
    const refuses = async (
      providers: Provider[],
      error: RegExp | string,
      type: new (...args: never[]) => Error = DurableSetupError,
    ) => {
      const { explorer } = await explorerWith(...providers);
      expect(thrownBy(type, () => explorer.onModuleInit()).message).toMatch(
        error,
      );
    };

    it('a request-scoped tool host', async () => {
      @Injectable({ scope: Scope.REQUEST })
      class Lookup {
        @Tool()
        find(): string {
          return 'x';
        }
      }
      await refuses(
        [Lookup],
        /^Lookup#find cannot be a durable @Tool: .*request-scoped/,
      );
    });

    it('a transient tool host', async () => {
      @Injectable({ scope: Scope.TRANSIENT })
      class Lookup {
        @Tool()
        find(): string {
          return 'x';
        }
      }
      await refuses([Lookup], /^Lookup#find cannot be a durable @Tool/);
    });

    it('a request-scoped flow, also when the scope comes from a dependency', async () => {
      @Injectable({ scope: Scope.REQUEST })
      class PerRequest {}
      @Flow('scoped')
      class ScopedFlow {
        constructor(@Inject(PerRequest) readonly dep: PerRequest) {}
        @Node({ start: true, end: true })
        only(): void {}
      }
      await refuses(
        [PerRequest, ScopedFlow],
        /^ScopedFlow#only cannot be a durable @Flow: .*non-static/,
      );
    });

    it('two flows with one name', async () => {
      @Flow('count')
      class OtherCount {
        @Node({ start: true, end: true })
        only(): void {}
      }
      await refuses(
        [Payments, CountFlow, OtherCount],
        /Flow "count" is defined twice: by CountFlow \(.*\) and by OtherCount \(.*\)/,
      );
    });

    it('two tools with one name', async () => {
      @Injectable()
      class Cards {
        @Tool({ name: 'charge_card' })
        charge(): void {}
      }
      await refuses(
        [Payments, Cards],
        /^Tool "charge_card" is defined twice: by Payments#charge \(\w+\) and by Cards#charge \(\w+\)/,
      );
    });

    it('an edge to an unknown node (graph errors come from the core builder, class added)', async () => {
      @Flow('lost')
      class LostFlow {
        @Node({ start: true, next: 'nowhere' })
        a(): void {}
      }
      await refuses(
        [LostFlow],
        /Flow "lost": edge a -> nowhere names node "nowhere", which does not exist\. \(in LostFlow\)/,
        FlowError,
      );
    });

    it('a node with no way out', async () => {
      @Flow('stuck')
      class StuckFlow {
        @Node({ start: true })
        a(): void {}
      }
      await refuses(
        [StuckFlow],
        /node "a" has no outgoing edge.*\(in StuckFlow\)/,
        FlowError,
      );
    });

    it('a flow without a start', async () => {
      @Flow('headless')
      class Headless {
        @Node({ end: true })
        a(): void {}
      }
      await refuses(
        [Headless],
        'Flow "headless" (Headless) has no start node: mark the first node @Node({ start: true }).',
      );
    });

    it('a flow without nodes', async () => {
      @Flow('empty')
      class Empty {}
      await refuses([Empty], 'Flow "empty" (Empty) has no @Node() methods.');
    });

    it('an invalid flow name', async () => {
      @Flow('no spaces')
      class Spaced {
        @Node({ start: true, end: true })
        a(): void {}
      }
      await refuses(
        [Spaced],
        /Flow name "no spaces" is invalid.*\(in Spaced\)/,
        FlowError,
      );
    });

    it('@Node outside a @Flow class', async () => {
      @Injectable()
      class NotAFlow {
        @Node({ start: true })
        a(): void {}
      }
      await refuses(
        [NotAFlow],
        'NotAFlow#a has @Node() but its class has no @Flow(name)',
      );
    });

    it('@Node and @Tool on one method', async () => {
      @Flow('both')
      class Both {
        @Node({ start: true, end: true })
        @Tool()
        a(): void {}
      }
      await refuses([Both], 'Both#a has both @Node() and @Tool()');
    });

    it('a route whose pick names a missing method', async () => {
      @Flow('picky')
      class Picky {
        @Node({ start: true, route: { pick: 'choose', targets: ['b'] } })
        a(): void {}
        @Node({ end: true })
        b(): void {}
      }
      await refuses([Picky], 'Picky#a: route.pick names method "choose"');
    });

    it('an invalid tool name', async () => {
      @Injectable()
      class Badly {
        @Tool({ name: 'has space' })
        a(): void {}
      }
      await refuses([Badly], /^Badly#a: Tool name "has space" is invalid/);
    });
  });
});
