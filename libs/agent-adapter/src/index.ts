/**
 * agent-adapter: durable flows and tool loops. This entry is framework-free and loads no store
 * driver; the NestJS module is in 'agent-adapter/nest'.
 */
export { Flow } from './flow/flow.builder';
export { Call, END } from './flow/call-node';
export type { CallNode } from './flow/call-node';
export { FlowRunner } from './flow/runner/flow-runner';
export type { FlowRunnerOptions } from './flow/runner/flow-runner.options';
export type { DurableLogger } from './observability/logger';
export type {
  FlowOptions,
  FlowNodeOptions,
  NodeContext,
  NodeFn,
  Reducer,
  RouteFn,
  StateClass,
  RunOptions,
  RecoverOptions,
  RecoverAllOptions,
  RecoveryOutcome,
  ResumeDecision,
  ResumeOptions,
  RunResult,
  NeedsDecision,
  InDoubtCall,
  RecordedDecision,
} from './flow/flow.interfaces';
export type { CallFinding, ResolveRequest } from './flow/runner/resolve';
export { Takeover } from './flow/runner/takeover';
export type { TakeoverOptions } from './flow/runner/takeover';
export type {
  QueueOptions,
  EnqueueOptions,
  EnqueueResult,
  QueueLimits,
} from './flow/runner/queues';

export { Scheduler } from './flow/schedules/scheduler';
export type { ScheduleOptions } from './flow/schedules/schedule.options';
export type {
  ScheduleCatchUp,
  ScheduleDefinition,
  ScheduleInfo,
  ScheduleOverlap,
} from './flow/schedules/schedule-record';

export { Executor } from './exec/executor';
export { ToolRegistry } from './exec/tool.registry';
export type {
  ToolOptions,
  ToolHandler,
  ToolDefinition,
  JsonSchema,
} from './exec/tool.registry';
export { idempotencyKey, inRun, currentCall } from './exec/idempotency-key';
export { publish } from './exec/publish';
export type { StreamEntry } from './exec/durable/stream-entries';
export type { StreamReadOptions } from './flow/runner/run-stream';
export { registerMcpTools, mcpToolPolicy } from './exec/mcp/register-mcp-tools';
export { serveFlowsOverMcp } from './flow/mcp/serve-flows';
export type {
  FlowToolsOptions,
  McpServerLike,
  McpRequestExtra,
} from './flow/mcp/serve-flows';
export type {
  McpToolsOptions,
  McpRegisteredTool,
} from './exec/mcp/register-mcp-tools';
export type {
  McpClientLike,
  McpToolInfo,
  McpToolAnnotations,
  McpCallResult,
} from './exec/mcp/mcp-client';
export type { CurrentCall } from './exec/call-context';
export { KeyRing } from './exec/durable/key-ring';
export type {
  CheckpointKey,
  KeyRingOptions,
  KeyMaterial,
} from './exec/durable/key-ring';
export type { Json } from './exec/durable/canonical-json';
export type {
  RunIdentity,
  PendingApproval,
  ApprovalDecision,
  ApprovalTimeoutAction,
  SealedError,
  CallIdentity,
  RerunDecision,
  Resolution,
  CancelDecision,
} from './exec/durable/records';

export {
  CheckpointStore,
  MemoryCheckpointStore,
  SQLCheckpointStore,
  SQLiteCheckpointStore,
  agentAdapterMigrations,
  UNFINISHED,
} from './exec/checkpoints';
export type {
  SQLCheckpointStoreOptions,
  DataSourceLike,
  SqlConnectionOptions,
  SqlTableOptions,
  RunStatus,
  CheckpointRecord,
  CallRecord,
  StreamRecord,
  StreamQuery,
  RunHead,
  SaveOptions,
  ListUnfinishedOptions,
  ListQuery,
  RunPage,
  DueQuery,
  AdmitQuery,
  Enqueued,
  QueuePlacement,
  RunQueueState,
  HeadlessPage,
  HeadlessQuery,
  HistoryPage,
} from './exec/checkpoints';
export { RedisCheckpointStore } from './exec/checkpoints';
export type {
  RedisCheckpointStoreOptions,
  RedisClientLike,
} from './exec/checkpoints';

export { DurableEvents } from './events/durable.events';
export type {
  DurableEventMap,
  DurableEventName,
  DurableListener,
  CheckpointSavedEvent,
  RunRecoveredEvent,
  RunDecidedEvent,
} from './events/durable.events';

export {
  DurableError,
  CheckpointNotFound,
  CheckpointConflict,
  CheckpointStoreCorrupt,
  RecoveryNeedsDecision,
  FailoverNeedsDecision,
  FlowError,
  RunAccessDenied,
  RunLeaseHeld,
  RunQueued,
  WorkerDraining,
  InvalidFlowState,
  ToolFailed,
  ToolDenied,
  RunPaused,
  RunSleeping,
  ApprovalTimedOut,
  UnsealableValue,
  CheckpointKeyError,
  DurableSetupError,
  DriverNotInstalledError,
  CheckpointStoreUnavailable,
  RecoveryAttemptsExceeded,
  RunCancelled,
  InvalidToolArguments,
  McpToolError,
  NotInRun,
  StreamEntriesDropped,
} from './errors';
export type { StateViolation } from './errors';

export { ToolLoop, DEFAULT_MAX_STEPS } from './loop/tool-loop';
export type {
  ToolLoopOptions,
  ToolLoopRunOptions,
  ToolLoopResult,
  ToolLoopPending,
  ToolLoopState,
} from './loop/tool-loop';
export type {
  ChatModel,
  ChatRequest,
  ChatTool,
  ChatMessage,
  SystemMessage,
  UserMessage,
  AssistantMessage,
  ToolMessage,
  ToolCall,
  JsonObject,
  FinishReason,
  TokenUsage,
} from './loop/chat-model';
export { runToolLoop, recoverToolLoop } from './loop/run-tool-loop';
export { OpenAIChatModel } from './loop/adapters/openai.chat-model';
export type { OpenAIChatModelOptions } from './loop/adapters/openai.chat-model';
// Any AI SDK provider package's model; `ai` and `@ai-sdk/*` are not loaded (see its docs).
export { AiSdkChatModel } from './loop/adapters/ai-sdk.chat-model';
export type {
  AiSdkChatModelOptions,
  AiSdkCallOptions,
  AiSdkCallSettings,
  AiSdkFunctionTool,
  AiSdkGenerateResult,
  AiSdkLanguageModel,
  AiSdkPromptMessage,
  AiSdkTextPart,
  AiSdkToolCallPart,
  AiSdkToolChoice,
  AiSdkToolResultPart,
} from './loop/adapters/ai-sdk.types';
export { ChatModelError, MaxStepsExceeded } from './errors';

// Tool policies, approval policies, the synchronous approval port, resume authorization.
export { ToolTimeout } from './errors';
export type {
  ApprovalPolicy,
  ApprovalPolicyContext,
  ApprovalRule,
  RetryPolicy,
} from './exec/tool.registry';
export type {
  ApprovalPort,
  ApprovalRequest,
  ApprovalVerdict,
} from './exec/approvals';
export type {
  ResumePolicy,
  ResumeRequest,
} from './flow/runner/flow-runner.options';
