import { spawnSync } from 'node:child_process';
import { join, sep } from 'node:path';

/**
 * 'agent-adapter/nest' loads Nest (its peer) but no store driver: a user of the memory or SQLite
 * store never loads ioredis or pg. class-validator/-transformer are loaded only by flows with a
 * state class and tools with a DTO. Checked in a fresh `node` (see ../index.boundary.spec.ts).
 */
const ENTRY = join(__dirname, 'index.ts');
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
const CHILD = `
require('reflect-metadata');
const api = require(${JSON.stringify(ENTRY)});
process.stdout.write(JSON.stringify({
  exports: Object.keys(api),
  loaded: Object.keys(require.cache),
}));
`;

function marker(name: string): string {
  return `${sep}node_modules${sep}${name.split('/').join(sep)}${sep}`;
}

describe('agent-adapter/nest entry (import boundary)', () => {
  let child: { exports: string[]; loaded: string[] };

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
    expect(child.loaded.some((f) => f.includes(marker('@nestjs/core')))).toBe(
      true,
    );
  });

  it.each([
    'pg',
    'typeorm',
    'ioredis',
    'better-sqlite3',
    'class-validator',
    'class-transformer',
  ])('loads nothing from %s', (name) => {
    expect(child.loaded.filter((f) => f.includes(marker(name)))).toEqual([]);
  });
});
