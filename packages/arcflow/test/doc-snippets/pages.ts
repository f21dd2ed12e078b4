import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { type CodeBlock, type Project, codeBlocks, isTypeScript, projects } from './extract.ts';
import { type SnippetFile, packageExports, writeFragment, writeProject } from './typecheck.ts';

/** The code blocks of README.md and docs/*.md, read from the repository at `root`. */
export function docBlocks(root: string): CodeBlock[] {
  const docs = readdirSync(join(root, 'docs')).filter((name) => name.endsWith('.md'));
  return ['README.md', ...docs.map((name) => `docs/${name}`)].flatMap((page) => codeBlocks(page, readFileSync(join(root, page), 'utf8')));
}

/** Each page's projects, page by page. */
export function pageProjects(blocks: readonly CodeBlock[]): Project[] {
  const pages = [...new Set(blocks.map((block) => block.page))];
  return pages.flatMap((page) => projects(blocks.filter((block) => block.page === page)));
}

export interface WrittenSnippets {
  readonly files: readonly SnippetFile[];
  /** Where a project's files are. */
  dirOf(project: Project): string;
}

/**
 * Writes the TypeScript blocks under `dir`: each project in a folder of its own, each fragment a
 * file (with what it uses of the packages exported from `root`'s `arcflow`).
 */
export function writeSnippets(root: string, dir: string, blocks: readonly CodeBlock[], found: readonly Project[]): WrittenSnippets {
  const slug = (page: string) => page.replace(/\W+/g, '-');
  const dirOf = (project: Project) => join(dir, `${slug(project.page)}-${found.filter((other) => other.page === project.page).indexOf(project) + 1}`);
  const exports = packageExports(root);
  const fragments = blocks.filter((block) => isTypeScript(block) && !block.file && !block.marker.skip);
  const files = [
    ...found.flatMap((project) => writeProject(dirOf(project), project)),
    ...fragments.map((block) => writeFragment(join(dir, 'fragments', `${slug(block.page)}-${block.line}.ts`), block, exports)),
  ];
  return { files, dirOf };
}
