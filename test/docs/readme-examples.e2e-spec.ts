/**
 * The README's runnable examples run: every ```ts block after a `<!-- readme-example: name -->`
 * marker is written to a file and run in a child process (as a user would, importing
 * 'agent-adapter'); each `console.log(...); // expected` line must print exactly `expected`, in order.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const ROOT = join(__dirname, '..', '..');
const HOOK = join(ROOT, 'test', 'utils', 'ts-register.js');
const README = readFileSync(join(ROOT, 'README.md'), 'utf8');

interface Example {
  name: string;
  code: string;
  expected: string[];
}

function examples(): Example[] {
  const out: Example[] = [];
  const marker = /<!-- readme-example: ([\w-]+) -->\s*```ts\n([\s\S]*?)```/g;
  for (const [, name, code] of README.matchAll(marker)) {
    const expected = [
      ...code!.matchAll(/console\.log\(.*\);\s*\/\/ (.*)$/gm),
    ].map((m) => m[1]!.trim());
    out.push({ name: name!, code: code!, expected });
  }
  return out;
}

describe('README examples', () => {
  const dir = mkdtempSync(join(tmpdir(), 'aa-readme-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('has the approvals and the tool loop examples, each with expected output', () => {
    const found = examples();
    expect(found.map((e) => e.name)).toEqual(['approvals', 'tool-loop']);
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
          env: { ...process.env, NODE_OPTIONS: '' },
          timeout: 60_000,
        },
      );
      expect(stdout.trim().split('\n')).toEqual(example.expected);
    },
  );
});
