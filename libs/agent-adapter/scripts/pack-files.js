/**
 * The repository's LICENSE and CHANGELOG.md, shipped in the package without a second copy in git:
 * `prepack` copies them here from the repository's root (`node scripts/pack-files.js copy`) and
 * `postpack` removes the copies (`... remove`). npm runs both around `npm pack` and `npm publish`,
 * from this directory or from the root (`npm pack ./libs/agent-adapter`, `npm pack -w
 * agent-adapter`); the copies are git-ignored in case a pack is interrupted.
 */
'use strict';

const { copyFileSync, rmSync } = require('node:fs');
const { join } = require('node:path');

const PACKAGE = join(__dirname, '..');
const ROOT = join(PACKAGE, '..', '..');
const FILES = ['LICENSE', 'CHANGELOG.md'];

const action = process.argv[2];
for (const file of FILES) {
  if (action === 'copy') copyFileSync(join(ROOT, file), join(PACKAGE, file));
  else if (action === 'remove') rmSync(join(PACKAGE, file), { force: true });
  else throw new Error('usage: node scripts/pack-files.js copy|remove');
}
