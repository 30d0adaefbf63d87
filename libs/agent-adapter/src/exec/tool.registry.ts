import type { Json } from './durable/canonical-json';

/** A JSON schema object describing a tool's arguments (for models and operators). */
export type JsonSchema = { [key: string]: Json };

/** @publicApi */
export interface ToolOptions {
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
   * `pending`) until `resume(flow, runId, { approved })`.
   * @default false
   */
  approval?: boolean;
  /** Shown to models and operators. */
  description?: string;
  /** JSON schema of the arguments object. */
  parameters?: JsonSchema;
}

export type ToolHandler<A = never, R = unknown> = (args: A) => R | Promise<R>;

export interface ToolDefinition {
  name: string;
  handler: (args: unknown) => unknown;
  idempotent: boolean;
  readOnly: boolean;
  approval: boolean;
  description?: string;
  parameters?: JsonSchema;
}

/**
 * The tools a run may call, by name. Inside a run a tool only ever runs through the `Executor`,
 * which logs, replays and fences it.
 * @publicApi
 */
export class ToolRegistry {
  private readonly tools = new Map<string, ToolDefinition>();

  // `any` stays inside: each handler declares its own argument type, checked where it is written.
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  register<A = any, R = unknown>(
    name: string,
    handler: ToolHandler<A, R>,
    options: ToolOptions = {},
  ): this {
    if (typeof name !== 'string' || !/^[A-Za-z0-9_.:-]{1,128}$/.test(name)) {
      throw new TypeError(
        `Tool name ${JSON.stringify(name)} is invalid: use 1-128 letters, digits, "_", ".", ":" or "-".`,
      );
    }
    if (typeof handler !== 'function') {
      throw new TypeError(`Tool "${name}": the handler must be a function.`);
    }
    if (this.tools.has(name)) {
      throw new TypeError(
        `Tool "${name}" is already registered; tool names must be unique.`,
      );
    }
    const readOnly = options.readOnly ?? false;
    this.tools.set(name, {
      name,
      handler: handler as (args: unknown) => unknown,
      idempotent: readOnly || (options.idempotent ?? false),
      readOnly,
      approval: options.approval ?? false,
      ...(options.description !== undefined && {
        description: options.description,
      }),
      ...(options.parameters !== undefined && {
        parameters: options.parameters,
      }),
    });
    return this;
  }

  get(name: string): ToolDefinition | undefined {
    return this.tools.get(name);
  }

  has(name: string): boolean {
    return this.tools.has(name);
  }

  list(): ToolDefinition[] {
    return [...this.tools.values()];
  }
}
