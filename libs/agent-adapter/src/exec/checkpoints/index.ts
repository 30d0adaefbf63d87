export * from './checkpoint-store';
export { MemoryCheckpointStore } from './memory.store';
export { RedisCheckpointStore } from './redis.store';
export type {
  RedisCheckpointStoreOptions,
  RedisClientLike,
} from './redis.store';
