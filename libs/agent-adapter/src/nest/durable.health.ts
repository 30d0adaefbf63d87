import { Injectable } from '@nestjs/common';
import { CheckpointStore } from '../exec/checkpoints/checkpoint-store';
import { NestMessages } from './durable.messages';

/** What a health check reports for the store (the shape `@nestjs/terminus` reads). @publicApi */
export type DurableHealthResult<Key extends string = string> = Record<
  Key,
  {
    status: 'up' | 'down';
    /** The store's class. */
    store: string;
    /** How long the probe took (ms). */
    latencyMs?: number;
    /** Why it is down. */
    message?: string;
  }
>;

/** A run id no run has: reading its head is the cheapest indexed read every store has. */
const PROBE = 'agent-adapter:health-probe';

/**
 * A health indicator for the checkpoint store, for `@nestjs/terminus` (or any readiness probe):
 *
 * ```ts
 * @Get('health') @HealthCheck()
 * check() { return this.health.check([() => this.durable.isHealthy('durable')]); }
 * ```
 *
 * It reads one (absent) run head with a timeout: `up` when the store answers, `down` with the
 * reason when it does not. It never writes.
 * @publicApi
 */
@Injectable()
export class DurableHealthIndicator {
  constructor(private readonly store: CheckpointStore) {}

  async isHealthy<Key extends string = 'durable'>(
    key: Key = 'durable' as Key,
    options: { timeoutMs?: number } = {},
  ): Promise<DurableHealthResult<Key>> {
    const store = this.store.constructor.name;
    const started = performance.now();
    const timeoutMs = options.timeoutMs ?? 1_000;
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        this.store.head(PROBE),
        new Promise((_, reject) => {
          timer = setTimeout(
            () => reject(new Error(NestMessages.healthTimeout(timeoutMs))),
            timeoutMs,
          );
        }),
      ]);
      const latencyMs = Math.round(performance.now() - started);
      return {
        [key]: { status: 'up', store, latencyMs },
      } as DurableHealthResult<Key>;
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      return {
        [key]: { status: 'down', store, message },
      } as DurableHealthResult<Key>;
    } finally {
      clearTimeout(timer);
    }
  }
}
