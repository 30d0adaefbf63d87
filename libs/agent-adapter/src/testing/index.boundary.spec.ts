import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join, sep } from 'node:path';

/**
 * 'agent-adapter/testing' is imported by a store author's test file, under jest, vitest or plain
 * node: it loads no store driver, no optional peer, and no test framework or property-testing
 * package (the library depends on none). Checked in a fresh `node` (see ../index.boundary.spec.ts).
 */
const ENTRY = join(__dirname, 'index.ts');
const LIB_PACKAGE = join(__dirname, '..', '..', 'package.json');
const HOOK = join(
  __dirname,
  '..',
  '..',
  '..',
  '..',
  'test',
  'utils',
  'ts-register.js',
);
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
const CHILD = `
const api = require(${JSON.stringify(ENTRY)});
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
process.stdout.write(JSON.stringify({
  exports: Object.keys(api),
  declared,
  loaded: Object.keys(require.cache),
}));
`;

function optionalPeers(): string[] {
  const pkg = JSON.parse(readFileSync(LIB_PACKAGE, 'utf8')) as {
    peerDependenciesMeta?: Record<string, { optional?: boolean }>;
  };
  return Object.entries(pkg.peerDependenciesMeta ?? {})
    .filter(([, meta]) => meta.optional)
    .map(([name]) => name);
}

function marker(name: string): string {
  return `${sep}node_modules${sep}${name.replace(/\/$/, '').split('/').join(sep)}${sep}`;
}

describe('agent-adapter/testing entry (import boundary)', () => {
  let child: { exports: string[]; declared: string[]; loaded: string[] };

  beforeAll(() => {
    const out = spawnSync(process.execPath, ['-r', HOOK, '-e', CHILD], {
      cwd: join(__dirname, '..', '..', '..', '..'),
      encoding: 'utf8',
      env: { ...process.env, NODE_OPTIONS: '' },
      timeout: 30_000,
    });
    if (out.status !== 0) {
      throw new Error(`node could not load ${ENTRY}:\n${out.stderr}`);
    }
    child = JSON.parse(out.stdout) as typeof child;
  });

  it('exports the conformance suite and the store wrappers, and declares the suite with the given framework', () => {
    expect(child.exports).toEqual(
      expect.arrayContaining([
        'describeCheckpointStoreConformance',
        'ForwardingStore',
        'InterceptingStore',
        'CrashingStore',
      ]),
    );
    expect(child.declared).toEqual(
      expect.arrayContaining([
        'describe CheckpointStore conformance: memory',
        'describe compare-and-set save',
        'it concurrent savers of one step: exactly one wins',
      ]),
    );
    // No raw access given: the tampering tests are left out.
    expect(child.declared.join('\n')).not.toMatch(/tampered/);
  });

  it.each([...new Set([...NEVER, ...optionalPeers()])])(
    'loads nothing from %s',
    (name) => {
      const offending = child.loaded.filter((file) =>
        file.includes(marker(name)),
      );
      expect(offending).toEqual([]);
    },
  );
});
