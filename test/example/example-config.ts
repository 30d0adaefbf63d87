import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Global, Module, type DynamicModule } from '@nestjs/common';
import {
  EXAMPLE_CONFIG,
  loadConfig,
  type ExampleConfig,
} from '../../src/config';
import { prepare } from '../../src/config.module';

/** The example's configuration for one test: its own data folder, a real key. */
export function exampleConfig(env: Record<string, string> = {}): ExampleConfig {
  const dataDir = mkdtempSync(join(tmpdir(), 'aa-example-'));
  return prepare(
    loadConfig({
      DATA_DIR: dataDir,
      CHECKPOINT_KEY: 'a-test-key-that-is-32-bytes-long!',
      WORKER_ID: 'test-worker',
      PORT: '0',
      ...env,
    }),
  );
}

/** Stands in for the example's ExampleConfigModule (which reads process.env). */
@Global()
@Module({})
export class TestConfigModule {
  static with(config: ExampleConfig): DynamicModule {
    return {
      module: TestConfigModule,
      providers: [{ provide: EXAMPLE_CONFIG, useValue: config }],
      exports: [EXAMPLE_CONFIG],
    };
  }
}

/** The ledger's lines of one tool. */
export function ledgerLines(text: string, tool: string): string[] {
  return text.split('\n').filter((line) => line.includes(` ${tool}: `));
}
