#!/usr/bin/env node
/**
 * The `agent-adapter` bin (`npx agent-adapter runs --help`). A committed file rather than the
 * compiled `dist/cli/main.js` itself, so that npm links it when this workspace is installed, before
 * the library is built: the link then works as soon as `dist/` exists. Loading the compiled entry
 * runs the CLI (see src/cli/main.ts).
 */
'use strict';

const { existsSync } = require('node:fs');
const { join } = require('node:path');

const main = join(__dirname, '..', 'dist', 'cli', 'main.js');

if (existsSync(main)) {
  require(main);
} else {
  process.stderr.write(
    'agent-adapter: the library is not built; run npm run build\n',
  );
  process.exitCode = 1;
}
