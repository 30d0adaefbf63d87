/** Metadata key of `@Flow()` (class). @internal */
export const DURABLE_FLOW_METADATA = 'agent-adapter:flow';
/** Metadata key of `@Node()` (method). @internal */
export const DURABLE_NODE_METADATA = 'agent-adapter:node';
/** Metadata key of `@DurableCron()` (class; a list, one per decorator). @internal */
export const DURABLE_CRON_METADATA = 'agent-adapter:cron';
/** Metadata key of `@Tool()` (method). @internal */
export const DURABLE_TOOL_METADATA = 'agent-adapter:tool';

/** The module-shaping extras (`isGlobal`, `recoverOnBoot`) as the providers see them. @internal */
export const DURABLE_MODULE_EXTRAS = Symbol('agent-adapter:module-extras');
/** The options with defaults merged, the store created and the key checked. @internal */
export const DURABLE_RESOLVED_OPTIONS = Symbol(
  'agent-adapter:resolved-options',
);

/** @internal */
export const DEFAULT_RECOVERY_CONCURRENCY = 4;
/** Added to the latest lease expiry before the one re-sweep after a `RunLeaseHeld`. @internal */
export const RESWEEP_MARGIN_MS = 250;
/** Run ids a `RecoverySummary` keeps per outcome (every run is counted and logged). @internal */
export const SUMMARY_RUN_IDS = 1000;
