/**
 * Checks that need Node's own module resolution, out of jest's registry: a fresh `node` that
 * compiles the library's sources on the fly (ts-register.js: TypeScript's transpileModule, no type
 * check) runs a script given as text. The library's load-check specs (which packages an entry
 * loads, what a missing package looks like) share these; they are test code, never shipped.
 */
import { spawnSync, type SpawnSyncReturns } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join, sep } from 'node:path';

const ROOT = join(__dirname, '..', '..');
const HOOK = join(__dirname, 'ts-register.js');
const LIB_PACKAGE = join(ROOT, 'libs', 'agent-adapter', 'package.json');

/** Runs `script` (CommonJS source) in a fresh node through the `.ts` hook, to its end. */
export function runInFreshNode(script: string): SpawnSyncReturns<string> {
  return spawnSync(process.execPath, ['-r', HOOK, '-e', script], {
    cwd: ROOT,
    encoding: 'utf8',
    env: { ...process.env, NODE_OPTIONS: '' },
    timeout: 30_000,
  });
}

/**
 * Source for the child that makes `packages` (and their subpaths) unresolvable, as if they were
 * not installed: Node's own `Module._resolveFilename` refuses them with MODULE_NOT_FOUND.
 */
export function refusePackages(packages: readonly string[]): string {
  return `
    const Module = require('module');
    const resolve = Module._resolveFilename;
    const hidden = ${JSON.stringify(packages)};
    Module._resolveFilename = function (request, ...rest) {
      if (hidden.some((h) => request === h || request.startsWith(h + '/'))) {
        const e = new Error('Cannot find module ' + request);
        e.code = 'MODULE_NOT_FOUND';
        throw e;
      }
      return resolve.call(this, request, ...rest);
    };`;
}

/** What {@link loadEntry} reports: the entry's export names, every loaded file, and `extra`. */
export type LoadedEntry<T extends object = object> = T & {
  exports: string[];
  loaded: string[];
};

/**
 * Loads `entry` in a fresh node and reports its export names and every file in `require.cache`.
 * `before` runs first (e.g. `require('reflect-metadata');`), `after` once the entry is loaded (its
 * exports are `api`); `extra` is an object literal's fields, added to the report. Throws with the
 * child's stderr if the entry cannot be loaded.
 */
export function loadEntry<T extends object = object>(
  entry: string,
  options: { before?: string; after?: string; extra?: string } = {},
): LoadedEntry<T> {
  const out = runInFreshNode(`
${options.before ?? ''}
const api = require(${JSON.stringify(entry)});
${options.after ?? ''}
process.stdout.write(JSON.stringify({
  ${options.extra ?? ''}
  exports: Object.keys(api),
  loaded: Object.keys(require.cache),
}));
`);
  if (out.status !== 0) {
    throw new Error(
      `node could not load ${entry} (exit ${String(out.status)}${out.signal ? `, ${out.signal}` : ''}):\n${out.stderr}`,
    );
  }
  return JSON.parse(out.stdout) as LoadedEntry<T>;
}

/** `/node_modules/<name>/`, or `/node_modules/@scope/` for a scope prefix (`'@nestjs/'`). */
export function marker(name: string): string {
  return `${sep}node_modules${sep}${name.replace(/\/$/, '').split('/').join(sep)}${sep}`;
}

/** The files of `loaded` that belong to package `name` (or scope, `'@nestjs/'`). */
export function loadedFrom(loaded: readonly string[], name: string): string[] {
  return loaded.filter((file) => file.includes(marker(name)));
}

/** The library's optional peers, from its package.json's `peerDependenciesMeta`. */
export function optionalPeers(): string[] {
  const pkg = JSON.parse(readFileSync(LIB_PACKAGE, 'utf8')) as {
    peerDependenciesMeta?: Record<string, { optional?: boolean }>;
  };
  return Object.entries(pkg.peerDependenciesMeta ?? {})
    .filter(([, meta]) => meta.optional)
    .map(([name]) => name);
}

/**
 * Declares the load check of one entry: `title`'s describe loads `entry` once in a fresh node
 * (see {@link loadEntry} for `options`), tests that it exports at least `exports` (so the checks
 * are not vacuous), runs `checks` (its own tests, given the report), then one test per name in
 * `absent` that nothing was loaded from it.
 */
export function describeEntryBoundary<T extends object = object>(
  title: string,
  entry: string,
  spec: {
    options?: Parameters<typeof loadEntry>[1];
    exports: readonly string[];
    absent: readonly string[];
    checks: (child: () => LoadedEntry<T>) => void;
  },
): void {
  describe(title, () => {
    let child: LoadedEntry<T>;

    beforeAll(() => {
      child = loadEntry<T>(entry, spec.options);
    });

    it(`exports ${spec.exports.join(', ')} (the check is not vacuous)`, () => {
      expect(child.exports).toEqual(expect.arrayContaining([...spec.exports]));
    });

    spec.checks(() => child);

    it.each(spec.absent)('loads nothing from %s', (name) => {
      expect(loadedFrom(child.loaded, name)).toEqual([]);
    });
  });
}
