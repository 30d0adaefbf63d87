import { DurableSetupError } from '../../../errors';
import { Messages } from '../../../errors/messages';
import type { SqlTableOptions } from './sql.schema';
import { sqliteConnection } from './sql.driver';
import { SQLCheckpointStore } from './sql.store';

/**
 * The SQL store on one SQLite file: WAL journal, a 10 s busy timeout, full sync, immediate
 * transactions. Every process on one host can share the file. Not a second copy of the SQL logic:
 * it is `SQLCheckpointStore` with these connection options.
 * @publicApi
 */
export class SQLiteCheckpointStore extends SQLCheckpointStore {
  constructor(path: string, options: SqlTableOptions = {}) {
    if (typeof path !== 'string' || path === '') {
      throw new DurableSetupError(Messages.sqlitePath());
    }
    super(sqliteConnection(path), options);
  }
}
