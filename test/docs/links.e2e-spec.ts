/**
 * The documentation's links resolve: every relative link in README.md and docs/*.md points to a
 * file or folder of the repository, and a link with a `#fragment` to a markdown page names one of
 * that page's headings (GitHub's anchors: lower case, punctuation dropped, spaces as hyphens, a
 * repeated heading numbered `-1`, `-2`, ...). Links inside code are not links.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';

const ROOT = join(__dirname, '..', '..');

/** The README, then every page of docs/ (by name). */
const PAGES = [
  'README.md',
  ...readdirSync(join(ROOT, 'docs'))
    .filter((name) => name.endsWith('.md'))
    .sort()
    .map((name) => `docs/${name}`),
];

/** The text without fenced code blocks and inline code spans (line breaks kept). */
function prose(markdown: string): string {
  return markdown
    .replace(/^(`{3,}|~{3,})[^\n]*\n[\s\S]*?^\1[^\n]*$/gm, (block) =>
      block.replace(/[^\n]/g, ''),
    )
    .replace(/(`+)[\s\S]*?\1/g, '');
}

/** GitHub's anchor for a heading's text. */
function slug(heading: string): string {
  return heading
    .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1') // a link: its text
    .replace(/`/g, '')
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\p{Pc}\- ]/gu, '')
    .replace(/ /g, '-');
}

/** The anchors of a markdown page's headings, outside code blocks. */
function anchors(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  const text = markdown.replace(
    /^(`{3,}|~{3,})[^\n]*\n[\s\S]*?^\1[^\n]*$/gm,
    '',
  );
  for (const [, heading] of text.matchAll(/^#{1,6} +(.+?) *#* *$/gm)) {
    const base = slug(heading!);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n === 0 ? base : `${base}-${n}`);
  }
  return out;
}

interface Link {
  page: string;
  target: string;
}

/** The relative links of a page (`[text](target)`, images too), outside code. */
function links(page: string, markdown: string): Link[] {
  return [
    ...prose(markdown).matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g),
  ]
    .map((m) => m[1]!)
    .filter((target) => !/^[a-z][a-z0-9+.-]*:/i.test(target)) // https:, mailto:
    .map((target) => ({ page, target }));
}

interface Files {
  exists(file: string): boolean;
  read(file: string): string;
}

const disk: Files = {
  exists: existsSync,
  read: (file) => readFileSync(file, 'utf8'),
};

/** Why a link does not resolve, or undefined when it does. */
function problem(
  { page, target }: Link,
  files: Files = disk,
): string | undefined {
  const [path, fragment] = target.split('#') as [string, string | undefined];
  const file = path ? join(dirname(join(ROOT, page)), path) : join(ROOT, page);
  const shown = relative(ROOT, file) || '.';
  if (!files.exists(file)) return `${page}: ${target}: no file ${shown}`;
  if (fragment === undefined || !file.endsWith('.md')) return undefined;
  if (!anchors(files.read(file)).has(decodeURIComponent(fragment)))
    return `${page}: ${target}: no heading #${fragment} in ${shown}`;
  return undefined;
}

describe('links in README.md and docs/', () => {
  const all = PAGES.flatMap((page) => links(page, disk.read(join(ROOT, page))));

  it('finds the pages and their links (the check is not vacuous)', () => {
    expect(PAGES).toEqual(
      expect.arrayContaining([
        'README.md',
        'docs/guarantees.md',
        'docs/stores.md',
        'docs/nest.md',
        'docs/tool-loop.md',
        'docs/cli.md',
        'docs/operations.md',
      ]),
    );
    // The README links to every page of docs/.
    const fromReadme = all
      .filter((l) => l.page === 'README.md')
      .map((l) => l.target.split('#')[0]);
    for (const page of PAGES.slice(1)) expect(fromReadme).toContain(page);
    expect(all.some((l) => l.target.includes('#'))).toBe(true);
  });

  it.each(PAGES)('every relative link in %s resolves', (page) => {
    const problems = all
      .filter((l) => l.page === page)
      .map((l) => problem(l))
      .filter(Boolean);
    expect(problems).toEqual([]);
  });

  it('reports a missing file, a missing heading, and not a link inside code', () => {
    const page = [
      '# A page',
      '## Its `second` heading: with punctuation, and (more)',
      '## A page',
      '[ok](#a-page) [ok](#a-page-1) [ok](#its-second-heading-with-punctuation-and-more)',
      '[ok](../README.md#two-commands) [ok](https://example.com/nowhere.md)',
      '[gone](nowhere.md) [bad](#no-such-heading) `[code](nowhere.md)`',
      '```md',
      '[code](nowhere.md)',
      '## Not a heading',
      '```',
    ].join('\n');
    const self = join(ROOT, 'docs', 'page.md');
    const files: Files = {
      exists: (file) => file === self || disk.exists(file),
      read: (file) => (file === self ? page : disk.read(file)),
    };
    const found = links('docs/page.md', page);
    expect(found.map((l) => l.target)).toEqual([
      '#a-page',
      '#a-page-1',
      '#its-second-heading-with-punctuation-and-more',
      '../README.md#two-commands',
      'nowhere.md',
      '#no-such-heading',
    ]);
    expect(found.map((l) => problem(l, files)).filter(Boolean)).toEqual([
      'docs/page.md: nowhere.md: no file docs/nowhere.md',
      'docs/page.md: #no-such-heading: no heading #no-such-heading in docs/page.md',
    ]);
    expect(anchors(page).has('not-a-heading')).toBe(false);
  });
});
