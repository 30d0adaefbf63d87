import { Messages } from '../../../errors/messages';
import { CheckpointStoreUnavailable } from '../../../errors';
import type { Engine } from './sql.engine';
import {
  RETIRED_SCHEMA_VERSIONS,
  SCHEMA_VERSION,
  createStatements,
  type SqlDialect,
  type SqlNames,
} from './sql.schema';

/**
 * Makes sure the tables exist (creating them only when they are missing, so a routine start takes
 * no DDL lock) and are this version's.
 */
export async function prepareTables(
  engine: Engine,
  names: SqlNames,
  dialect: SqlDialect,
  create: boolean,
): Promise<void> {
  let version = await readVersion(engine, names);
  // undefined: the meta table is there but has no version row. That is what TypeORM's
  // `synchronize` leaves with agentAdapterEntities() (entities carry no rows); the DDL (every
  // statement "if missing", under the DDL lock) stamps this version into it. The entities and the
  // DDL are held to each other by a test, so those tables are this version's.
  if ((version === null || version === undefined) && create) {
    await engine.ddl(createStatements(dialect, names));
    version = await readVersion(engine, names);
  }
  if (version === null) {
    throw new CheckpointStoreUnavailable(Messages.tablesMissing(names.runs));
  }
  if (version === undefined) {
    throw new CheckpointStoreUnavailable(
      Messages.tablesUnversioned(names.runs),
    );
  }
  if (version !== String(SCHEMA_VERSION)) {
    throw new CheckpointStoreUnavailable(
      Messages.tablesVersion(
        names.runs,
        version,
        SCHEMA_VERSION,
        RETIRED_SCHEMA_VERSIONS.get(version),
      ),
    );
  }
}

/** The stored schema version; undefined when the meta table has none, null when it is missing. */
async function readVersion(
  engine: Engine,
  names: SqlNames,
): Promise<string | undefined | null> {
  try {
    const [row] = await engine.all<{ value: string }>(
      `SELECT value FROM ${names.meta} WHERE key = 'schema_version'`,
      [],
    );
    return row?.value;
  } catch {
    return null;
  }
}
