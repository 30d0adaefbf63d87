'use strict';
/**
 * Makes bench/peers ready on a fresh clone (run by `npm run bench:peers` before run.cjs):
 * `npm ci` here when node_modules is missing; the library built (`npm run build:lib` at the root)
 * and packed (`npm pack`) into a temporary directory, and that tarball installed here with
 * `npm install --no-save`: our library measured as a user installs it, not from its sources.
 * Node built-ins only: it runs before bench/peers has its packages.
 */
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const here = __dirname;
const root = path.resolve(here, '..', '..');
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
const run = (cwd, ...args) => {
  console.error(
    `[peers] (${path.relative(root, cwd) || '.'}) npm ${args.join(' ')}`,
  );
  return execFileSync(npm, args, {
    cwd,
    stdio: ['ignore', 'pipe', 'inherit'],
    encoding: 'utf8',
  });
};

if (!fs.existsSync(path.join(here, 'node_modules')))
  run(here, 'ci', '--no-audit', '--no-fund');
run(root, 'run', 'build:lib');
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'peers-pack-'));
try {
  run(
    path.join(root, 'libs', 'agent-adapter'),
    'pack',
    '--loglevel=warn',
    '--pack-destination',
    tmp,
  );
  const tarball = fs.readdirSync(tmp).find((f) => f.endsWith('.tgz'));
  fs.rmSync(path.join(here, 'node_modules', 'agent-adapter'), {
    recursive: true,
    force: true,
  });
  run(
    here,
    'install',
    '--no-save',
    '--no-audit',
    '--no-fund',
    path.join(tmp, tarball),
  );
} finally {
  fs.rmSync(tmp, { recursive: true, force: true });
}
