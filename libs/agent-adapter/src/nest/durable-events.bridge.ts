import {
  Injectable,
  Logger,
  type OnModuleDestroy,
  type OnModuleInit,
} from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import {
  DurableEvents,
  type DurableEventMap,
  type DurableEventName,
} from '../events/durable.events';
import { loadOptionalPackage } from '../peers/optional-packages';

/** Every event the library emits (a record, so a new event name fails to compile until listed). */
const BRIDGED: Record<DurableEventName, true> = {
  'checkpoint.saved': true,
  'run.recovered': true,
  'run.decided': true,
};

/** What the bridge needs of `@nestjs/event-emitter` (an optional peer, loaded on demand). */
interface EventEmitterPackage {
  EventEmitter2: abstract new (...args: never[]) => EmitterLike;
  EventEmitterReadinessWatcher?: abstract new (
    ...args: never[]
  ) => ReadinessLike;
}
interface EmitterLike {
  emit(event: string, payload: unknown): boolean;
}
interface ReadinessLike {
  waitUntilReady(): Promise<void>;
}

/**
 * Forwards the library's events to `@nestjs/event-emitter` when the application imports
 * `EventEmitterModule.forRoot()`, under the same names, so `@OnEvent('checkpoint.saved')` and
 * `@OnEvent('run.recovered')` (and `'run.decided'`) work. Without it, subscribe with `DurableEvents.on()`.
 * @internal
 */
@Injectable()
export class DurableEventsBridge implements OnModuleInit, OnModuleDestroy {
  private readonly logger = new Logger('DurableEvents');
  private readonly unsubscribe: Array<() => void> = [];
  private readiness?: ReadinessLike;

  constructor(
    private readonly moduleRef: ModuleRef,
    private readonly events: DurableEvents,
  ) {}

  onModuleInit(): void {
    const pkg = loadEventEmitter();
    const emitter = pkg && this.find(pkg.EventEmitter2);
    if (!pkg || !emitter) return;
    this.readiness = pkg.EventEmitterReadinessWatcher
      ? this.find(pkg.EventEmitterReadinessWatcher)
      : undefined;
    for (const name of Object.keys(BRIDGED) as DurableEventName[]) {
      this.unsubscribe.push(
        this.events.on(name, (event: DurableEventMap[typeof name]) => {
          emitter.emit(name, event);
        }),
      );
    }
    this.logger.log(
      `Forwarding ${Object.keys(BRIDGED).join(', ')} to @nestjs/event-emitter.`,
    );
  }

  /**
   * Resolves once `@OnEvent()` listeners are attached (event-emitter attaches them in its own
   * bootstrap hook), so events of the boot recovery reach them. At once without event-emitter.
   * Never rejects: a failed listener set-up must not stop recovery.
   */
  ready(): Promise<void> {
    return (this.readiness?.waitUntilReady() ?? Promise.resolve()).catch(
      (error: unknown) => {
        this.logger.warn(
          `@nestjs/event-emitter did not get ready (${String(error)}); recovering anyway.`,
        );
      },
    );
  }

  onModuleDestroy(): void {
    for (const off of this.unsubscribe.splice(0)) off();
  }

  private find<T>(token: abstract new (...args: never[]) => T): T | undefined {
    try {
      return this.moduleRef.get(token, { strict: false });
    } catch {
      return undefined; // the application did not import EventEmitterModule
    }
  }
}

function loadEventEmitter(): EventEmitterPackage | undefined {
  return loadOptionalPackage<EventEmitterPackage>('@nestjs/event-emitter');
}
