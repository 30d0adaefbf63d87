import type { ToolOptions } from '../../exec/tool.registry';

/** A class-validator DTO class describing a tool's arguments object. @publicApi */
export type ToolArgsClass = new () => object;

/**
 * Options of `@Tool()`: the registry's `ToolOptions` (idempotent, readOnly, approval, retry,
 * timeoutMs, description, parameters: documented there, checked by `ToolRegistry.register`), plus
 * the tool's name and its arguments DTO.
 * @publicApi
 */
export interface ToolDecoratorOptions extends ToolOptions {
  /** The tool's name in the call log (keep it stable across deployments). @default the method's name */
  name?: string;
  /**
   * A class-validator DTO: the arguments object is validated (every violation named) before each
   * call, inside and outside a run, and the method receives an instance of it. Validation is
   * synchronous (`validateSync`): async validators are not run. Its JSON schema becomes the
   * tool's `parameters` unless they are given (with the optional `class-validator-jsonschema`).
   */
  args?: ToolArgsClass;
}
