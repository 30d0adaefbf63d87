import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative, sep } from 'node:path';
import * as ts from 'typescript';

/** An error built with its text written where it is thrown: `file:line: new X(...)`. */
export interface LiteralMessage {
  file: string;
  line: number;
  text: string;
}

/**
 * Every place under `root` (specs and declaration files aside) where an error is built with literal
 * text as an argument: a string, a template, or a `+` or `? :` with one in it. An error is a
 * class whose name ends in `Error` or `Exception` (JavaScript's, commander's, Nest's, the
 * library's families), or a class declared under `root` that extends one, at any depth
 * (`CheckpointConflict extends DurableError`); the constructors of those classes are read too
 * (`super(...)`). Each message belongs in its layer's factory (`Messages`, `NestMessages`,
 * `CliMessages`), which the check cannot tell from other code, so any call counts.
 */
export function literalMessages(root: string): LiteralMessage[] {
  const files = sourceFiles(root).map((path) =>
    ts.createSourceFile(
      path,
      readFileSync(path, 'utf8'),
      ts.ScriptTarget.Latest,
      true,
    ),
  );
  const isError = errorClasses(files);
  const found: LiteralMessage[] = [];
  for (const file of files) {
    const visit = (node: ts.Node): void => {
      const args = errorArguments(node, isError);
      for (const arg of args ?? []) {
        if (!isLiteralText(arg)) continue;
        found.push({
          file: relative(root, file.fileName).split(sep).join('/'),
          line: file.getLineAndCharacterOfPosition(node.getStart()).line + 1,
          text: node.getText(file).replace(/\s+/g, ' ').slice(0, 120),
        });
        break;
      }
      ts.forEachChild(node, visit);
    };
    visit(file);
  }
  return found;
}

/** The arguments of `new E(...)`, or of `super(...)` in a class that extends an error. */
function errorArguments(
  node: ts.Node,
  isError: (name: string) => boolean,
): readonly ts.Expression[] | undefined {
  if (ts.isNewExpression(node)) {
    const name = calleeName(node.expression);
    return name !== undefined && isError(name) ? node.arguments : undefined;
  }
  if (
    ts.isCallExpression(node) &&
    node.expression.kind === ts.SyntaxKind.SuperKeyword
  ) {
    const cls = ts.findAncestor(node, ts.isClassLike);
    const base = cls && baseName(cls);
    return base !== undefined && isError(base) ? node.arguments : undefined;
  }
  return undefined;
}

const ERROR_NAME = /(Error|Exception)$/;

/** Names ending in Error/Exception, and every class under the root that extends one of them. */
function errorClasses(
  files: readonly ts.SourceFile[],
): (name: string) => boolean {
  const bases = new Map<string, string>();
  for (const file of files) {
    const visit = (node: ts.Node): void => {
      if (ts.isClassDeclaration(node) && node.name) {
        const base = baseName(node);
        if (base !== undefined) bases.set(node.name.text, base);
      }
      ts.forEachChild(node, visit);
    };
    visit(file);
  }
  const isError = (name: string, seen = new Set<string>()): boolean => {
    if (ERROR_NAME.test(name)) return true;
    const base = bases.get(name);
    if (base === undefined || seen.has(name)) return false;
    seen.add(name);
    return isError(base, seen);
  };
  // Any Error/Exception-named class counts, declared here or not (TypeError, BadRequestException).
  return (name) => isError(name);
}

function baseName(cls: ts.ClassLikeDeclaration): string | undefined {
  const extendsClause = cls.heritageClauses?.find(
    (c) => c.token === ts.SyntaxKind.ExtendsKeyword,
  );
  const base = extendsClause?.types[0]?.expression;
  return base && calleeName(base);
}

/** `X` of `new X(...)` or `new ns.X(...)`. */
function calleeName(expression: ts.Expression): string | undefined {
  if (ts.isIdentifier(expression)) return expression.text;
  if (ts.isPropertyAccessExpression(expression)) return expression.name.text;
  return undefined;
}

/** Text written at the call: a literal, a template, or an expression that has one in it. */
export function isLiteralText(node: ts.Expression): boolean {
  if (
    ts.isStringLiteral(node) ||
    ts.isNoSubstitutionTemplateLiteral(node) ||
    ts.isTemplateExpression(node)
  )
    return true;
  if (ts.isParenthesizedExpression(node)) return isLiteralText(node.expression);
  if (ts.isConditionalExpression(node))
    return isLiteralText(node.whenTrue) || isLiteralText(node.whenFalse);
  // A `??` or `||` fallback ('?', '(no run id)') is a value shown in place of a missing one.
  if (
    ts.isBinaryExpression(node) &&
    node.operatorToken.kind === ts.SyntaxKind.PlusToken
  )
    return isLiteralText(node.left) || isLiteralText(node.right);
  return false;
}

function sourceFiles(dir: string): string[] {
  const files: string[] = [];
  for (const name of readdirSync(dir).sort()) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) files.push(...sourceFiles(path));
    else if (
      name.endsWith('.ts') &&
      !name.endsWith('.d.ts') &&
      !/\.(spec|e2e-spec)\.ts$/.test(name)
    )
      files.push(path);
  }
  return files;
}
