export * from './checkpoint-store';
export { MemoryCheckpointStore } from './memory.store';
export { RedisCheckpointStore } from './redis/redis.store';
export type {
  RedisCheckpointStoreOptions,
  RedisClientLike,
} from './redis/redis.store';
export { SQLCheckpointStore } from './sql/sql.store';
export type {
  SQLCheckpointStoreOptions,
  DataSourceLike,
  SqlConnectionOptions,
} from './sql/sql.store';
export { SQLiteCheckpointStore } from './sql/sqlite.store';
export type { SqlTableOptions } from './sql/sql.schema';
export { agentAdapterMigrations } from './sql/migrations/1795900000000-agent-adapter-init';
