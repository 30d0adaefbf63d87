import { join } from 'node:path';
import {
  describeEntryBoundary,
  loadedFrom,
} from '../../../../test/utils/fresh-node';

/**
 * 'agent-adapter/nest' loads Nest (its peer) but no store driver: a user of the memory or SQLite
 * store never loads ioredis or pg. class-validator/-transformer are loaded only by flows with a
 * state class and tools with a DTO. Checked in a fresh `node` (see ../index.boundary.spec.ts).
 */
const ENTRY = join(__dirname, 'index.ts');

describeEntryBoundary('agent-adapter/nest entry (import boundary)', ENTRY, {
  options: { before: "require('reflect-metadata');" },
  exports: [
    'DurableModule',
    'Flow',
    'Node',
    'Tool',
    'FlowRunner',
    'FlowRegistry',
    'RecoveryOrchestrator',
    'CheckpointStore',
    'ToolRegistry',
    'DurableEvents',
  ],
  absent: [
    'pg',
    'typeorm',
    'ioredis',
    'better-sqlite3',
    'class-validator',
    'class-transformer',
  ],
  checks: (child) => {
    it('loads Nest', () => {
      expect(loadedFrom(child().loaded, '@nestjs/core').length > 0).toBe(true);
    });
  },
});
