import {
  requireFeatures,
  requirePackage,
  type OptionalFeature,
} from '../../../peers/optional-packages';

/**
 * The part of a TypeORM `DataSource` the store uses, typed structurally so these typings do not
 * require typeorm. Pass your application's DataSource (Postgres or better-sqlite3).
 * @publicApi
 */
export interface DataSourceLike {
  readonly options: { readonly type: string };
  readonly isInitialized: boolean;
  readonly driver: unknown;
  initialize(): Promise<unknown>;
  destroy(): Promise<void>;
  query(sql: string, parameters?: unknown[]): Promise<unknown>;
}

/** TypeORM connection options for a DataSource the store creates and owns. @publicApi */
export type SqlConnectionOptions =
  | ({ type: 'postgres' } & Record<string, unknown>)
  | ({ type: 'better-sqlite3'; database: string } & Record<string, unknown>);

/**
 * SQLiteCheckpointStore's defaults: WAL, a busy timeout, full sync: many processes on one host.
 * A new file gets pages of `SQLITE_PAGE_SIZE` bytes (an existing one keeps its own).
 */
export function sqliteConnection(path: string): SqlConnectionOptions {
  const timeout = 10_000;
  return {
    type: 'better-sqlite3',
    database: path,
    timeout,
    // WAL is set here, not with TypeORM's `enableWAL`: see useWal.
    prepareDatabase: async (db: SqlitePragmas) => {
      // Only takes effect before the first table (and before WAL) exists: a no-op on any other file.
      db.pragma(`page_size = ${SQLITE_PAGE_SIZE}`);
      db.pragma('synchronous = FULL');
      await useWal(db, timeout);
    },
  };
}

/**
 * The page size of a file the SQLite store creates. A commit appends every page it changed to the
 * WAL and syncs them: a save changes a handful of pages across the run's row, its checkpoint, its
 * calls and their indexes, each holding a few hundred bytes of it, so the sync cost follows the page
 * size. 2 KB pages measured faster than 4 KB (SQLite's default) for small and 30 KB states alike;
 * 1 KB pages were faster for small ones and slower for large (overflow chains of tiny pages).
 */
export const SQLITE_PAGE_SIZE = 2048;

interface SqlitePragmas {
  pragma(source: string, options?: { simple: boolean }): unknown;
}

/**
 * Puts the file in WAL mode. Converting takes an exclusive lock and SQLite does not run the busy
 * handler for it, so processes opening a new file at once would fail with "database is locked":
 * the mode is read first (WAL is a property of the file, so after the first open nothing is
 * taken), and a refused conversion is tried again within the busy timeout.
 */
async function useWal(db: SqlitePragmas, timeoutMs: number): Promise<void> {
  const until = Date.now() + timeoutMs;
  for (let pause = 5; ; pause = Math.min(pause * 2, 200)) {
    try {
      if (db.pragma('journal_mode', { simple: true }) !== 'wal')
        db.pragma('journal_mode = WAL'); // a file SQLite keeps elsewhere (':memory:') stays as it is
      return;
    } catch (error) {
      if ((error as { code?: unknown }).code !== 'SQLITE_BUSY') throw error;
    }
    if (Date.now() >= until) {
      db.pragma('journal_mode = WAL'); // the last try: its error, if any, is the caller's
      return;
    }
    await new Promise((resolve) => setTimeout(resolve, pause));
  }
}

export function isDataSource(
  source: DataSourceLike | SqlConnectionOptions,
): source is DataSourceLike {
  return typeof (source as DataSourceLike).initialize === 'function';
}

/** The optional feature (typeorm and its driver) a DataSource made from `options` needs. */
export function sqlFeature(options: SqlConnectionOptions): OptionalFeature {
  return options.type === 'postgres' ? 'postgres' : 'sqlite';
}

/** A DataSource of the store's own; typeorm is loaded here, on first use, never at import. */
export function createDataSource(
  options: SqlConnectionOptions,
): DataSourceLike {
  const context = 'SQLCheckpointStore';
  requireFeatures([sqlFeature(options)], context); // the driver, which typeorm loads itself
  const typeorm = requirePackage<{
    DataSource: new (o: unknown) => DataSourceLike;
  }>('typeorm', sqlFeature(options), context);
  return new typeorm.DataSource(options);
}
