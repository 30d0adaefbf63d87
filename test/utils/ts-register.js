/**
 * A tiny `.ts` require hook for child processes (crash workers, the import-boundary check):
 *
 *   node -r ./test/utils/ts-register.js test/crash/worker.ts ...
 *
 * Every `.ts` file outside node_modules is transpiled on load with TypeScript's `transpileModule`
 * (module commonjs, target ES2022, decorators with metadata, esModuleInterop; no type check) and
 * cached in memory (ts-transpile.js). The bare specifier `agent-adapter` (and `agent-adapter/<path>`)
 * resolves to the library's sources, as tsconfig `paths` and jest's moduleNameMapper do.
 *
 * Environment: TS_REGISTER_CACHE_FD=<fd> reads a parent's transpiled snapshot from that fd first
 * (see ts-transpile.js); TS_REGISTER_SOURCEMAP=0 drops the inline source maps.
 */
'use strict';

const fs = require('node:fs');
const Module = require('node:module');
const path = require('node:path');
const {
  LIBRARY,
  CACHE_FD_ENV,
  SOURCE_MAPS,
  transpile,
  seed,
} = require('./ts-transpile.js');

const fd = process.env[CACHE_FD_ENV];
if (fd !== undefined) {
  // Not for grandchildren: they do not inherit the fd.
  delete process.env[CACHE_FD_ENV];
  try {
    seed(fs.readFileSync(Number(fd), 'utf8'));
    fs.closeSync(Number(fd));
  } catch (error) {
    process.emitWarning(
      `ts-register: no transpiled snapshot on fd ${fd} (${error.message}); transpiling on load`,
    );
  }
}

if (SOURCE_MAPS && !process.sourceMapsEnabled) {
  process.setSourceMapsEnabled(true);
}

const NODE_MODULES = `${path.sep}node_modules${path.sep}`;
if (!Module._extensions['.ts']) {
  Module._extensions['.ts'] = function loadTs(module, filename) {
    if (filename.includes(NODE_MODULES)) {
      throw new Error(
        `ts-register: ${filename} is inside node_modules; only the project's own .ts files are transpiled.`,
      );
    }
    module._compile(transpile(filename), filename);
  };
}

const resolveFilename = Module._resolveFilename;
Module._resolveFilename = function resolveAgentAdapter(request, ...rest) {
  if (request === 'agent-adapter' || request.startsWith('agent-adapter/')) {
    request = LIBRARY + request.slice('agent-adapter'.length);
  }
  return resolveFilename.call(this, request, ...rest);
};
