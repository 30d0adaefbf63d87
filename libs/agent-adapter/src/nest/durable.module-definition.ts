import { ConfigurableModuleBuilder } from '@nestjs/common';
import { DURABLE_MODULE_EXTRAS } from './durable.constants';
import { NestMessages } from './durable.messages';
import { DurableSetupError } from './errors/durable-setup.error';
import { createViewerController } from './viewer/viewer.controller';
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
    (definition, extras) => ({
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
        ...(extras.viewer ? [ViewerService] : []),
      ],
      controllers: [
        ...(definition.controllers ?? []),
        ...(extras.viewer ? [viewerController(extras.viewer)] : []),
      ],
    }),
  )
  .build();

/** What `DurableModule.forRoot()` accepts. @publicApi */
export type DurableModuleRootOptions = typeof OPTIONS_TYPE;
/** What `DurableModule.forRootAsync()` accepts. @publicApi */
export type DurableModuleAsyncOptions = typeof ASYNC_OPTIONS_TYPE;

/** The viewer's controller; refuses an unguarded viewer in production unless told otherwise. */
function viewerController(options: DurableViewerOptions) {
  if (typeof options !== 'object' || options === null)
    throw new DurableSetupError(NestMessages.viewerOptions());
  const path = options.path ?? '/runs';
  if (typeof path !== 'string' || !/^\/?[A-Za-z0-9._~\-/]*$/.test(path))
    throw new DurableSetupError(NestMessages.viewerPath(path));
  if (
    !options.guard &&
    !options.privateNetwork &&
    process.env.NODE_ENV === 'production'
  ) {
    throw new DurableSetupError(NestMessages.viewerUnguarded());
  }
  return createViewerController(path, options.guard);
}
