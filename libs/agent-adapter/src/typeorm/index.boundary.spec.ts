import { join } from 'node:path';
import {
  describeEntryBoundary,
  loadedFrom,
} from '../../../../test/utils/fresh-node';

/**
 * 'agent-adapter/typeorm' loads typeorm (its reason to exist) but no database driver, no Redis and
 * no Nest: entities are declarations, the DataSource the user builds loads its own driver. Checked
 * in a fresh `node` (see ../index.boundary.spec.ts).
 */
const ENTRY = join(__dirname, 'index.ts');

describeEntryBoundary<{ tables: string[] }>(
  'agent-adapter/typeorm entry (import boundary)',
  ENTRY,
  {
    options: {
      extra: `tables: api
        .agentAdapterEntities({ type: 'postgres', schema: 'tenant_a' })
        .map((e) => e.options.schema + '.' + e.options.tableName),`,
    },
    exports: ['agentAdapterEntities', 'agentAdapterMigrations'],
    absent: ['pg', 'ioredis', 'better-sqlite3', '@nestjs/'],
    checks: (child) => {
      it("maps the entities to the schema's tables, and loads typeorm", () => {
        expect(child().tables).toEqual([
          'tenant_a.aa_runs',
          'tenant_a.aa_checkpoints',
          'tenant_a.aa_calls',
          'tenant_a.aa_stream',
          'tenant_a.aa_meta',
          'tenant_a.aa_queues',
        ]);
        expect(loadedFrom(child().loaded, 'typeorm').length > 0).toBe(true);
      });
    },
  },
);
