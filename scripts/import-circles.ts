/**
 * Finds import circles among the sources of the workspace: `npx tsx scripts/import-circles.ts` prints each
 * one and exits 1 if there is any. An edge is every static `import`, `import type`, `export ... from` and
 * `import('...')` type reference (a circle closed only through types still leaves no file that can be read
 * first); a dynamic `import()` call is a lazy load and is not an edge. Relative specifiers are resolved to
 * files, workspace package names through the `paths` of tsconfig.base.json; anything else is outside.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');

/** The folders whose sources are checked by default: every package's and app's `src`. */
export function workspaceSourceRoots(root: string = ROOT): string[] {
  const roots: string[] = [];
  for (const parent of ['packages', 'apps']) {
    const dir = join(root, parent);
    if (!existsSync(dir)) continue;
    for (const name of readdirSync(dir).sort()) {
      const src = join(dir, name, 'src');
      if (existsSync(src) && statSync(src).isDirectory()) roots.push(src);
    }
  }
  return roots;
}

/** Workspace package names and their source entry files, from tsconfig.base.json's `paths`. */
export function workspaceAliases(root: string = ROOT): Map<string, string> {
  const config = JSON.parse(readFileSync(join(root, 'tsconfig.base.json'), 'utf8')) as { compilerOptions?: { paths?: Record<string, string[]> } };
  const aliases = new Map<string, string>();
  for (const [name, targets] of Object.entries(config.compilerOptions?.paths ?? {})) {
    if (targets[0] !== undefined) aliases.set(name, resolve(root, targets[0]));
  }
  return aliases;
}

function sourceFiles(dir: string, into: string[] = []): string[] {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) {
      if (entry.name !== 'node_modules') sourceFiles(path, into);
    } else if (/\.(ts|tsx|mts|cts)$/.test(entry.name) && !entry.name.endsWith('.d.ts')) {
      into.push(path);
    }
  }
  return into;
}

/** The specifiers a file imports statically, type-only imports included. */
export function importedSpecifiers(path: string): string[] {
  const file = ts.createSourceFile(path, readFileSync(path, 'utf8'), ts.ScriptTarget.Latest, false);
  const specifiers: string[] = [];
  const visit = (node: ts.Node): void => {
    if ((ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) && node.moduleSpecifier && ts.isStringLiteral(node.moduleSpecifier)) {
      specifiers.push(node.moduleSpecifier.text);
    } else if (ts.isImportEqualsDeclaration(node) && ts.isExternalModuleReference(node.moduleReference) && ts.isStringLiteral(node.moduleReference.expression)) {
      specifiers.push(node.moduleReference.expression.text);
    } else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument) && ts.isStringLiteral(node.argument.literal)) {
      specifiers.push(node.argument.literal.text);
    }
    ts.forEachChild(node, visit);
  };
  visit(file);
  return specifiers;
}

function resolveSpecifier(from: string, specifier: string, aliases: Map<string, string>): string | undefined {
  const aliased = aliases.get(specifier);
  if (aliased !== undefined) return aliased;
  if (!specifier.startsWith('.')) return undefined;
  const base = resolve(dirname(from), specifier);
  const candidates = [base, base.replace(/\.(js|mjs|cjs)$/, (ext) => ext.replace('j', 't')), `${base}.ts`, `${base}.tsx`, join(base, 'index.ts')];
  return candidates.find((candidate) => existsSync(candidate) && statSync(candidate).isFile());
}

/** Each file's imports among the checked files. */
export function importGraph(roots: readonly string[], aliases: Map<string, string> = workspaceAliases()): Map<string, string[]> {
  const files = roots.flatMap((root) => sourceFiles(root)).sort();
  const known = new Set(files);
  const graph = new Map<string, string[]>();
  for (const file of files) {
    const targets = importedSpecifiers(file)
      .map((specifier) => resolveSpecifier(file, specifier, aliases))
      .filter((target): target is string => target !== undefined && known.has(target));
    graph.set(file, [...new Set(targets)].sort());
  }
  return graph;
}

/** The strongly connected groups of more than one file (or a file importing itself), by Tarjan's algorithm. */
function stronglyConnected(graph: Map<string, string[]>): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const groups: string[][] = [];
  let next = 0;
  const connect = (file: string): void => {
    index.set(file, next);
    low.set(file, next);
    next++;
    stack.push(file);
    onStack.add(file);
    for (const target of graph.get(file) ?? []) {
      if (!index.has(target)) {
        connect(target);
        low.set(file, Math.min(low.get(file)!, low.get(target)!));
      } else if (onStack.has(target)) {
        low.set(file, Math.min(low.get(file)!, index.get(target)!));
      }
    }
    if (low.get(file) !== index.get(file)) return;
    const group: string[] = [];
    let member: string;
    do {
      member = stack.pop()!;
      onStack.delete(member);
      group.push(member);
    } while (member !== file);
    if (group.length > 1 || (graph.get(file) ?? []).includes(file)) groups.push(group.sort());
  };
  for (const file of graph.keys()) if (!index.has(file)) connect(file);
  return groups;
}

/** The shortest way from a file back to itself inside its group: one concrete loop to read. */
function shortestLoop(start: string, group: Set<string>, graph: Map<string, string[]>): string[] {
  const previous = new Map<string, string>();
  const queue = [start];
  for (let i = 0; i < queue.length; i++) {
    const file = queue[i]!;
    for (const target of graph.get(file) ?? []) {
      if (!group.has(target)) continue;
      if (target === start) {
        const loop = [file];
        while (loop[0] !== start) loop.unshift(previous.get(loop[0]!)!);
        return [...loop, start];
      }
      if (!previous.has(target)) {
        previous.set(target, file);
        queue.push(target);
      }
    }
  }
  return [start];
}

export interface ImportCircle {
  /** Every file of the circle, relative to the root, sorted. */
  files: string[];
  /** One loop through the circle, from its first file back to it. */
  loop: string[];
}

/** The import circles among the sources under `roots` (paths reported relative to `root`). */
export function findImportCircles(roots: readonly string[] = workspaceSourceRoots(), root: string = ROOT, aliases?: Map<string, string>): ImportCircle[] {
  const graph = importGraph(roots, aliases ?? workspaceAliases(root));
  const name = (file: string) => relative(root, file).split('\\').join('/');
  return stronglyConnected(graph)
    .map((group) => ({ files: group.map(name), loop: shortestLoop(group[0]!, new Set(group), graph).map(name) }))
    .sort((a, b) => a.files[0]!.localeCompare(b.files[0]!));
}

/** The circles as a reader wants them: each one's files and one loop through it. */
export function describeCircles(circles: readonly ImportCircle[]): string {
  return circles
    .map((circle, i) => `Import circle ${i + 1} (${circle.files.length} files):\n${circle.files.map((file) => `  ${file}`).join('\n')}\n  one loop: ${circle.loop.join(' -> ')}`)
    .join('\n\n');
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const circles = findImportCircles();
  if (circles.length === 0) {
    console.log('No import circles.');
  } else {
    console.log(describeCircles(circles));
    process.exitCode = 1;
  }
}
