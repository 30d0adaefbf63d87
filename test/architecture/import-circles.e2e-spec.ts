import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { findCycles, importGraph, type ImportGraph } from './import-graph';

const LIB = join(__dirname, '..', '..', 'libs', 'agent-adapter', 'src');

/** Writes `files` (path → source) under a fresh directory and returns it. */
function fixture(files: Record<string, string>): string {
  const root = mkdtempSync(join(tmpdir(), 'aa-import-graph-'));
  for (const [path, source] of Object.entries(files)) {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), source);
  }
  return root;
}

const graphOf = (edges: Record<string, string[]>): ImportGraph =>
  new Map(Object.entries(edges).map(([from, to]) => [from, new Set(to)]));

describe('import circles', () => {
  it('the library has none, type-only imports included', () => {
    const graph = importGraph(LIB, { selfName: 'agent-adapter' });
    // Not vacuous: the whole library was read, with its edges.
    expect(graph.size).toBeGreaterThan(50);
    expect(graph.get('nest/durable.module.ts')?.size).toBeGreaterThan(5);
    expect(findCycles(graph).map((cycle) => cycle.join(' -> '))).toEqual([]);
  });

  describe('the graph behind it', () => {
    const roots: string[] = [];
    afterAll(() => {
      for (const root of roots) rmSync(root, { recursive: true, force: true });
    });
    const read = (files: Record<string, string>) => {
      const root = fixture(files);
      roots.push(root);
      return importGraph(root, { selfName: 'my-lib' });
    };

    it('sees every kind of edge, type-only ones included, and reports each circle by its files', () => {
      const graph = read({
        // `import type` both ways: invisible to a linter that skips type imports.
        'types/a.ts':
          "import type { B } from './b';\nexport interface A { b?: B }\n",
        'types/b.ts':
          "import { type A } from './a';\nexport interface B { a?: A }\n",
        // `export ... from` through a folder's index.
        'reexport/c.ts': "export * from './d';\nexport const c = 1;\n",
        'reexport/d/index.ts': "export type { c } from '../c';\n",
        // dynamic import() and require() with a literal path.
        'dynamic/e.ts': "export const load = () => import('./f');\n",
        'dynamic/f.ts': "export const e: unknown = require('./e');\n",
        // import('./x').T in a type, and a side-effect import.
        'typeref/g.ts': "export type H = import('./h').H;\n",
        'typeref/h.ts': "import './g';\nexport type H = string;\n",
        // the package's own name, as tsconfig paths map it.
        'self/i.ts':
          "import { j } from 'my-lib/self/j';\nexport const i = j;\n",
        'self/j.ts': "export { i as j } from './i';\n",
        // A file importing itself.
        'self-loop.ts': "export * from './self-loop';\n",
        // No circle: a chain, a package, a JSON file and specs (which are not read).
        'chain/x.ts':
          "import { y } from './y';\nimport { readFileSync } from 'node:fs';\nexport const x = [y, readFileSync];\n",
        'chain/y.ts':
          "import data from '../data.json';\nexport const y = data;\n",
        'chain/y.spec.ts': "import { x } from './x';\nexport const z = x;\n",
        'data.json': '{}',
      });
      expect(graph.has('chain/y.spec.ts')).toBe(false);
      expect([...graph.get('chain/x.ts')!]).toEqual(['chain/y.ts']);
      expect(findCycles(graph)).toEqual([
        ['dynamic/e.ts', 'dynamic/f.ts', 'dynamic/e.ts'],
        ['reexport/c.ts', 'reexport/d/index.ts', 'reexport/c.ts'],
        ['self-loop.ts', 'self-loop.ts'],
        ['self/i.ts', 'self/j.ts', 'self/i.ts'],
        ['typeref/g.ts', 'typeref/h.ts', 'typeref/g.ts'],
        ['types/a.ts', 'types/b.ts', 'types/a.ts'],
      ]);
    });

    it('refuses a relative import it cannot resolve (an unseen edge could hide a circle)', () => {
      expect(() =>
        read({ 'a.ts': "import { b } from './missing';\n" }),
      ).toThrow('a.ts: cannot resolve "./missing" to a file');
    });
  });

  it('finds one circle per group of files that import each other, and nothing else', () => {
    const graph = graphOf({
      'a.ts': ['b.ts'],
      'b.ts': ['c.ts'],
      'c.ts': ['a.ts', 'd.ts'],
      'd.ts': [],
      'e.ts': ['a.ts', 'f.ts'],
      'f.ts': ['e.ts'],
      'g.ts': ['d.ts'],
    });
    expect(findCycles(graph)).toEqual([
      ['a.ts', 'b.ts', 'c.ts', 'a.ts'],
      ['e.ts', 'f.ts', 'e.ts'],
    ]);
    expect(findCycles(graphOf({ 'a.ts': ['b.ts'], 'b.ts': [] }))).toEqual([]);
  });
});
