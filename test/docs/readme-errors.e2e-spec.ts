/**
 * Every error the documentation names is one a user can import: each name in the first column of
 * the errors table (docs/errors.md; cells like `ToolFailed` / `ToolDenied` split), and each
 * error-like name in the prose of README.md and every docs/*.md page, is a class exported by the
 * root entry ('agent-adapter') that extends DurableError.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import * as api from 'agent-adapter';
import { DurableError } from 'agent-adapter';

const ROOT = join(__dirname, '..', '..');
const read = (page: string): string => readFileSync(join(ROOT, page), 'utf8');
/** The page with the errors table. */
const ERRORS = read('docs/errors.md');
/** Every page whose prose may name errors: the README and the reference in docs/. */
const PAGES = [
  'README.md',
  ...readdirSync(join(ROOT, 'docs'))
    .filter((name) => name.endsWith('.md'))
    .sort()
    .map((name) => `docs/${name}`),
];
const ALL = PAGES.map(read).join('\n');

/** The names in the first column of the errors table (the first table of the `# Errors` section). */
function tableNames(readme: string): string[] {
  const section = /^#{1,2} Errors\n([\s\S]*?)(?=^#{1,2} |(?![\s\S]))/m.exec(
    readme,
  );
  if (!section) throw new Error('docs/errors.md has no "# Errors" section');
  // The first table of the section (`| Error | When |`); later ones (HTTP statuses) name errors
  // the first one already lists.
  const lines = section[1]!.split('\n');
  const start = lines.findIndex((line) => line.startsWith('|'));
  const end = lines.findIndex((line, i) => i > start && !line.startsWith('|'));
  const rows = lines.slice(start, end === -1 ? undefined : end).slice(2); // the header and the |---| line
  return rows.flatMap((row) =>
    row
      .split('|')[1]!
      .split('/')
      .map((cell) => cell.trim().replace(/^`|`$/g, '')),
  );
}

/** Backticked names in the prose that read as errors (`RunCancelled: cancelled by ...` too). */
function proseNames(readme: string): string[] {
  const names = [...readme.matchAll(/`([A-Z][A-Za-z]+)(?::[^`]*)?`/g)]
    .map((m) => m[1]!)
    .filter((name) =>
      /(Error|Exceeded|Denied|Failed|Timeout|Held|Conflict|NotFound|Corrupt|Unavailable|Decision|Cancelled|Arguments|Paused|Value|State)$/.test(
        name,
      ),
    )
    .filter((name) => !(name in globalThis)); // TypeError, Error: JavaScript's own
  return [...new Set(names)].sort();
}

/** Why `name` is not an exported DurableError class, or undefined when it is one. */
function problem(name: string): string | undefined {
  const value = (api as Record<string, unknown>)[name];
  if (typeof value !== 'function') return `${name}: not exported`;
  // Not `prototype instanceof DurableError`: DurableError's Symbol.hasInstance matches the brand
  // its constructor puts on instances (so instanceof works across copies of the package), which a
  // prototype does not carry. The prototype chain is what "extends DurableError" means.
  const ctor = value as { prototype: object; name: string };
  if (value === DurableError) return undefined; // the base class itself, named in the prose
  if (
    !Object.prototype.isPrototypeOf.call(DurableError.prototype, ctor.prototype)
  )
    return `${name}: does not extend DurableError`;
  // The class's own name is the sealed error's name (`result.error.name`).
  if (ctor.name !== name) return `${name}: exported under another class's name`;
  return undefined;
}

describe('the errors the README and docs/ name', () => {
  const table = tableNames(ERRORS);

  it('reads the Errors table (the check is not vacuous)', () => {
    expect(table).toEqual(
      expect.arrayContaining([
        'CheckpointNotFound',
        'ToolFailed',
        'ToolDenied',
        'ToolTimeout',
        'RecoveryAttemptsExceeded',
        'RunCancelled',
      ]),
    );
    expect(table.every((name) => /^[A-Z][A-Za-z]+$/.test(name))).toBe(true);
  });

  it.each(table)(
    'the Errors table row %s is a DurableError class exported by agent-adapter',
    (name) => {
      expect(problem(name)).toBeUndefined();
    },
  );

  it('every error named in the prose is exported by agent-adapter as a DurableError class', () => {
    const names = proseNames(ALL);
    expect(names).toEqual(
      expect.arrayContaining([
        'RecoveryAttemptsExceeded',
        'RunCancelled',
        'CheckpointKeyError',
      ]),
    );
    expect(names.map(problem).filter(Boolean)).toEqual([]);
  });

  it('fails for a row naming something that is not exported', () => {
    const readme = ERRORS.replace(
      /^(#{1,2} Errors\n[\s\S]*?\|---\|---\|\n)/m,
      '$1| `NoSuchError` / `ToolFailed` | never |\n',
    );
    const names = tableNames(readme);
    expect(names).toContain('NoSuchError');
    expect(problem('NoSuchError')).toBe('NoSuchError: not exported');
    expect(problem('Flow')).toBe('Flow: does not extend DurableError');
  });
});
