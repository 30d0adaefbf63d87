import {
  Inject,
  Module,
  type DynamicModule,
  type OnApplicationShutdown,
  type Provider,
} from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import { DurableEvents } from '../events/durable.events';
import { CheckpointStore } from '../exec/checkpoints/checkpoint-store';
import { Executor } from '../exec/executor';
import { ToolRegistry } from '../exec/tool.registry';
import { DurableEventsBridge } from './durable-events.bridge';
import { DurableFlowRunner } from './durable-flow.runner';
import { DurableMetadataAccessor } from './durable-metadata.accessor';
import { DurablePackages } from './durable-packages';
import { DURABLE_RESOLVED_OPTIONS } from './durable.constants';
import { DurableExplorer } from './durable.explorer';
import { NestMessages } from './durable.messages';
import {
  ConfigurableModuleClass,
  type DurableModuleAsyncOptions,
  type DurableModuleRootOptions,
} from './durable.module-definition';
import {
  createDurableProviders,
  type ResolvedDurableOptions,
} from './durable.providers';
import { DurableSetupError } from '../errors';
import { DurableHealthIndicator } from './durable.health';
import { FlowRegistry } from './flow.registry';
import { RecoveryOrchestrator } from './recovery.orchestrator';
import type { DurableViewerOptions } from './interfaces/durable-module-options.interface';
import { ToolLoopRunner } from './tool-loop.runner';
import { VIEWER_CONFIG, viewerConfig } from './viewer/viewer.config';
import { createViewerController } from './viewer/viewer.controller';
import { ViewerCsrf } from './viewer/viewer.csrf';
import { ViewerActions } from './viewer/viewer.actions';
import { ViewerService } from './viewer/viewer.service';

/**
 * Durable flows and tools for a Nest application:
 *
 * ```ts
 * DurableModule.forRoot({ store: { type: 'sqlite', path: 'data/runs.db' }, key: process.env.CHECKPOINT_KEY })
 * ```
 *
 * Discovers `@Flow()` classes and `@Tool()` methods, provides `FlowRunner`, `FlowRegistry`,
 * `CheckpointStore`, `ToolRegistry`, `DurableEvents` and `RecoveryOrchestrator`, and recovers
 * unfinished runs on bootstrap. Global unless `isGlobal: false`. On shutdown it closes the store
 * it created from a descriptor, never a store instance the application passed (as
 * `TypeOrmModule` destroys only the DataSource it made).
 * @publicApi
 */
@Module({
  imports: [DiscoveryModule],
  providers: [
    ...createDurableProviders(),
    DurablePackages,
    DurableMetadataAccessor,
    FlowRegistry,
    DurableExplorer,
    DurableFlowRunner,
    DurableEventsBridge,
    ToolLoopRunner,
    RecoveryOrchestrator,
    DurableHealthIndicator,
  ],
  exports: [
    DurableFlowRunner,
    CheckpointStore,
    ToolRegistry,
    Executor,
    DurableEvents,
    ToolLoopRunner,
    RecoveryOrchestrator,
    DurableHealthIndicator,
    FlowRegistry,
  ],
})
export class DurableModule
  extends ConfigurableModuleClass
  implements OnApplicationShutdown
{
  constructor(
    @Inject(DURABLE_RESOLVED_OPTIONS)
    private readonly resolved: ResolvedDurableOptions,
  ) {
    super();
  }

  /** `forRoot(options)`: the options as they are (`isGlobal`, `recoverOnBoot` extras included). */
  static override forRoot(options: DurableModuleRootOptions): DynamicModule {
    return withViewer(super.forRoot(options), options.viewer);
  }

  /**
   * `forRootAsync({ imports, inject, useFactory })`, `({ useClass })` or `({ useExisting })`
   * (a class with `createDurableOptions()`). Throws at once if none is given.
   */
  static override forRootAsync(
    options: DurableModuleAsyncOptions,
  ): DynamicModule {
    if (
      typeof options !== 'object' ||
      options === null ||
      (!options.useFactory && !options.useClass && !options.useExisting)
    ) {
      throw new DurableSetupError(NestMessages.noAsyncVariant());
    }
    return withViewer(super.forRootAsync(options), options.viewer);
  }

  /**
   * Closes the store if this module created it. Nest calls a module's own hook after its
   * providers' and after every `beforeApplicationShutdown`, so the recovery sweeps and the
   * runners' lease renewal have stopped by now (RecoveryOrchestrator).
   */
  async onApplicationShutdown(): Promise<void> {
    if (this.resolved.ownsStore) await this.resolved.store.close();
  }
}

/**
 * The module with the viewer's controller and providers when `viewer` is given. Checked here, at
 * forRoot time: a bad or unguarded (production) viewer fails at once (`viewerConfig`).
 */
function withViewer(
  module: DynamicModule,
  options: DurableViewerOptions | undefined,
): DynamicModule {
  if (!options) return module;
  const config = viewerConfig(options);
  // ViewerSecurityGuard is not a provider here: Nest makes it for the controller's @UseGuards
  // (one instance, whose onApplicationBootstrap warns once).
  const providers: Provider[] = [
    { provide: VIEWER_CONFIG, useValue: config },
    ViewerCsrf,
    ViewerService,
    ViewerActions,
  ];
  return {
    ...module,
    providers: [...(module.providers ?? []), ...providers],
    controllers: [
      ...(module.controllers ?? []),
      createViewerController(config),
    ],
  };
}
