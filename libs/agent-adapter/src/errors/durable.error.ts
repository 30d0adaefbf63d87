/**
 * Base class of every error the library throws on purpose. `runId` is set whenever the error is
 * about one run, so an operator can find it; the message always says what to do next.
 *
 * `instanceof` works across duplicated copies of the package (two versions in one node_modules,
 * or Jest module registries): classes are matched by a `Symbol.for` brand per class name, set for
 * the whole subclass chain, not by constructor identity.
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
