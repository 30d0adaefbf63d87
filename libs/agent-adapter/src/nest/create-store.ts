// Framework-free on purpose (no @nestjs import): the factory itself lives beside the stores
// (exec/checkpoints/create-store.ts, shared with the operator CLI); this file words its errors
// for the module's "store" option.
import { CheckpointStore } from '../exec/checkpoints/checkpoint-store';
import {
  openCheckpointStore,
  STORE_TYPES,
  StoreDescriptorError,
} from '../exec/checkpoints/create-store';
import { DurableSetupError } from '../errors';
import { NestMessages } from './durable.messages';
import type {
  CheckpointStoreDescriptor,
  CheckpointStoreType,
} from './interfaces/durable-module-options.interface';

/** Every `type` a store descriptor may have. @publicApi */
export const CHECKPOINT_STORE_TYPES: readonly CheckpointStoreType[] =
  STORE_TYPES;

/** A store and whether its creator must close it. */
export interface CreatedStore {
  store: CheckpointStore;
  /** True when the store was created from a descriptor (its connections are ours to close). */
  owned: boolean;
}

/**
 * Turns the `store` option into a store. A `CheckpointStore` instance is used as it is (the caller
 * keeps owning it); a descriptor creates one, loading only that store's driver (its packages are
 * checked before, with every other package the application needs: DurablePackages).
 */
export function createCheckpointStore(
  option: CheckpointStore | CheckpointStoreDescriptor | undefined,
): CreatedStore {
  if (isCheckpointStore(option)) return { store: option, owned: false };
  if (typeof option !== 'object' || option === null) {
    throw new DurableSetupError(NestMessages.noStore(CHECKPOINT_STORE_TYPES));
  }
  try {
    return openCheckpointStore(option);
  } catch (error) {
    if (!(error instanceof StoreDescriptorError)) throw error;
    throw new DurableSetupError(
      error.problem === undefined
        ? NestMessages.unknownStoreType(error.type, CHECKPOINT_STORE_TYPES)
        : NestMessages.storeOption(String(error.type), error.problem),
    );
  }
}

/** A store instance, also from another copy of the package (duplicated in node_modules). */
export function isCheckpointStore(value: unknown): value is CheckpointStore {
  if (value instanceof CheckpointStore) return true;
  if (typeof value !== 'object' || value === null) return false;
  const store = value as Record<string, unknown>;
  return ['save', 'latest', 'listUnfinished', 'recordCall', 'calls'].every(
    (method) => typeof store[method] === 'function',
  );
}
