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

/** SQLiteCheckpointStore's defaults: WAL, a busy timeout, full sync: many processes on one host. */
export function sqliteConnection(path: string): SqlConnectionOptions {
  return {
    type: 'better-sqlite3',
    database: path,
    enableWAL: true,
    timeout: 10_000,
    prepareDatabase: (db: { pragma(s: string): unknown }) => {
      db.pragma('synchronous = FULL');
    },
  };
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
