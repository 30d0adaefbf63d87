import { Logger, type Provider } from '@nestjs/common';
import { DurableEvents } from '../events/durable.events';
import { CheckpointStore } from '../exec/checkpoints/checkpoint-store';
import { Executor } from '../exec/executor';
import { ToolRegistry } from '../exec/tool.registry';
import {
  integerOption,
  normalizeRunnerOptions,
  type FlowRunnerOptions,
  type OptionNames,
} from '../flow/runner/flow-runner.options';
import { takeoverSettings } from '../flow/runner/takeover';
import type { QueueLimits } from '../flow/runner/queues';
import { createCheckpointStore } from './create-store';
import {
  DEFAULT_RECOVERY_CONCURRENCY,
  DURABLE_RESOLVED_OPTIONS,
} from './durable.constants';
import { NestMessages } from './durable.messages';
import { nestDurableLogger } from './nest-logger';
import { DURABLE_MODULE_OPTIONS } from './durable.module-definition';
import { DurablePackages } from './durable-packages';
import type {
  DurableMcpTools,
  DurableModuleOptions,
} from './interfaces/durable-module-options.interface';
import { mcpOption, registerModuleMcpTools } from './mcp-option';

/** The module's options with defaults merged, the store created and the key checked. @internal */
export interface ResolvedDurableOptions {
  store: CheckpointStore;
  /** The module created the store (from a descriptor), so it closes it on shutdown. */
  ownsStore: boolean;
  /**
   * What every runner of the module (flows and tool loops) is built with, already checked by the
   * runner's own `normalizeRunnerOptions`, with Nest's `Logger` as the logger; each adds the
   * module's events.
   */
  runner: Omit<FlowRunnerOptions, 'events'>;
  recoveryConcurrency: number;
  /** How long a shutdown waits for runs to reach a superstep boundary (`FlowRunner.drain`). */
  drainMs: number;
  /** The module's `queues`, checked (the flows' own come with them, from `@Flow`). */
  queues: ReadonlyMap<string, QueueLimits>;
  /** Continuous takeover's settings (checked), or false when it is off. */
  takeover: false | { everyMs: number; concurrency: number; leaseMs: number };
  /** The module's `ToolRegistry`: `@Tool` methods and the `mcp` option's tools. */
  tools: ToolRegistry;
  /** The `mcp` option, checked (registered by `registerModuleMcpTools`). */
  mcp: readonly DurableMcpTools[];
}

/** The module's option names in messages (`store`, `key`, `DurableModule: ...`). */
const MODULE_NAMES: OptionNames = {
  owner: 'DurableModule',
  checkpointKey: 'key',
};

/**
 * Checks the options and creates the store. The runner options are checked by the runner's own
 * `normalizeRunnerOptions` (one check, one message, whichever way the runner is built); defaults
 * are the runner's. Throws at bootstrap, and closes a store it created first.
 * @internal
 */
export function resolveDurableOptions(
  options: DurableModuleOptions | undefined,
): ResolvedDurableOptions {
  const given = options ?? ({} as Partial<DurableModuleOptions>);
  const recoveryConcurrency = integerOption(
    'recoveryConcurrency',
    given.recoveryConcurrency,
    DEFAULT_RECOVERY_CONCURRENCY,
    1,
    MODULE_NAMES,
  );
  const drainMs = integerOption(
    'drainMs',
    given.drainMs,
    10_000,
    0,
    MODULE_NAMES,
  );
  const mcp = mcpOption(given.mcp);
  const { store, owned } = createCheckpointStore(given.store);
  const runner: Omit<FlowRunnerOptions, 'events'> = {
    checkpoints: store,
    logger: nestDurableLogger('DurableRunner'),
    ...(given.key !== undefined &&
      given.key !== null && { checkpointKey: given.key }),
    ...(given.encryptionKey !== undefined &&
      given.encryptionKey !== null && { encryptionKey: given.encryptionKey }),
    ...(given.workerId !== undefined && { workerId: given.workerId }),
    ...(given.leaseMs !== undefined && { leaseMs: given.leaseMs }),
    ...(given.maxRecoveryAttempts !== undefined && {
      maxRecoveryAttempts: given.maxRecoveryAttempts,
    }),
    ...(given.queues !== undefined && { queues: given.queues }),
    ...(given.streamRetention !== undefined && {
      streamRetention: given.streamRetention,
    }),
  };
  let takeover: ResolvedDurableOptions['takeover'] = false;
  let queues: ResolvedDurableOptions['queues'];
  try {
    const settings = normalizeRunnerOptions(runner, MODULE_NAMES);
    const { leaseMs } = settings;
    queues = settings.queues;
    if (given.takeover !== false) {
      const settings = takeoverSettings(given.takeover ?? {}, leaseMs, {
        owner: 'DurableModule: takeover',
      });
      takeover = { ...settings, leaseMs };
    }
  } catch (error) {
    if (owned) void store.close().catch(() => undefined);
    throw error;
  }
  return {
    store,
    ownsStore: owned,
    runner,
    recoveryConcurrency,
    drainMs,
    queues,
    takeover,
    tools: new ToolRegistry(),
    mcp,
  };
}

/** The framework-free objects the module wires together, built by pure functions. @internal */
export function createDurableProviders(): Provider[] {
  return [
    {
      provide: DURABLE_RESOLVED_OPTIONS,
      // Every missing optional package (the store's, the state classes', the tool DTOs') is named
      // in one error before the store is created: the application fails to start, not at the
      // first request.
      useFactory: async (
        options: DurableModuleOptions | undefined,
        packages: DurablePackages,
      ) => {
        packages.check(options?.store, options?.mcp);
        const resolved = resolveDurableOptions(options);
        // Before anything can use the registry (the boot sweep recovers runs that call them).
        try {
          await registerModuleMcpTools(resolved.tools, resolved.mcp);
        } catch (error) {
          // The application does not start, so no shutdown closes the store made here.
          if (resolved.ownsStore)
            await resolved.store.close().catch(() => undefined);
          throw error;
        }
        return resolved;
      },
      inject: [DURABLE_MODULE_OPTIONS, DurablePackages],
    },
    {
      provide: CheckpointStore,
      useFactory: (resolved: ResolvedDurableOptions) => resolved.store,
      inject: [DURABLE_RESOLVED_OPTIONS],
    },
    {
      provide: ToolRegistry,
      useFactory: (resolved: ResolvedDurableOptions) => resolved.tools,
      inject: [DURABLE_RESOLVED_OPTIONS],
    },
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
