import type {
  ApprovalPolicy,
  JsonSchema,
  RetryPolicy,
} from '../../exec/tool.registry';

/** A class-validator DTO class describing a tool's arguments object. @publicApi */
export type ToolArgsClass = new () => object;

/** Options of `@Tool()`. @publicApi */
export interface ToolDecoratorOptions {
  /** The tool's name in the call log (keep it stable across deployments). @default the method's name */
  name?: string;
  /**
   * Safe to run twice with the same arguments (or made so with `idempotencyKey()`): a call in
   * doubt after a crash runs again instead of stopping recovery.
   * @default false
   */
  idempotent?: boolean;
  /** Reads only; implies `idempotent`. @default false */
  readOnly?: boolean;
  /**
   * Each call waits for a person's decision: the run pauses (checkpoint `paused`, the call logged
   * `pending`) until `FlowRunner.resume(flow, runId, { approved })`. A function decides per call,
   * from a copy of the logged arguments (keep it deterministic).
   * @default false
   */
  approval?: boolean | ApprovalPolicy;
  /** Retries for a tool that throws; each attempt is logged, the final outcome replays. */
  retry?: RetryPolicy;
  /**
   * A slower call fails with `ToolTimeout`; for a tool that is not idempotent the call is then in
   * doubt (it may still be running).
   */
  timeoutMs?: number;
  /** Shown to models and operators. */
  description?: string;
  /**
   * A class-validator DTO: the arguments object is validated (every violation named) before each
   * call, inside and outside a run, and the method receives an instance of it. Validation is
   * synchronous (`validateSync`): async validators are not run. Its JSON schema becomes the
   * tool's `parameters` unless they are given.
   */
  args?: ToolArgsClass;
  /**
   * JSON schema of the arguments object, shown to models. @default generated from `args` (with
   * the optional `class-validator-jsonschema` package)
   */
  parameters?: JsonSchema;
}
