import { DriverNotInstalledError, type MissingPackage } from '../errors';

/*
 * The optional peer packages, in one place: which feature needs which package, the one function
 * that loads them, and the check that names every missing package at once with the npm command.
 *
 * Nothing here loads a package until a feature asks for it, so `require('agent-adapter')` loads
 * none, and a user of one store never loads another's driver. The check only resolves package
 * paths (`require.resolve`): it runs no package code, so it is cheap enough to run when a store
 * or a flow is created, long before the first request.
 */

interface FeatureSpec {
  /** The packages, in the order `npm install` is given them. */
  readonly packages: readonly string[];
  /** What the feature is, for messages ("needed for ..."). */
  readonly what: string;
  /**
   * True when the library works without the packages (no spans, no schema, no event bridge):
   * such a feature is loaded when installed and never reported missing.
   */
  readonly optional?: true;
}

/**
 * Every optional feature and the packages it needs. The README's "What to install" table says the
 * same for users.
 * @internal
 */
export const OPTIONAL_FEATURES = {
  /** `SQLiteCheckpointStore(path)`, `{ type: 'sqlite' }`. */
  sqlite: { packages: ['typeorm', 'better-sqlite3'], what: 'the SQLite store' },
  /** A Postgres store made from connection options or a URL (a given DataSource needs nothing). */
  postgres: { packages: ['typeorm', 'pg'], what: 'the Postgres store' },
  /** A Redis store made from a URL (a given client factory needs nothing). */
  redis: { packages: ['ioredis'], what: 'the Redis store' },
  /** A flow with a state class: input validated, nodes get instances. */
  stateClass: {
    packages: ['class-validator', 'class-transformer'],
    what: 'flow state classes',
  },
  /** `@Tool({ args: Dto })`: the arguments validated and turned into the DTO. */
  toolArguments: {
    packages: ['class-validator', 'class-transformer'],
    what: '@Tool({ args }) argument classes',
  },
  /** The JSON schema a model is shown for `@Tool({ args })`; without it, a warning and no schema. */
  toolArgumentSchemas: {
    packages: ['class-validator-jsonschema'],
    what: 'the JSON schemas of @Tool({ args }) classes',
    optional: true,
  },
  /** `@OnEvent('checkpoint.saved')` in Nest; without it, `DurableEvents.on()`. */
  nestEvents: {
    packages: ['@nestjs/event-emitter'],
    what: '@OnEvent() listeners of the library events',
    optional: true,
  },
  /** `runner.schedule`, `@DurableCron`: cron expressions parsed by croner. */
  schedules: { packages: ['croner'], what: 'durable schedules (cron)' },
  /** `registerMcpTools`: an MCP server's tools, their arguments checked against their schemas. */
  mcp: {
    packages: ['@modelcontextprotocol/sdk'],
    what: 'MCP tools (registerMcpTools)',
  },
  /** OpenTelemetry spans; without it, nothing is traced. */
  tracing: {
    packages: ['@opentelemetry/api'],
    what: 'OpenTelemetry spans',
    optional: true,
  },
} as const satisfies Record<string, FeatureSpec>;

/** @internal */
export type OptionalFeature = keyof typeof OPTIONAL_FEATURES;

/** A feature in use, and who uses it (for the message): `the state class of @Flow "tickets"`. */
export interface FeatureUse {
  readonly feature: OptionalFeature;
  readonly by: string;
}

/** What `npm install` is given for a package whose latest major is wrong here. */
const INSTALL: Readonly<Record<string, string>> = {
  // better-sqlite3 13 crashes on Node 20 (DESIGN.md); the peer range is ^12.
  'better-sqlite3': 'better-sqlite3@12',
};

/** Finds a package's entry file; throws when it is not installed. */
export type PackageResolver = (name: string) => string;

const nodeResolver: PackageResolver = (name) => require.resolve(name);
let resolver: PackageResolver = nodeResolver;
const loaded = new Map<string, unknown>();

/**
 * Replaces how packages are found, so a test can make chosen packages look missing while every
 * check and load still runs through this module. Returns the function that restores Node's.
 * @internal
 */
export function usePackageResolver(next: PackageResolver): () => void {
  resolver = next;
  loaded.clear();
  return () => {
    resolver = nodeResolver;
    loaded.clear();
  };
}

/**
 * Whether the package is installed: its entry resolves, or else its package.json does (a package
 * used only through subpaths, like `@modelcontextprotocol/sdk`, may have no loadable root entry).
 */
function isInstalled(name: string): boolean {
  for (const path of [name, `${name}/package.json`]) {
    try {
      resolver(path);
      return true;
    } catch {
      // Not this way.
    }
  }
  return false;
}

/**
 * Loads a package (or a file of one, `class-transformer/cjs/storage`), or returns undefined when it
 * is not installed. The one place the library `require`s an optional package. An installed package
 * that fails to load (a native module built for another Node) throws its own error.
 * @internal
 */
export function loadOptionalPackage<T>(name: string): T | undefined {
  if (loaded.has(name)) return loaded.get(name) as T;
  let path: string;
  try {
    path = resolver(name);
  } catch {
    return undefined;
  }
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const module = require(path) as T;
  loaded.set(name, module);
  return module;
}

/**
 * Loads a package that `feature` needs; when it is missing, throws the same error as
 * `requireFeatures([feature], context)` (every missing package of the feature, one command).
 * @internal
 */
export function requirePackage<T>(
  name: string,
  feature: OptionalFeature,
  context: string,
): T {
  const module = loadOptionalPackage<T>(name);
  if (module !== undefined) return module;
  requireFeatures([feature], context);
  // The feature's other packages are there, so `name` is not one of them.
  throw new DriverNotInstalledError(context, [missingPackage(name, [])]);
}

/**
 * The packages of the given features that are not installed, each with what needs it. Features
 * whose packages are optional (`tracing`, ...) are never missing.
 * @internal
 */
export function missingPackages(
  uses: Iterable<OptionalFeature | FeatureUse>,
): MissingPackage[] {
  const needs = new Map<string, string[]>();
  for (const use of uses) {
    const { feature, by } =
      typeof use === 'string'
        ? { feature: use, by: OPTIONAL_FEATURES[use].what }
        : use;
    const spec: FeatureSpec = OPTIONAL_FEATURES[feature];
    if (spec.optional) continue;
    for (const name of spec.packages) {
      const users = needs.get(name) ?? [];
      if (!users.includes(by)) users.push(by);
      needs.set(name, users);
    }
  }
  return [...needs]
    .filter(([name]) => !isInstalled(name))
    .map(([name, by]) => missingPackage(name, by));
}

/**
 * Checks that every package of the given features is installed (without loading any) and throws
 * one `DriverNotInstalledError` naming every missing one, with the `npm install` command.
 * `context` is what is being set up: `SQLiteCheckpointStore`, `Flow "tickets"`, `DurableModule`.
 * @internal
 */
export function requireFeatures(
  uses: Iterable<OptionalFeature | FeatureUse>,
  context: string,
): void {
  const missing = missingPackages(uses);
  if (missing.length) throw new DriverNotInstalledError(context, missing);
}

function missingPackage(name: string, neededFor: string[]): MissingPackage {
  return { name, install: INSTALL[name] ?? name, neededFor };
}
