import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import ts from 'typescript';
import type { CodeBlock, Project } from './extract.ts';

/** A snippet written to disk: the file, and how its lines map back to the page. */
export interface SnippetFile {
  readonly path: string;
  readonly block: CodeBlock;
  /** Lines the file has before the block's first line (a fragment's one line of context). */
  readonly offset: number;
}

/** Names a fragment may use without declaring them, and what they are. */
const CONTEXT: Readonly<Record<string, string>> = { client: 'ArcflowClient', run_id: 'string' };

/** Writes a project's files under `dir`. */
export function writeProject(dir: string, project: Project): SnippetFile[] {
  mkdirSync(dir, { recursive: true });
  return [...project.files].map(([name, block]) => {
    const path = join(dir, name);
    writeFileSync(path, block.code);
    return { path, block, offset: 0 };
  });
}

/**
 * Writes a fragment as a module of its own, after one line that imports what it uses of `arcflow`
 * and `arcflow/testing` and declares the context it uses (`client`, `run_id`, its `given` names)
 * without declaring them itself.
 */
export function writeFragment(path: string, block: CodeBlock, exports: ReadonlyMap<string, Export>): SnippetFile {
  const source = ts.createSourceFile(path, block.code, ts.ScriptTarget.ES2022, true);
  const declared = declaredNames(source);
  const used = usedNames(source);
  const given = new Map((block.marker.given ?? []).map((declaration) => [declaration.split(':')[0]!.trim(), declaration]));
  const imports = new Map<string, string[]>();
  const declares: string[] = [];
  const want = (name: string) => {
    const found = exports.get(name);
    if (!found || declared.has(name)) return;
    imports.set(found.from, [...(imports.get(found.from) ?? []), found.type ? `type ${name}` : name]);
  };
  for (const name of used) {
    if (declared.has(name)) continue;
    if (given.has(name)) declares.push(`declare const ${given.get(name)};`);
    else if (CONTEXT[name]) {
      declares.push(`declare const ${name}: ${CONTEXT[name]};`);
      want(CONTEXT[name]!);
    } else want(name);
  }
  const context = [...[...imports].map(([from, names]) => `import { ${[...new Set(names)].join(', ')} } from '${from}';`), ...declares, 'export {};'].join(' ');
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, `${context}\n${block.code}`);
  return { path, block, offset: 1 };
}

export interface Export {
  readonly from: string;
  readonly type: boolean;
}

/** What `arcflow` and `arcflow/testing` export, read from their entry files. */
export function packageExports(root: string): Map<string, Export> {
  const exports = new Map<string, Export>();
  for (const [from, file] of [
    ['arcflow/testing', 'packages/arcflow/src/testing.ts'],
    ['arcflow', 'packages/arcflow/src/index.ts'],
  ] as const) {
    const source = ts.createSourceFile(file, readFileSync(join(root, file), 'utf8'), ts.ScriptTarget.ES2022, true);
    for (const statement of source.statements) {
      if (!ts.isExportDeclaration(statement) || !statement.exportClause || !ts.isNamedExports(statement.exportClause)) continue;
      for (const element of statement.exportClause.elements) exports.set(element.name.text, { from, type: statement.isTypeOnly || element.isTypeOnly });
    }
  }
  return exports;
}

function declaredNames(source: ts.SourceFile): Set<string> {
  const names = new Set<string>();
  const bind = (name: ts.BindingName) => {
    if (ts.isIdentifier(name)) names.add(name.text);
    else for (const element of name.elements) if (!ts.isOmittedExpression(element)) bind(element.name);
  };
  for (const statement of source.statements) {
    if (ts.isImportDeclaration(statement)) {
      const clause = statement.importClause;
      if (clause?.name) names.add(clause.name.text);
      const bindings = clause?.namedBindings;
      if (bindings && ts.isNamedImports(bindings)) for (const element of bindings.elements) names.add(element.name.text);
      if (bindings && ts.isNamespaceImport(bindings)) names.add(bindings.name.text);
    } else if (ts.isVariableStatement(statement)) {
      for (const declaration of statement.declarationList.declarations) bind(declaration.name);
    } else if ((ts.isFunctionDeclaration(statement) || ts.isClassDeclaration(statement)) && statement.name) {
      names.add(statement.name.text);
    }
  }
  return names;
}

function usedNames(source: ts.SourceFile): Set<string> {
  const names = new Set<string>();
  const visit = (node: ts.Node) => {
    if (ts.isIdentifier(node)) names.add(node.text);
    ts.forEachChild(node, visit);
  };
  visit(source);
  return names;
}

/**
 * Type-checks the files as one program with the repository's compiler options (strict, NodeNext,
 * `arcflow` mapped to its sources), and returns each error as `page:line: message`.
 */
export function typeErrors(root: string, files: readonly SnippetFile[]): string[] {
  const config = ts.getParsedCommandLineOfConfigFile(join(root, 'tsconfig.json'), {}, { ...ts.sys, onUnRecoverableConfigFileDiagnostic: () => undefined });
  if (!config) throw new Error('tsconfig.json did not parse');
  const program = ts.createProgram(
    files.map((file) => file.path),
    config.options,
  );
  const byPath = new Map(files.map((file) => [file.path, file]));
  // The snippets' own diagnostics only: the packages' sources are checked by `npm run typecheck`.
  const errors = [
    ...program.getOptionsDiagnostics(),
    ...program.getGlobalDiagnostics(),
    ...files.flatMap((file) => {
      const source = program.getSourceFile(file.path)!;
      return [...program.getSyntacticDiagnostics(source), ...program.getSemanticDiagnostics(source)];
    }),
  ];
  return errors.map((diagnostic) => {
    const message = ts.flattenDiagnosticMessageText(diagnostic.messageText, '\n');
    if (!diagnostic.file || diagnostic.start === undefined) return message;
    const file = byPath.get(diagnostic.file.fileName)!;
    const { line } = diagnostic.file.getLineAndCharacterOfPosition(diagnostic.start);
    const at = line - file.offset;
    return `${file.block.page}:${at < 0 ? `${file.block.line} (context)` : file.block.line + at}: ${message}`;
  });
}
