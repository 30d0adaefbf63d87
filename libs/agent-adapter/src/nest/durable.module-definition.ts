import { ConfigurableModuleBuilder, type Provider } from '@nestjs/common';
import { DURABLE_MODULE_EXTRAS } from './durable.constants';
import { VIEWER_CONFIG, viewerConfig } from './viewer/viewer.config';
import { createViewerController } from './viewer/viewer.controller';
import { ViewerCsrf } from './viewer/viewer.csrf';
import { ViewerService } from './viewer/viewer.service';
import type {
  DurableModuleExtras,
  DurableModuleOptions,
  DurableViewerOptions,
} from './interfaces/durable-module-options.interface';

/**
 * `forRoot(options)` / `forRootAsync({ imports, inject, useFactory | useClass | useExisting })`,
 * the options token `DURABLE_MODULE_OPTIONS`, and two extras that shape the module: `isGlobal`
 * (default true) and `recoverOnBoot` (default true), stripped from the injected options and
 * provided to the orchestrator as `DURABLE_MODULE_EXTRAS`.
 */
export const {
  ConfigurableModuleClass,
  MODULE_OPTIONS_TOKEN: DURABLE_MODULE_OPTIONS,
  OPTIONS_TYPE,
  ASYNC_OPTIONS_TYPE,
} = new ConfigurableModuleBuilder<DurableModuleOptions>({
  moduleName: 'Durable',
})
  .setClassMethodName('forRoot')
  .setFactoryMethodName('createDurableOptions')
  .setExtras<DurableModuleExtras>(
    { isGlobal: true, recoverOnBoot: true },
    (definition, extras) => {
      // Checked here, at forRoot time: a bad or unguarded (production) viewer fails at once.
      const viewer = extras.viewer ? viewerParts(extras.viewer) : undefined;
      return {
        ...definition,
        global: extras.isGlobal,
        providers: [
          ...(definition.providers ?? []),
          {
            provide: DURABLE_MODULE_EXTRAS,
            useValue: {
              isGlobal: extras.isGlobal,
              recoverOnBoot: extras.recoverOnBoot,
            } satisfies DurableModuleExtras,
          },
          ...(viewer?.providers ?? []),
        ],
        controllers: [
          ...(definition.controllers ?? []),
          ...(viewer ? [viewer.controller] : []),
        ],
      };
    },
  )
  .build();

/** What `DurableModule.forRoot()` accepts. @publicApi */
export type DurableModuleRootOptions = typeof OPTIONS_TYPE;
/** What `DurableModule.forRootAsync()` accepts. @publicApi */
export type DurableModuleAsyncOptions = typeof ASYNC_OPTIONS_TYPE;

/**
 * The viewer's controller and providers, from its checked options (`viewerConfig` refuses an
 * unguarded viewer in production unless told otherwise).
 */
function viewerParts(options: DurableViewerOptions) {
  const config = viewerConfig(options);
  const providers: Provider[] = [
    { provide: VIEWER_CONFIG, useValue: config },
    ViewerCsrf,
    ViewerService,
  ];
  // ViewerSecurityGuard is not a provider here: Nest makes it for the controller's @UseGuards
  // (one instance, whose onApplicationBootstrap warns once).
  return { providers, controller: createViewerController(config) };
}
