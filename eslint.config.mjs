// ESLint flat config: the Nest starter's type-checked base (recommendedTypeChecked +
// projectService), tightened like Temporal/DBOS, plus the library's import boundaries
// (DESIGN.md "Layout", STYLE.md §3). Formatting is Prettier's job (`npm run format:check`);
// eslint-config-prettier switches off every rule that would fight it.
import js from '@eslint/js';
import { defineConfig } from 'eslint/config';
import prettier from 'eslint-config-prettier';
import importPlugin from 'eslint-plugin-import';
import tseslint from 'typescript-eslint';

const LIB = 'libs/agent-adapter/src';

/** Files that may import `@nestjs/*`: the Nest layer only. */
const NEST_FILES = [`${LIB}/nest/**/*.ts`];
/** Files that may import a store driver: the store's own file(s). */
const STORE_FILES = [
  `${LIB}/**/*.store.ts`,
  `${LIB}/exec/checkpoints/sql/**/*.ts`,
  `${LIB}/exec/checkpoints/redis/**/*.ts`,
];

const NEST_BAN = {
  group: ['@nestjs/*'],
  message:
    'Only libs/agent-adapter/src/nest/** may import @nestjs/*: everything else is framework-free (DESIGN.md "Layout").',
};
const DRIVER_BAN = {
  group: [
    'pg',
    'pg/*',
    'typeorm',
    'typeorm/*',
    'ioredis',
    'ioredis/*',
    'better-sqlite3',
    'better-sqlite3/*',
  ],
  message:
    "A store driver is imported only by that store's file (*.store.ts, exec/checkpoints/{sql,redis}/), so a user of one store never loads the others.",
};
/** The shipped library (its 'agent-adapter/testing' entry too) runs under any test framework or none. */
const TEST_FRAMEWORK_BAN = {
  group: ['jest', '@jest/*', 'vitest', 'vitest/*', '@types/jest'],
  message:
    "The library depends on no test framework: 'agent-adapter/testing' takes describe/it from its caller and asserts with node:assert.",
};
const restrict = (...patterns) => [
  'error',
  // The typescript-eslint variant also sees `import type` and `import x = require()`.
  { patterns },
];

export default defineConfig(
  {
    ignores: [
      '**/node_modules/**',
      '**/dist/**',
      'coverage/**',
      'bench/out/**',
      'test-artifacts/**',
    ],
  },

  // TypeScript: type-checked rules through the project service (root tsconfig.json covers
  // src, libs, test and bench).
  {
    files: ['**/*.ts'],
    extends: [js.configs.recommended, tseslint.configs.recommendedTypeChecked],
    languageOptions: {
      parserOptions: {
        projectService: true,
        tsconfigRootDir: import.meta.dirname,
      },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      // A failure kept as `unknown` (the call log's first refused write) is rethrown as it came.
      '@typescript-eslint/only-throw-error': [
        'error',
        { allowThrowingUnknown: true },
      ],
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/consistent-type-imports': [
        'error',
        { prefer: 'type-imports', fixStyle: 'inline-type-imports' },
      ],
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_' },
      ],
      eqeqeq: ['error', 'always', { null: 'ignore' }],
    },
  },

  // The library's public surface states its types; no import cycles inside it.
  {
    files: [`${LIB}/**/*.ts`],
    ignores: ['**/*.spec.ts'],
    plugins: { import: importPlugin },
    settings: {
      'import/parsers': { '@typescript-eslint/parser': ['.ts'] },
      'import/resolver': { node: { extensions: ['.ts', '.js', '.json'] } },
      'import/extensions': ['.ts', '.js'],
    },
    rules: {
      '@typescript-eslint/explicit-module-boundary-types': 'error',
      'import/no-cycle': ['error', { ignoreExternal: true }],
    },
  },

  // Import boundaries. Later objects would replace (not merge) the rule's options, so every
  // file gets exactly one of these four through `files`/`ignores`.
  {
    files: [`${LIB}/**/*.ts`],
    ignores: [...NEST_FILES, ...STORE_FILES],
    rules: {
      '@typescript-eslint/no-restricted-imports': restrict(
        NEST_BAN,
        DRIVER_BAN,
        TEST_FRAMEWORK_BAN,
      ),
    },
  },
  {
    files: NEST_FILES,
    ignores: STORE_FILES,
    rules: {
      '@typescript-eslint/no-restricted-imports': restrict(
        DRIVER_BAN,
        TEST_FRAMEWORK_BAN,
      ),
    },
  },
  {
    files: STORE_FILES,
    ignores: NEST_FILES,
    rules: {
      '@typescript-eslint/no-restricted-imports': restrict(
        NEST_BAN,
        TEST_FRAMEWORK_BAN,
      ),
    },
  },

  // Tests: mocks, `expect.any()` and fixtures are untyped by nature.
  {
    files: [
      '**/*.spec.ts',
      '**/*.e2e-spec.ts',
      'test/**/*.ts',
      'tools/**/*.ts',
      'bench/**/*.ts',
    ],
    rules: {
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
      '@typescript-eslint/no-explicit-any': 'off',
      '@typescript-eslint/unbound-method': 'off',
      '@typescript-eslint/require-await': 'off',
      '@typescript-eslint/no-non-null-assertion': 'off',
    },
  },

  // Plain JS config files (jest.config.js, this file): no type information.
  {
    files: ['**/*.{js,cjs,mjs}'],
    extends: [js.configs.recommended, tseslint.configs.disableTypeChecked],
    languageOptions: {
      globals: {
        module: 'writable',
        require: 'readonly',
        __dirname: 'readonly',
        process: 'readonly',
        console: 'readonly',
      },
    },
  },

  prettier,
);
