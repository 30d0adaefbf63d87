/**
 * 'agent-adapter/testing': what proves a CheckpointStore, and the store wrappers tests build
 * crashes and faults from. Framework-free like the core entry: it loads no store driver, no Nest
 * and no test framework (the conformance suite takes `describe`/`it` from the caller or globals).
 */
export {
  describeCheckpointStoreConformance,
  type CheckpointStoreFixture,
  type RawStoreAccess,
  type TestFramework,
} from './conformance';
export { ForwardingStore } from './forwarding-store';
export {
  InterceptingStore,
  type StoreWrite,
  type WriteHooks,
} from './intercepting-store';
export {
  CrashingStore,
  SimulatedCrash,
  settle,
  type CrashPredicate,
  type CrashWrite,
} from './crashing-store';
export { decodeCall, unverifiedBody, type DecodedCall } from './sealed-body';
