import { Injectable } from '@nestjs/common';
import type { Flow as CoreFlow } from '../flow/flow.builder';
import type { AnyClass } from './durable-packages';
import { NestMessages } from './durable.messages';
import { DurableSetupError } from '../errors';
import type { QueueLimits } from '../flow/runner/queues';
import type { CronMetadata } from './decorators/durable-cron.decorator';

/**
 * A flow as `FlowRunner` methods take it: the `@Flow()` class, or the flow's name.
 * @publicApi
 */
export type FlowRef = string | (abstract new (...args: never[]) => object);

/**
 * A `@Flow()` class turned into the core `Flow` the builder API makes.
 * @publicApi
 */
export interface DiscoveredFlow {
  readonly flow: CoreFlow<object>;
  readonly cls: AnyClass;
  /** `ClassName (ModuleName)`, for messages. */
  readonly where: string;
  /** The flow's own queue's limits (`@Flow(name, { queue })`), checked. */
  readonly queue?: QueueLimits;
  /**
   * Its `@DurableCron` schedules, as declared (checked at discovery). Their stored state (paused,
   * next tick): `FlowRunner.schedules.list()`.
   */
  readonly schedules?: readonly CronMetadata[];
}

/**
 * The application's flows, by name and by `@Flow()` class. The module's explorer fills it from
 * discovery; `FlowRunner`, the recovery sweeps and the run viewer look flows up here. Inject it
 * (from 'agent-adapter/nest') to list or resolve the flows yourself, e.g. an admin endpoint that
 * shows which flows this application runs, or a check that a flow name read from a request exists
 * before calling `FlowRunner`.
 * @publicApi
 */
@Injectable()
export class FlowRegistry {
  private readonly byName = new Map<string, DiscoveredFlow>();
  private readonly byClass = new Map<AnyClass, DiscoveredFlow>();
  /** Discovery not yet run: a lookup before the module's `onModuleInit` runs it first. */
  private pendingScan?: () => void;

  /**
   * The scan that fills this registry, run once before the first lookup if the module has not
   * run it yet (a provider of another module may ask for a flow in its own `onModuleInit`).
   * @internal
   */
  discoverWith(scan: () => void): void {
    this.pendingScan = scan;
  }

  /** Adds a discovered flow; a second flow with the same name is refused. @internal */
  register(found: DiscoveredFlow): void {
    const known = this.byName.get(found.flow.name);
    if (known)
      throw new DurableSetupError(
        NestMessages.duplicateFlow(found.flow.name, known.where, found.where),
      );
    this.byName.set(found.flow.name, found);
    this.byClass.set(found.cls, found);
  }

  /** A flow by its `@Flow()` class or its name, or undefined. */
  get(ref: FlowRef): DiscoveredFlow | undefined {
    this.discover();
    return typeof ref === 'string'
      ? this.byName.get(ref)
      : this.byClass.get(ref);
  }

  /** Every flow, in discovery order. */
  all(): DiscoveredFlow[] {
    this.discover();
    return [...this.byName.values()];
  }

  /** The name of every flow, in discovery order. */
  names(): string[] {
    return this.all().map((found) => found.flow.name);
  }

  private discover(): void {
    const scan = this.pendingScan;
    if (!scan) return;
    // A failed scan throws again here, at every lookup: the application is not usable.
    scan();
    this.pendingScan = undefined;
  }
}
