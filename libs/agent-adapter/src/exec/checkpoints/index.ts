export * from './checkpoint-store';
export { MemoryCheckpointStore } from './memory.store';
export { RedisCheckpointStore } from './redis.store';
export type {
  RedisCheckpointStoreOptions,
  RedisClientLike,
} from './redis.store';
export { SQLCheckpointStore } from './sql.store';
export type {
  SQLCheckpointStoreOptions,
  DataSourceLike,
  SqlConnectionOptions,
} from './sql.store';
export { SQLiteCheckpointStore } from './sqlite.store';
export type { SqlTableOptions } from './sql.schema';
export { agentAdapterMigrations } from './migrations/1795900000000-agent-adapter-init';
