import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { MESSAGE_AREAS, Messages } from 'agent-adapter/errors/messages';
import { literalMessages, type LiteralMessage } from './literal-messages';

const LIB = join(__dirname, '..', '..', 'libs', 'agent-adapter', 'src');

/**
 * Files that may still build a message at the throw site, with how many: none. Keep it empty; a
 * file listed with fewer sites than it has fails too.
 */
const NOT_YET_MOVED: Readonly<Record<string, number>> = {};

const perFile = (found: readonly LiteralMessage[]) => {
  const counts: Record<string, number> = {};
  for (const { file } of found) counts[file] = (counts[file] ?? 0) + 1;
  return counts;
};

describe('error messages', () => {
  it('come from the message factories: no error of the library is built with literal text', () => {
    const found = literalMessages(LIB);
    const unlisted = found.filter((f) => !(f.file in NOT_YET_MOVED));
    expect(
      unlisted.map(({ file, line, text }) => `${file}:${line}: ${text}`),
    ).toEqual([]);
    const listed = Object.fromEntries(
      Object.entries(perFile(found)).filter(([file]) => file in NOT_YET_MOVED),
    );
    // Moved ones leave the list, so it cannot hide a new site in the same file.
    expect(listed).toEqual(NOT_YET_MOVED);
  });

  it('Messages is its areas put together, no name in two of them', () => {
    const names = Object.values(MESSAGE_AREAS).flatMap((area) =>
      Object.keys(area),
    );
    const twice = names.filter((name, i) => names.indexOf(name) !== i);
    expect(twice).toEqual([]);
    expect(Object.keys(Messages).sort()).toEqual([...names].sort());
  });

  describe('the check behind it', () => {
    const roots: string[] = [];
    afterAll(() => {
      for (const root of roots) rmSync(root, { recursive: true, force: true });
    });
    const scan = (files: Record<string, string>) => {
      const root = mkdtempSync(join(tmpdir(), 'aa-literal-messages-'));
      roots.push(root);
      for (const [path, source] of Object.entries(files)) {
        mkdirSync(dirname(join(root, path)), { recursive: true });
        writeFileSync(join(root, path), source);
      }
      return literalMessages(root).map(({ file, line }) => `${file}:${line}`);
    };

    it('finds literal text in every form, for built-in, foreign and own error classes', () => {
      expect(
        scan({
          'a.ts': [
            "throw new TypeError('plain');", // 1
            'throw new RangeError(`template ${1}`);', // 2
            "throw new BadRequestException('a ' + what);", // 3
            "const e = new FooError(ok ? Messages.x() : 'fallback');", // 4
            "throw new errors.ToolError(runId, 'second argument');", // 5
            'throw new Conflict(`own subclass, two levels down`);', // 6
            "class Crash extends Error { constructor() { super('in super'); } }", // 7
          ].join('\n'),
          'b.ts': [
            'export class Base extends DurableError {}',
            'export class Conflict extends Base {}',
          ].join('\n'),
        }),
      ).toEqual([
        'a.ts:1',
        'a.ts:2',
        'a.ts:3',
        'a.ts:4',
        'a.ts:5',
        'a.ts:6',
        'a.ts:7',
      ]);
    });

    it('lets factories, variables and non-errors through, and skips specs', () => {
      expect(
        scan({
          'ok.ts': [
            'throw new TypeError(Messages.chatObject(where));',
            'throw new FlowError(NestMessages.viewerUnknownFlow(runId, flow), runId);',
            'throw new CliError(message, EXIT.problems);',
            "const flow = new Flow('refunds');",
            "const seen = new Map<string, string>([['a', 'b']]);",
            "throw new RunLeaseHeld(runId, owner ?? '?', until);",
            "class Plain { constructor() { super('not an error'); } }",
          ].join('\n'),
          'x.spec.ts': "throw new Error('specs may');",
          'y.e2e-spec.ts': "throw new Error('and these');",
        }),
      ).toEqual([]);
    });
  });
});
