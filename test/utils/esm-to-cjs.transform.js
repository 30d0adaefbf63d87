/**
 * A jest transformer for ES-module packages in node_modules (Nest 12 ships ESM only).
 *
 * Node 20.19+ loads them from CommonJS natively (`require(esm)`), and so do the library, the
 * example app and every child process the suites start. Jest's own module loader does not: before
 * Node 24.9 it only runs an ESM-marked file through a configured transform (jestjs/jest#16244).
 * This one compiles such a file to CommonJS with TypeScript's `transpileModule` and rewrites the
 * `import.meta` properties those packages use (`url`, `dirname`, `filename`, `resolve`) into their
 * CommonJS equivalents, which `transpileModule` alone would leave as a syntax error.
 */
'use strict';

const crypto = require('node:crypto');
const ts = require('typescript');

const VERSION = '7';

function isImportMeta(node) {
  return (
    ts.isMetaProperty(node) &&
    node.keywordToken === ts.SyntaxKind.ImportKeyword &&
    node.name.text === 'meta'
  );
}

/** `import.meta.<name>` → a CommonJS expression of the same value, built from factory nodes. */
function metaExpressions(f) {
  const id = (name) => f.createIdentifier(name);
  const call = (callee, ...args) =>
    f.createCallExpression(callee, undefined, args);
  const get = (object, name) => f.createPropertyAccessExpression(object, name);
  // require('node:url').pathToFileURL(path).href
  const fileUrl = (path) =>
    get(
      call(
        get(
          call(id('require'), f.createStringLiteral('node:url')),
          'pathToFileURL',
        ),
        path,
      ),
      'href',
    );
  const specifier = id('specifier');
  return {
    url: () => fileUrl(id('__filename')),
    filename: () => id('__filename'),
    dirname: () => id('__dirname'),
    resolve: () =>
      f.createParenthesizedExpression(
        f.createArrowFunction(
          undefined,
          undefined,
          [f.createParameterDeclaration(undefined, undefined, specifier)],
          undefined,
          f.createToken(ts.SyntaxKind.EqualsGreaterThanToken),
          fileUrl(call(get(id('require'), 'resolve'), specifier)),
        ),
      ),
  };
}

/**
 * CommonJS names an ES module may declare for itself (`const require = createRequire(...)` is
 * common): in the CommonJS wrapper they are parameters, so a top-level `const require` would be a
 * redeclaration. An ES module has no such bindings of its own, so in a module that declares one,
 * every reference to that name is to its declaration, and renaming them all keeps the meaning.
 * (Only names the file declares are renamed: `{ module: X }` elsewhere is left alone.)
 */
const WRAPPER_NAMES = new Set([
  'require',
  'module',
  'exports',
  '__filename',
  '__dirname',
]);

/** Replaces `import.meta.x` by its CommonJS twin, and renames the module's own wrapper names. */
function importMetaToCommonJs(context) {
  const f = context.factory;
  const meta = metaExpressions(f);
  const rename = (name) => `__esm_${name}`;
  let declared = new Set();
  const visit = (node) => {
    if (ts.isPropertyAccessExpression(node)) {
      if (isImportMeta(node.expression)) {
        const make = meta[node.name.text];
        if (make !== undefined) return make();
      }
      // `x.require` is a property name, not a reference: visit only the object.
      const object = ts.visitNode(node.expression, visit);
      return ts.isPropertyAccessChain(node)
        ? f.updatePropertyAccessChain(
            node,
            object,
            node.questionDotToken,
            node.name,
          )
        : f.updatePropertyAccessExpression(node, object, node.name);
    }
    if (isImportMeta(node)) {
      return f.createObjectLiteralExpression(
        Object.entries(meta).map(([name, make]) =>
          f.createPropertyAssignment(name, make()),
        ),
      );
    }
    if (
      ts.isShorthandPropertyAssignment(node) &&
      declared.has(node.name.text)
    ) {
      return f.createPropertyAssignment(
        node.name.text,
        f.createIdentifier(rename(node.name.text)),
      );
    }
    if (
      declared.size > 0 &&
      (ts.isPropertyAssignment(node) || ts.isMethodDeclaration(node)) &&
      ts.isIdentifier(node.name)
    ) {
      // The key of `{ require: x }` or `require() {}` is a name, not a reference.
      const name = node.name;
      const visited = ts.visitEachChild(node, visit, context);
      return ts.isPropertyAssignment(visited)
        ? f.updatePropertyAssignment(visited, name, visited.initializer)
        : f.updateMethodDeclaration(
            visited,
            visited.modifiers,
            visited.asteriskToken,
            name,
            visited.questionToken,
            visited.typeParameters,
            visited.parameters,
            visited.type,
            visited.body,
          );
    }
    if (ts.isIdentifier(node) && declared.has(node.text)) {
      return f.createIdentifier(rename(node.text));
    }
    return ts.visitEachChild(node, visit, context);
  };
  return (sourceFile) => {
    // `const require = createRequire(import.meta.url)` is the wrapper's own `require`: drop it, so
    // what it loads comes from jest's module registry (one instance of each module), not Node's.
    const statements = sourceFile.statements.filter(
      (statement) => !isCreateRequireOfSelf(statement),
    );
    const file = f.updateSourceFile(sourceFile, statements);
    declared = topLevelWrapperNames(file);
    return ts.visitNode(file, visit);
  };
}

/** `const require = createRequire(import.meta.url);` */
function isCreateRequireOfSelf(statement) {
  if (!ts.isVariableStatement(statement)) return false;
  const [declaration, ...more] = statement.declarationList.declarations;
  if (more.length > 0 || declaration === undefined) return false;
  const init = declaration.initializer;
  return (
    ts.isIdentifier(declaration.name) &&
    declaration.name.text === 'require' &&
    init !== undefined &&
    ts.isCallExpression(init) &&
    ts.isIdentifier(init.expression) &&
    init.expression.text === 'createRequire' &&
    init.arguments.length === 1 &&
    ts.isPropertyAccessExpression(init.arguments[0]) &&
    isImportMeta(init.arguments[0].expression) &&
    init.arguments[0].name.text === 'url'
  );
}

/** The wrapper names (WRAPPER_NAMES) this module declares at its top level. */
function topLevelWrapperNames(sourceFile) {
  const names = new Set();
  for (const statement of sourceFile.statements) {
    const declarations = ts.isVariableStatement(statement)
      ? statement.declarationList.declarations.map((d) => d.name)
      : ts.isFunctionDeclaration(statement) || ts.isClassDeclaration(statement)
        ? [statement.name]
        : [];
    for (const name of declarations) {
      if (name && ts.isIdentifier(name) && WRAPPER_NAMES.has(name.text)) {
        names.add(name.text);
      }
    }
  }
  return names;
}

/** Whether the file has ES-module syntax: an import or export statement, or `import.meta`. */
function isEsModule(sourceText, sourcePath) {
  if (!/\b(import|export)\b/.test(sourceText)) return false;
  const file = ts.createSourceFile(
    sourcePath,
    sourceText,
    ts.ScriptTarget.ES2022,
    false,
    ts.ScriptKind.JS,
  );
  return file.externalModuleIndicator !== undefined;
}

module.exports = {
  canInstrument: false,
  getCacheKey(sourceText, sourcePath) {
    return crypto
      .createHash('sha256')
      .update(VERSION)
      .update(ts.version)
      .update(sourcePath)
      .update(sourceText)
      .digest('hex');
  },
  process(sourceText, sourcePath) {
    // A package marked "type": "module" can still hold CommonJS files (under a nested
    // package.json that says so): only a file with module syntax is an ES module.
    if (!isEsModule(sourceText, sourcePath)) return { code: sourceText };
    const { outputText } = ts.transpileModule(sourceText, {
      fileName: sourcePath,
      compilerOptions: {
        module: ts.ModuleKind.CommonJS,
        target: ts.ScriptTarget.ES2022,
        allowJs: true,
        esModuleInterop: true,
        sourceMap: false,
      },
      transformers: { before: [importMetaToCommonJs] },
      reportDiagnostics: false,
    });
    return { code: outputText };
  },
};
