import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join, sep } from 'node:path';

/**
 * The core entry must load no store driver and none of the optional peers (the Nest layer,
 * class-validator/-transformer, ...): a plain-Node user of the memory store has none of them
 * installed. Jest keeps its own module registry, so this is checked where it is real: in a fresh
 * `node` that compiles the sources on the fly (test/utils/ts-register.js: TypeScript's
 * transpileModule, no type check) and then lists `require.cache`.
 */
const ENTRY = join(__dirname, 'index.ts');
const LIB_PACKAGE = join(__dirname, '..', 'package.json');

/** Never loaded by `import 'agent-adapter'`, whatever else the library adds. */
const DRIVERS = ['pg', 'typeorm', 'ioredis', 'better-sqlite3'];
const ALWAYS_BANNED = [
  '@nestjs/',
  'class-validator',
  'class-transformer',
  ...DRIVERS,
];

function optionalPeers(): string[] {
  const pkg = JSON.parse(readFileSync(LIB_PACKAGE, 'utf8')) as {
    peerDependenciesMeta?: Record<string, { optional?: boolean }>;
  };
  return Object.entries(pkg.peerDependenciesMeta ?? {})
    .filter(([, meta]) => meta.optional)
    .map(([name]) => name);
}

/** `/node_modules/<name>/`, or `/node_modules/@scope/` for a scope prefix. */
function marker(name: string): string {
  return `${sep}node_modules${sep}${name.replace(/\/$/, '').split('/').join(sep)}${sep}`;
}

// The test suites' shared `.ts` require hook (transpileModule, no type check).
const HOOK = join(
  __dirname,
  '..',
  '..',
  '..',
  'test',
  'utils',
  'ts-register.js',
);

// Runs in the child, after the hook: the entry, then what got loaded.
const CHILD = `
const api = require(${JSON.stringify(ENTRY)});
process.stdout.write(JSON.stringify({
  exports: Object.keys(api),
  loaded: Object.keys(require.cache),
}));
`;

describe('agent-adapter core entry (import boundary)', () => {
  let child: { exports: string[]; loaded: string[] };

  beforeAll(() => {
    const out = spawnSync(process.execPath, ['-r', HOOK, '-e', CHILD], {
      cwd: join(__dirname, '..', '..', '..'),
      encoding: 'utf8',
      env: { ...process.env, NODE_OPTIONS: '' },
      timeout: 30_000,
    });
    if (out.status !== 0) {
      throw new Error(
        `node could not load ${ENTRY} (exit ${String(out.status)}${out.signal ? `, ${out.signal}` : ''}):\n${out.stderr}`,
      );
    }
    child = JSON.parse(out.stdout) as typeof child;
  });

  it('loads the library itself (the check is not vacuous)', () => {
    expect(child.loaded).toContain(ENTRY);
    expect(child.exports).toEqual(
      expect.arrayContaining(['Flow', 'FlowRunner', 'MemoryCheckpointStore']),
    );
  });

  it.each([...new Set([...ALWAYS_BANNED, ...optionalPeers()])])(
    'loads nothing from %s',
    (name) => {
      const offending = child.loaded.filter((file) =>
        file.includes(marker(name)),
      );
      expect(offending).toEqual([]);
    },
  );
});
