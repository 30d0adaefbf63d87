/**
 * Base class of every error the library throws on purpose. `runId` is set whenever the error is
 * about one run, so an operator can find it; the message always says what to do next.
 *
 * `instanceof` works across duplicated copies of the package (two versions in one node_modules,
 * or Jest module registries): classes are matched by a `Symbol.for` brand per class name, set for
 * the whole subclass chain, not by constructor identity.
 *
 * Conventions (docs/errors.md): every error the library throws on purpose extends this class, in
 * one place per layer (the core's in `errors/`, the CLI's `CliError` in `cli/`), with its message
 * from that layer's factory (`Messages`, `NestMessages`, `CliMessages`), never a literal at the
 * throw site. Naming: an error is named for what happened (`CheckpointConflict`, `ToolDenied`,
 * `RunLeaseHeld`); a family or a category of misuse takes the `Error` suffix (`DurableError`,
 * `FlowError`, `CheckpointKeyError`, `DurableSetupError`, `ChatModelError`,
 * `DriverNotInstalledError`, `CliError`).
 * @publicApi
 */
export class DurableError extends Error {
  readonly runId?: string;

  constructor(message: string, runId?: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
    if (runId !== undefined) this.runId = runId;
    for (
      let ctor: unknown = new.target;
      typeof ctor === 'function' && ctor !== Error;
      ctor = Object.getPrototypeOf(ctor)
    ) {
      Object.defineProperty(this, brand((ctor as { name: string }).name), {
        value: true,
      });
    }
  }

  static override [Symbol.hasInstance](value: unknown): boolean {
    if (typeof value !== 'object' || value === null) return false;
    return brand(this.name) in value;
  }
}

function brand(name: string): symbol {
  return Symbol.for(`agent-adapter:error:${name}`);
}
