/**
 * agent-adapter for NestJS: `DurableModule`, the `@Flow` / `@Node` / `@Tool` decorators and the
 * injectable `FlowRunner`. Import from 'agent-adapter/nest'. The framework-free API (the builder
 * `Flow`, stores, errors, `idempotencyKey`) stays in 'agent-adapter'; the classes re-exported
 * below are the same objects, so they work as injection tokens from either entry.
 */
export { DurableModule } from './durable.module';
export { DURABLE_MODULE_OPTIONS } from './durable.module-definition';
export type {
  DurableModuleRootOptions,
  DurableModuleAsyncOptions,
} from './durable.module-definition';
export { Flow, Node, Tool, DurableCron } from './decorators';
export { DurableFlowRunner as FlowRunner } from './durable-flow.runner';
export { FlowRegistry } from './flow.registry';
export type { FlowRef, DiscoveredFlow } from './flow.registry';
export { RecoveryOrchestrator } from './recovery.orchestrator';
export { ToolLoopRunner, DurableToolLoop } from './tool-loop.runner';
export type { ToolLoopDefinition } from './tool-loop.runner';
export type { RecoverySummary, RecoveryOutcomeKind } from './recovery.log';
export { createCheckpointStore, CHECKPOINT_STORE_TYPES } from './create-store';
export type { CreatedStore } from './create-store';
// Framework-free: the core errors, which the root entry exports too.
export { DurableSetupError, InvalidToolArguments } from '../errors';
export { DurableHttpExceptionFilter } from './durable-http.filter';
export { streamEvents, streamOffset } from './stream-events';
export { DurableHealthIndicator } from './durable.health';
export type { DurableHealthResult } from './durable.health';
export type * from './interfaces';

// Injection tokens the module provides (the core classes themselves).
export { CheckpointStore } from '../exec/checkpoints/checkpoint-store';
export { ToolRegistry } from '../exec/tool.registry';
export { Executor } from '../exec/executor';
export { DurableEvents } from '../events/durable.events';
