import { spawnSync } from 'node:child_process';
import { join, sep } from 'node:path';

/**
 * 'agent-adapter/typeorm' loads typeorm (its reason to exist) but no database driver, no Redis and
 * no Nest: entities are declarations, the DataSource the user builds loads its own driver. Checked
 * in a fresh `node` (see ../index.boundary.spec.ts).
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
const api = require(${JSON.stringify(ENTRY)});
const entities = api.agentAdapterEntities({ type: 'postgres', schema: 'tenant_a' });
process.stdout.write(JSON.stringify({
  exports: Object.keys(api),
  tables: entities.map((e) => e.options.schema + '.' + e.options.tableName),
  loaded: Object.keys(require.cache),
}));
`;

function marker(name: string): string {
  return `${sep}node_modules${sep}${name.replace(/\/$/, '').split('/').join(sep)}${sep}`;
}

describe('agent-adapter/typeorm entry (import boundary)', () => {
  let child: { exports: string[]; tables: string[]; loaded: string[] };

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

  it('exports the entities and the migrations, and loads typeorm (the check is not vacuous)', () => {
    expect(child.exports).toEqual(
      expect.arrayContaining([
        'agentAdapterEntities',
        'agentAdapterMigrations',
      ]),
    );
    expect(child.tables).toEqual([
      'tenant_a.aa_runs',
      'tenant_a.aa_checkpoints',
      'tenant_a.aa_calls',
      'tenant_a.aa_meta',
    ]);
    expect(child.loaded.some((f) => f.includes(marker('typeorm')))).toBe(true);
  });

  it.each(['pg', 'ioredis', 'better-sqlite3', '@nestjs/'])(
    'loads nothing from %s',
    (name) => {
      expect(child.loaded.filter((f) => f.includes(marker(name)))).toEqual([]);
    },
  );
});
