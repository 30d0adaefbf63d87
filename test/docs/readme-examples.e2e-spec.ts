/**
 * The runnable examples of the README and of the reference in docs/ run: every ```ts block after a
 * `<!-- readme-example: name -->` marker, in README.md or any docs/*.md page, is written to a file
 * and run in a child process (as a user would, importing 'agent-adapter'); each
 * `console.log(...); // expected` line must print exactly `expected`, in order.
 */
import { execFile } from 'node:child_process';
import {
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const ROOT = join(__dirname, '..', '..');
const HOOK = join(ROOT, 'test', 'utils', 'ts-register.js');
/** The README, then every page of docs/ (by name): where runnable examples may live. */
const PAGES = [
  'README.md',
  ...readdirSync(join(ROOT, 'docs'))
    .filter((name) => name.endsWith('.md'))
    .sort()
    .map((name) => `docs/${name}`),
];

interface Example {
  page: string;
  name: string;
  code: string;
  expected: string[];
}

function examples(): Example[] {
  const out: Example[] = [];
  const marker = /<!-- readme-example: ([\w-]+) -->\s*```ts\n([\s\S]*?)```/g;
  for (const page of PAGES) {
    const text = readFileSync(join(ROOT, page), 'utf8');
    for (const [, name, code] of text.matchAll(marker)) {
      const expected = [
        ...code!.matchAll(/console\.log\(.*\);\s*\/\/ (.*)$/gm),
      ].map((m) => m[1]!.trim());
      out.push({ page, name: name!, code: code!, expected });
    }
  }
  return out;
}

describe('README and docs/ examples', () => {
  const dir = mkdtempSync(join(tmpdir(), 'aa-readme-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('has the approvals and the tool loop examples, each with expected output', () => {
    const found = examples();
    expect(found.map((e) => `${e.page}: ${e.name}`)).toEqual([
      'docs/flows.md: approvals',
      'docs/tool-loop.md: tool-loop',
      'docs/tool-loop.md: ai-sdk',
    ]);
    for (const e of found) expect(e.expected.length).toBeGreaterThan(0);
  });

  it.each(examples().map((e) => [e.name, e] as const))(
    'the %s example runs and prints what its comments say',
    async (_name, example) => {
      const file = join(dir, `${example.name}.ts`);
      writeFileSync(file, example.code);
      const { stdout } = await promisify(execFile)(
        process.execPath,
        ['-r', HOOK, file],
        {
          cwd: ROOT,
          // The file lives in a temp dir: other packages (ai/test) come from the repository's.
          env: {
            ...process.env,
            NODE_OPTIONS: '',
            NODE_PATH: join(ROOT, 'node_modules'),
          },
          timeout: 60_000,
        },
      );
      expect(stdout.trim().split('\n')).toEqual(example.expected);
    },
  );
});
