import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import * as ts from 'typescript';

/** Each source file (path relative to the root, `/`-separated) → the source files it imports. */
export type ImportGraph = Map<string, Set<string>>;

export interface ImportGraphOptions {
  /**
   * A package name that maps to the root, as tsconfig `paths` and jest's `moduleNameMapper` map
   * 'agent-adapter' and 'agent-adapter/x' to the library's sources: such imports are edges too.
   */
  selfName?: string;
}

/**
 * The import graph of every `.ts` file under `root` except specs and declaration files, read with
 * the TypeScript parser so that every kind of edge counts: `import` and `import type`, side-effect
 * imports, `export ... from` (type-only too), `import x = require()`, dynamic `import()` and
 * `require()` with a literal path, and `import('./x').T` in type positions. A relative specifier
 * that resolves to no file throws: an edge the graph cannot see would hide a circle.
 */
export function importGraph(
  root: string,
  options: ImportGraphOptions = {},
): ImportGraph {
  const base = resolve(root);
  const graph: ImportGraph = new Map();
  for (const file of sourceFiles(base)) {
    const from = key(base, file);
    const edges = new Set<string>();
    for (const specifier of specifiers(file)) {
      const target = resolveSpecifier(base, file, specifier, options);
      if (target !== undefined) edges.add(key(base, target));
    }
    graph.set(from, edges);
  }
  return graph;
}

/**
 * Every circle of the graph, one per strongly connected component with more than one file (or a
 * file importing itself), each written as a path that starts and ends at the same file:
 * `['a.ts', 'b.ts', 'a.ts']`. Sorted, so a failing test prints the same list every time.
 */
export function findCycles(graph: ImportGraph): string[][] {
  const cycles: string[][] = [];
  for (const component of stronglyConnected(graph)) {
    const first = [...component].sort()[0]!;
    const selfLoop = graph.get(first)?.has(first) ?? false;
    if (component.size < 2 && !selfLoop) continue;
    cycles.push(cycleThrough(graph, component, first));
  }
  return cycles.sort((a, b) => a[0]!.localeCompare(b[0]!));
}

function sourceFiles(dir: string): string[] {
  const files: string[] = [];
  for (const name of readdirSync(dir).sort()) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) files.push(...sourceFiles(path));
    else if (
      name.endsWith('.ts') &&
      !name.endsWith('.d.ts') &&
      !name.endsWith('.spec.ts')
    )
      files.push(path);
  }
  return files;
}

/** Every module specifier the file names, whatever kind of import or export names it. */
function specifiers(file: string): string[] {
  const source = ts.createSourceFile(
    file,
    readFileSync(file, 'utf8'),
    ts.ScriptTarget.Latest,
    true,
    ts.ScriptKind.TS,
  );
  const found: string[] = [];
  const literal = (node: ts.Node | undefined): void => {
    if (node && ts.isStringLiteralLike(node)) found.push(node.text);
  };
  const visit = (node: ts.Node): void => {
    if (ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) {
      literal(node.moduleSpecifier);
    } else if (
      ts.isImportEqualsDeclaration(node) &&
      ts.isExternalModuleReference(node.moduleReference)
    ) {
      literal(node.moduleReference.expression);
    } else if (ts.isCallExpression(node)) {
      const callee = node.expression;
      if (
        callee.kind === ts.SyntaxKind.ImportKeyword ||
        (ts.isIdentifier(callee) && callee.text === 'require')
      )
        literal(node.arguments[0]);
    } else if (
      ts.isImportTypeNode(node) &&
      ts.isLiteralTypeNode(node.argument)
    ) {
      literal(node.argument.literal);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

/** The source file a specifier names, or undefined for a package or a non-TypeScript file. */
function resolveSpecifier(
  root: string,
  file: string,
  specifier: string,
  options: ImportGraphOptions,
): string | undefined {
  let target: string;
  if (specifier.startsWith('./') || specifier.startsWith('../')) {
    target = resolve(dirname(file), specifier);
  } else if (
    options.selfName !== undefined &&
    (specifier === options.selfName ||
      specifier.startsWith(`${options.selfName}/`))
  ) {
    target = join(root, specifier.slice(options.selfName.length));
  } else {
    return undefined; // a package (node:fs, @nestjs/common, typeorm...)
  }
  const candidates = [
    target,
    `${target}.ts`,
    join(target, 'index.ts'),
    // NodeNext style: './x.js' names './x.ts'.
    target.replace(/\.js$/, '.ts'),
  ];
  for (const candidate of candidates) {
    if (!existsSync(candidate) || statSync(candidate).isDirectory()) continue;
    return candidate.endsWith('.ts') ? candidate : undefined; // e.g. package.json
  }
  throw new Error(
    `${relative(root, file)}: cannot resolve "${specifier}" to a file`,
  );
}

function key(root: string, file: string): string {
  return relative(root, file).split(sep).join('/');
}

/** Tarjan's strongly connected components, iterative (no deep recursion on long chains). */
function stronglyConnected(graph: ImportGraph): Set<string>[] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const onStack = new Set<string>();
  const stack: string[] = [];
  const components: Set<string>[] = [];
  let next = 0;
  for (const start of [...graph.keys()].sort()) {
    if (index.has(start)) continue;
    const work: Array<{ node: string; edges: string[]; at: number }> = [];
    const enter = (node: string): void => {
      index.set(node, next);
      low.set(node, next);
      next++;
      stack.push(node);
      onStack.add(node);
      work.push({ node, edges: [...(graph.get(node) ?? [])].sort(), at: 0 });
    };
    enter(start);
    while (work.length) {
      const frame = work[work.length - 1]!;
      if (frame.at < frame.edges.length) {
        const to = frame.edges[frame.at++]!;
        if (!index.has(to)) enter(to);
        else if (onStack.has(to))
          low.set(frame.node, Math.min(low.get(frame.node)!, index.get(to)!));
        continue;
      }
      work.pop();
      const parent = work[work.length - 1];
      if (parent)
        low.set(
          parent.node,
          Math.min(low.get(parent.node)!, low.get(frame.node)!),
        );
      if (low.get(frame.node) === index.get(frame.node)) {
        const component = new Set<string>();
        let member: string;
        do {
          member = stack.pop()!;
          onStack.delete(member);
          component.add(member);
        } while (member !== frame.node);
        components.push(component);
      }
    }
  }
  return components;
}

/** A shortest path from `first` back to itself inside its component (breadth first). */
function cycleThrough(
  graph: ImportGraph,
  component: Set<string>,
  first: string,
): string[] {
  const cameFrom = new Map<string, string>();
  const queue = [first];
  while (queue.length) {
    const node = queue.shift()!;
    for (const to of [...(graph.get(node) ?? [])].sort()) {
      if (!component.has(to)) continue;
      if (to === first) {
        const path = [first];
        for (let at = node; at !== first; at = cameFrom.get(at)!)
          path.unshift(at);
        path.unshift(first);
        return path;
      }
      if (!cameFrom.has(to)) {
        cameFrom.set(to, node);
        queue.push(to);
      }
    }
  }
  return [first, first]; // unreachable for a component found by Tarjan
}
