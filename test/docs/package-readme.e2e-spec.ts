/**
 * The package's own README (libs/agent-adapter/README.md, the npm page) against the code: every
 * ```ts block after a `<!-- readme-example: name -->` marker type-checks against the library's
 * sources (strict, the repository's tsconfig) and runs in a child process, printing what its
 * `console.log(...); // expected` comments say (the Nest logger's lines aside); the packages it
 * tells users to install are the package's peers; its `overrides` snippet is the one this
 * repository uses itself; the reference it points to (the repository's docs/ pages) exists.
 */
import { execFile } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import * as ts from 'typescript';

jest.setTimeout(120_000);

const ROOT = join(__dirname, '..', '..');
const LIB = join(ROOT, 'libs', 'agent-adapter');
const HOOK = join(ROOT, 'test', 'utils', 'ts-register.js');
const README = readFileSync(join(LIB, 'README.md'), 'utf8');
const KEY = 'use-a-secret-from-your-vault-32b-readme';

interface Example {
  name: string;
  code: string;
  expected: string[];
}

function examples(): Example[] {
  const marker = /<!-- readme-example: ([\w-]+) -->\s*```ts\n([\s\S]*?)```/g;
  return [...README.matchAll(marker)].map(([, name, code]) => ({
    name: name!,
    code: code!,
    expected: [...code!.matchAll(/console\.log\(.*\);\s*\/\/ (.*)$/gm)].map(
      (m) => m[1]!.trim(),
    ),
  }));
}

interface PackageJson {
  peerDependencies: Record<string, string>;
  overrides?: unknown;
}

const readJson = (file: string): PackageJson =>
  JSON.parse(readFileSync(file, 'utf8')) as PackageJson;

describe('the package README (libs/agent-adapter/README.md)', () => {
  // Inside the repository, so the examples resolve its node_modules as a user's project would.
  mkdirSync(join(ROOT, 'test-artifacts'), { recursive: true });
  const dir = mkdtempSync(join(ROOT, 'test-artifacts', 'package-readme-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  const files = examples().map((e) => {
    mkdirSync(join(dir, e.name));
    const file = join(dir, e.name, `${e.name}.ts`);
    writeFileSync(file, e.code);
    return [e.name, file, e] as const;
  });

  it('has the NestJS and the plain Node examples, each with expected output', () => {
    expect(files.map(([name]) => name)).toEqual(['nest', 'node']);
    for (const [, , e] of files) expect(e.expected.length).toBeGreaterThan(0);
  });

  it('its examples type-check against the current API', () => {
    const config = ts.getParsedCommandLineOfConfigFile(
      join(ROOT, 'tsconfig.json'),
      { noEmit: true },
      {
        ...ts.sys,
        onUnRecoverableConfigFileDiagnostic: (d) => {
          throw new Error(ts.flattenDiagnosticMessageText(d.messageText, '\n'));
        },
      },
    );
    const program = ts.createProgram(
      files.map(([, file]) => file),
      config!.options,
    );
    const problems = ts.getPreEmitDiagnostics(program).map((d) => {
      const where =
        d.file && d.start !== undefined
          ? `${d.file.fileName}:${d.file.getLineAndCharacterOfPosition(d.start).line + 1}: `
          : '';
      return where + ts.flattenDiagnosticMessageText(d.messageText, '\n');
    });
    expect(problems).toEqual([]);
  });

  it.each(files)(
    'the %s example runs and prints what its comments say',
    async (_name, file, example) => {
      const { stdout } = await promisify(execFile)(
        process.execPath,
        ['-r', HOOK, file],
        {
          cwd: join(file, '..'), // its runs.db goes there
          env: {
            ...process.env,
            NODE_OPTIONS: '',
            NO_COLOR: '1',
            CHECKPOINT_KEY: KEY,
          },
          timeout: 60_000,
        },
      );
      const printed = stdout
        .trim()
        .split('\n')
        .filter((line) => !line.startsWith('[Nest]'));
      expect(printed).toEqual(example.expected);
    },
  );

  it('tells users to install only the package, its peers and pinned majors of them', () => {
    const { peerDependencies } = readJson(join(LIB, 'package.json'));
    const named = [...README.matchAll(/npm install ([^`\n]+)/g)].flatMap(
      ([, list]) => list!.trim().split(/\s+/),
    );
    const packages = named
      .filter((p) => p !== 'agent-adapter')
      .map((p) => p.replace(/(.)@[^@/]+$/, '$1'));
    expect(packages.length).toBeGreaterThan(0);
    for (const p of packages)
      expect([p, p in peerDependencies]).toEqual([p, true]);
  });

  it("points to the reference, the repository's docs/ pages, each of which exists", () => {
    const pages = [...README.matchAll(/`(docs\/[\w.-]+\.md)`/g)].map(
      ([, page]) => page!,
    );
    expect(pages).toEqual(
      expect.arrayContaining(['docs/guarantees.md', 'docs/stores.md']),
    );
    for (const page of pages)
      expect([page, existsSync(join(ROOT, page))]).toEqual([page, true]);
  });

  it("gives the TypeORM 1 / ioredis 6 overrides this repository's package.json uses", () => {
    const snippet = /```json\n("overrides": [^\n]+)\n```/.exec(README);
    expect(snippet).not.toBeNull();
    const { overrides } = JSON.parse(`{${snippet![1]!}}`) as PackageJson;
    expect(overrides).toEqual(readJson(join(ROOT, 'package.json')).overrides);
  });
});
