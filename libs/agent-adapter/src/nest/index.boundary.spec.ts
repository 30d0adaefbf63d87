import { join } from 'node:path';
import {
  loadEntry,
  loadedFrom,
  type LoadedEntry,
} from '../../../../test/utils/fresh-node';

/**
 * 'agent-adapter/nest' loads Nest (its peer) but no store driver: a user of the memory or SQLite
 * store never loads ioredis or pg. class-validator/-transformer are loaded only by flows with a
 * state class and tools with a DTO. Checked in a fresh `node` (see ../index.boundary.spec.ts).
 */
const ENTRY = join(__dirname, 'index.ts');

describe('agent-adapter/nest entry (import boundary)', () => {
  let child: LoadedEntry;

  beforeAll(() => {
    child = loadEntry(ENTRY, { before: "require('reflect-metadata');" });
  });

  it('exports the Nest API (the check is not vacuous)', () => {
    expect(child.exports).toEqual(
      expect.arrayContaining([
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
      ]),
    );
    expect(loadedFrom(child.loaded, '@nestjs/core').length > 0).toBe(true);
  });

  it.each([
    'pg',
    'typeorm',
    'ioredis',
    'better-sqlite3',
    'class-validator',
    'class-transformer',
  ])('loads nothing from %s', (name) => {
    expect(loadedFrom(child.loaded, name)).toEqual([]);
  });
});
