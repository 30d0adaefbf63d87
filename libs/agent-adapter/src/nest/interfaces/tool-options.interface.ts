import type { JsonSchema } from '../../exec/tool.registry';

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
   * `pending`) until `FlowRunner.resume(flow, runId, { approved })`.
   * @default false
   */
  approval?: boolean;
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
