export * from './checkpoint-store';
export { MemoryCheckpointStore } from './memory.store';
