import { ConfigurableModuleBuilder } from '@nestjs/common';
import { DURABLE_MODULE_EXTRAS } from './durable.constants';
import type {
  DurableModuleExtras,
  DurableModuleOptions,
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
    // The builder alone: the viewer is wired in durable.module.ts (it needs the runners, which
    // need the options token defined here).
    (definition, extras) => {
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
        ],
      };
    },
  )
  .build();

/** What `DurableModule.forRoot()` accepts. @publicApi */
export type DurableModuleRootOptions = typeof OPTIONS_TYPE;
/** What `DurableModule.forRootAsync()` accepts. @publicApi */
export type DurableModuleAsyncOptions = typeof ASYNC_OPTIONS_TYPE;
