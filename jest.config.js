// Two projects, one `npm test`: fast framework-free unit specs beside the code, and e2e suites
// under test/ that talk to real stores and processes. Both import the library as users do.
const moduleNameMapper = {
  '^agent-adapter(|/.*)$': '<rootDir>/libs/agent-adapter/src$1',
};
const transform = {
  '^.+\\.ts$': ['ts-jest', { tsconfig: '<rootDir>/tsconfig.json' }],
};

/** @type {import('jest').Config} */
module.exports = {
  // e2e suites start processes and talk to servers; unit specs finish far below this.
  testTimeout: 60000,
  projects: [
    {
      displayName: 'unit',
      rootDir: __dirname,
      testEnvironment: 'node',
      testMatch: ['<rootDir>/libs/**/*.spec.ts', '<rootDir>/src/**/*.spec.ts'],
      moduleNameMapper,
      transform,
      setupFiles: ['reflect-metadata'],
    },
    {
      displayName: 'e2e',
      rootDir: __dirname,
      testEnvironment: 'node',
      testMatch: ['<rootDir>/test/**/*.e2e-spec.ts'],
      moduleNameMapper,
      transform,
      setupFiles: ['reflect-metadata'],
    },
  ],
};
