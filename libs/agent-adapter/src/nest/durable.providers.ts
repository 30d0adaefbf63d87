import { Logger, type Provider } from '@nestjs/common';
import { DurableEvents } from '../events/durable.events';
import { CheckpointStore } from '../exec/checkpoints/checkpoint-store';
import { KeyRing } from '../exec/durable/key-ring';
import { Executor } from '../exec/executor';
import { ToolRegistry } from '../exec/tool.registry';
import { workerIdOf } from '../flow/worker-id';
import { createCheckpointStore } from './create-store';
import {
  DEFAULT_LEASE_MS,
  DEFAULT_RECOVERY_CONCURRENCY,
  DURABLE_RESOLVED_OPTIONS,
} from './durable.constants';
import { NestMessages } from './durable.messages';
import { DURABLE_MODULE_OPTIONS } from './durable.module-definition';
import { DurablePackages } from './durable-packages';
import { DurableSetupError } from './errors/durable-setup.error';
import type { DurableModuleOptions } from './interfaces/durable-module-options.interface';

/** The module's options with defaults merged, the store created and the key checked. @internal */
export interface ResolvedDurableOptions {
  store: CheckpointStore;
  /** The module created the store (from a descriptor), so it closes it on shutdown. */
  ownsStore: boolean;
  /** Undefined only for a store that stays in this process (memory). */
  key?: KeyRing;
  /** Encrypts run data at rest. */
  encryptionKey?: KeyRing;
  workerId?: string;
  leaseMs: number;
  recoveryConcurrency: number;
  maxRecoveryAttempts?: number;
}

/**
 * Checks the options and creates the store. Defaults are merged here, where the options are
 * consumed, so `forRoot` and every `forRootAsync` variant agree. Throws at bootstrap.
 * @internal
 */
export function resolveDurableOptions(
  options: DurableModuleOptions | undefined,
): ResolvedDurableOptions {
  const given = options ?? ({} as Partial<DurableModuleOptions>);
  const leaseMs = positiveInteger('leaseMs', given.leaseMs, DEFAULT_LEASE_MS);
  const recoveryConcurrency = positiveInteger(
    'recoveryConcurrency',
    given.recoveryConcurrency,
    DEFAULT_RECOVERY_CONCURRENCY,
  );
  const maxRecoveryAttempts =
    given.maxRecoveryAttempts === undefined
      ? undefined
      : positiveInteger('maxRecoveryAttempts', given.maxRecoveryAttempts, 0);
  if (given.workerId !== undefined) {
    try {
      workerIdOf(given.workerId ?? ''); // the runner's own check
    } catch (error) {
      throw new DurableSetupError(`DurableModule: ${(error as Error).message}`);
    }
  }
  const { store, owned } = createCheckpointStore(given.store);
  let key: KeyRing | undefined;
  let encryptionKey: KeyRing | undefined;
  try {
    if (given.encryptionKey !== undefined && given.encryptionKey !== null)
      encryptionKey = KeyRing.from(given.encryptionKey);
    if (given.key !== undefined && given.key !== null) {
      key = KeyRing.from(given.key);
      if (encryptionKey) key.withEncryption(encryptionKey); // its keys must differ
    } else if (store.shared) {
      throw new DurableSetupError(
        NestMessages.keyRequired(store.constructor.name),
      );
    }
  } catch (error) {
    if (owned) void store.close().catch(() => undefined);
    throw error;
  }
  return {
    store,
    ownsStore: owned,
    ...(key && { key }),
    ...(encryptionKey && { encryptionKey }),
    ...(given.workerId !== undefined && { workerId: given.workerId }),
    leaseMs,
    recoveryConcurrency,
    ...(maxRecoveryAttempts !== undefined && { maxRecoveryAttempts }),
  };
}

function positiveInteger(
  option: string,
  value: unknown,
  fallback: number,
): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1) {
    throw new DurableSetupError(NestMessages.badNumber(option, value));
  }
  return value;
}

/** The framework-free objects the module wires together, built by pure functions. @internal */
export function createDurableProviders(): Provider[] {
  return [
    {
      provide: DURABLE_RESOLVED_OPTIONS,
      // Every missing optional package (the store's, the state classes', the tool DTOs') is named
      // in one error before the store is created: the application fails to start, not at the
      // first request.
      useFactory: (
        options: DurableModuleOptions | undefined,
        packages: DurablePackages,
      ) => {
        packages.check(options?.store);
        return resolveDurableOptions(options);
      },
      inject: [DURABLE_MODULE_OPTIONS, DurablePackages],
    },
    {
      provide: CheckpointStore,
      useFactory: (resolved: ResolvedDurableOptions) => resolved.store,
      inject: [DURABLE_RESOLVED_OPTIONS],
    },
    { provide: ToolRegistry, useFactory: () => new ToolRegistry() },
    {
      provide: Executor,
      useFactory: (registry: ToolRegistry) => new Executor(registry),
      inject: [ToolRegistry],
    },
    {
      provide: DurableEvents,
      useFactory: () => {
        const logger = new Logger('DurableEvents');
        return new DurableEvents((error, event) =>
          logger.error(
            NestMessages.listenerThrew(event),
            error instanceof Error ? error.stack : String(error),
          ),
        );
      },
    },
  ];
}
