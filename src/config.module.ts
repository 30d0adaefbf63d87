import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { Global, Logger, Module } from '@nestjs/common';
import { EXAMPLE_CONFIG, loadConfig, type ExampleConfig } from './config';

/** Reads the environment once (like `@nestjs/config` would) and prepares the data folder. */
@Global()
@Module({
  providers: [
    {
      provide: EXAMPLE_CONFIG,
      useFactory: (): ExampleConfig => prepare(loadConfig()),
    },
  ],
  exports: [EXAMPLE_CONFIG],
})
export class ExampleConfigModule {}

export function prepare(config: ExampleConfig): ExampleConfig {
  mkdirSync(join(config.dataDir, 'outbox'), { recursive: true });
  mkdirSync(join(config.dataDir, 'payments'), { recursive: true });
  if (config.usingDevelopmentKey) {
    new Logger('Config').warn(
      'CHECKPOINT_KEY is not set: using a development key. Set a secret of 32+ bytes (the same on every worker) in production.',
    );
  }
  return config;
}
