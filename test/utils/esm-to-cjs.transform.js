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

const VERSION = '2';

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

/** Replaces `import.meta.x` by its CommonJS twin (a bare `import.meta` by an object of them). */
function importMetaToCommonJs(context) {
  const meta = metaExpressions(context.factory);
  const visit = (node) => {
    if (ts.isPropertyAccessExpression(node) && isImportMeta(node.expression)) {
      const make = meta[node.name.text];
      if (make !== undefined) return make();
    }
    if (isImportMeta(node)) {
      return context.factory.createObjectLiteralExpression(
        Object.entries(meta).map(([name, make]) =>
          context.factory.createPropertyAssignment(name, make()),
        ),
      );
    }
    return ts.visitEachChild(node, visit, context);
  };
  return (sourceFile) => ts.visitNode(sourceFile, visit);
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
