// Two projects, one `npm test`: fast framework-free unit specs beside the code, and e2e suites
// under test/ that talk to real stores and processes. Both import the library as users do.
const fs = require('node:fs');
const path = require('node:path');

const moduleNameMapper = {
  '^agent-adapter(|/.*)$': '<rootDir>/libs/agent-adapter/src$1',
};

/**
 * The installed packages that ship as ES modules ("type": "module"), Nest 12 first among them.
 * Node loads them from CommonJS itself; jest (before Node 24.9) only through a transform, so
 * these, and only these, are compiled to CommonJS (test/utils/esm-to-cjs.transform.js).
 */
function esmPackages() {
  const root = path.join(__dirname, 'node_modules');
  const names = [];
  for (const entry of fs.readdirSync(root)) {
    const dirs = entry.startsWith('@')
      ? fs.readdirSync(path.join(root, entry)).map((n) => `${entry}/${n}`)
      : [entry];
    for (const name of dirs) {
      try {
        const pkg = JSON.parse(
          fs.readFileSync(path.join(root, name, 'package.json'), 'utf8'),
        );
        if (pkg.type === 'module') names.push(name);
      } catch {
        // not a package (.bin, .package-lock.json)
      }
    }
  }
  return names;
}

const escape = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
const ESM = esmPackages().map(escape).join('|');

const transform = {
  '^.+\\.ts$': ['ts-jest', { tsconfig: '<rootDir>/tsconfig.json' }],
  '/node_modules/.+\\.m?js$': '<rootDir>/test/utils/esm-to-cjs.transform.js',
};
const transformIgnorePatterns = [`/node_modules/(?!(${ESM})/)`];

const project = (displayName, testMatch) => ({
  displayName,
  rootDir: __dirname,
  testEnvironment: 'node',
  testMatch,
  moduleNameMapper,
  transform,
  transformIgnorePatterns,
  setupFiles: ['reflect-metadata'],
});

/** @type {import('jest').Config} */
module.exports = {
  // e2e suites start processes and talk to servers; unit specs finish far below this.
  testTimeout: 60000,
  projects: [
    project('unit', [
      '<rootDir>/libs/**/*.spec.ts',
      '<rootDir>/src/**/*.spec.ts',
    ]),
    project('e2e', ['<rootDir>/test/**/*.e2e-spec.ts']),
  ],
};
