/**
 * TypeScript → CommonJS for child processes (see ts-register.js): `typescript.transpileModule`
 * per file (no type check), cached in memory per process. A parent that starts many children can
 * transpile once (`snapshot`) and hand the result to each child through an inherited pipe
 * (`seed`), so a child neither loads the compiler nor transpiles: it starts in a fraction of the
 * time. Nothing is written to disk.
 */
'use strict';

const fs = require('node:fs');
const path = require('node:path');

const ROOT = path.resolve(__dirname, '..', '..');
const LIBRARY = path.join(ROOT, 'libs', 'agent-adapter', 'src');
/** The child's fd a snapshot arrives on (read to EOF when the hook loads). */
const CACHE_FD_ENV = 'TS_REGISTER_CACHE_FD';
const SOURCE_MAPS = process.env.TS_REGISTER_SOURCEMAP !== '0';

/** filename → { mtimeMs, code } */
const cache = new Map();
let ts;
let compilerOptions;

/** The compiler, loaded on the first file that is not in the cache. */
function compiler() {
  if (ts === undefined) {
    ts = require('typescript');
    compilerOptions = {
      module: ts.ModuleKind.CommonJS,
      target: ts.ScriptTarget.ES2022,
      esModuleInterop: true,
      experimentalDecorators: true,
      emitDecoratorMetadata: true,
      inlineSourceMap: SOURCE_MAPS,
      inlineSources: SOURCE_MAPS,
    };
  }
  return ts;
}

/** The CommonJS text of one `.ts` file (transpiled again only if the file changed). */
function transpile(filename) {
  const { mtimeMs } = fs.statSync(filename);
  const hit = cache.get(filename);
  if (hit !== undefined && hit.mtimeMs === mtimeMs) return hit.code;
  const { outputText } = compiler().transpileModule(
    fs.readFileSync(filename, 'utf8'),
    { compilerOptions, fileName: filename, reportDiagnostics: false },
  );
  cache.set(filename, { mtimeMs, code: outputText });
  return outputText;
}

/** Transpiles `files` and returns them as one JSON text for `seed`. */
function snapshot(files) {
  const out = {};
  for (const file of files) {
    const code = transpile(file);
    out[file] = [cache.get(file).mtimeMs, code];
  }
  return JSON.stringify(out);
}

/** Fills the cache from a `snapshot`; entries whose file has changed since are re-transpiled on load. */
function seed(json) {
  for (const [file, [mtimeMs, code]] of Object.entries(JSON.parse(json))) {
    if (!cache.has(file)) cache.set(file, { mtimeMs, code });
  }
}

module.exports = {
  ROOT,
  LIBRARY,
  CACHE_FD_ENV,
  SOURCE_MAPS,
  transpile,
  snapshot,
  seed,
};
