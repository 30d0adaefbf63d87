import { join } from 'node:path';
import {
  describeEntryBoundary,
  optionalPeers,
} from '../../../../test/utils/fresh-node';

/**
 * 'agent-adapter/testing' is imported by a store author's test file, under jest, vitest or plain
 * node: it loads no store driver, no optional peer, and no test framework or property-testing
 * package (the library depends on none). Checked in a fresh `node` (see ../index.boundary.spec.ts).
 */
const ENTRY = join(__dirname, 'index.ts');
const NEVER = [
  '@nestjs/',
  'class-validator',
  'class-transformer',
  'pg',
  'typeorm',
  'ioredis',
  'better-sqlite3',
  'jest',
  '@jest/',
  'expect',
  'vitest',
  'fast-check',
];

// Declares the suite with recording stand-ins for describe/it/afterAll: proves it needs no globals.
const DECLARE = `
const declared = [];
const framework = {
  describe: (name, body) => { declared.push('describe ' + name); body(); },
  it: (name) => declared.push('it ' + name),
  afterAll: () => undefined,
};
api.describeCheckpointStoreConformance(
  { name: 'memory', make: async () => { throw new Error('not run here'); } },
  framework,
);
`;

describeEntryBoundary<{ declared: string[] }>(
  'agent-adapter/testing entry (import boundary)',
  ENTRY,
  {
    options: { after: DECLARE, extra: 'declared,' },
    exports: [
      'describeCheckpointStoreConformance',
      'ForwardingStore',
      'InterceptingStore',
      'CrashingStore',
    ],
    absent: [...new Set([...NEVER, ...optionalPeers()])],
    checks: (child) => {
      it('declares the conformance suite with the given framework', () => {
        expect(child().declared).toEqual(
          expect.arrayContaining([
            'describe CheckpointStore conformance: memory',
            'describe compare-and-set save',
            'it concurrent savers of one step: exactly one wins',
          ]),
        );
        // No raw access given: the tampering tests are left out.
        expect(child().declared.join('\n')).not.toMatch(/tampered/);
      });
    },
  },
);
