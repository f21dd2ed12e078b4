/** The code blocks of a Markdown page, with the doc-test markers before them (see ../doc-snippets.test.ts). */

export interface CodeBlock {
  /** The page, relative to the repository root. */
  readonly page: string;
  /** The 1-based line of the block's first code line in the page. */
  readonly line: number;
  readonly lang: string;
  readonly code: string;
  /** The file the block is, from a first line `// name.ts`; none for a fragment. */
  readonly file?: string;
  readonly marker: Marker;
}

export interface Marker {
  /** Not checked, for the reason given. */
  readonly skip?: string;
  /** Run with tsx against the fake model; its output must contain `prints`, when given. */
  readonly run?: { readonly prints?: string };
  /** Served by a worker while the project's run blocks run. */
  readonly worker?: boolean;
  /** Declarations a fragment is checked with (`given key: string, threadId: string`). */
  readonly given?: readonly string[];
}

/** One page's files that belong together: a later block naming a file again starts the next project. */
export interface Project {
  readonly page: string;
  readonly files: ReadonlyMap<string, CodeBlock>;
  /** The files this project's own blocks gave (the others it keeps from the project before). */
  readonly own: ReadonlySet<string>;
}

const FENCE = /^(\s*)```(\S*)\s*$/;
const MARKER = /^\s*<!--\s*doc-test:\s*(.*?)\s*-->\s*$/;
const FILE_NAME = /^\/\/ ([\w.-]+\.m?ts)\s*$/;
const TS_LANGS = new Set(['ts', 'typescript']);

export function codeBlocks(page: string, markdown: string): CodeBlock[] {
  const lines = markdown.split('\n');
  const blocks: CodeBlock[] = [];
  for (let index = 0; index < lines.length; index++) {
    const open = FENCE.exec(lines[index]!);
    if (!open) continue;
    const indent = open[1]!.length;
    const end = lines.findIndex((line, at) => at > index && line.trim() === '```');
    if (end === -1) throw new Error(`${page}:${index + 1}: a code block is not closed`);
    const code = lines
      .slice(index + 1, end)
      .map((line) => line.slice(indent))
      .join('\n');
    const lang = open[2]!;
    const fileName = TS_LANGS.has(lang) ? FILE_NAME.exec(code.split('\n')[0] ?? '')?.[1] : undefined;
    blocks.push({ page, line: index + 2, lang, code: `${code}\n`, file: fileName, marker: markerBefore(page, lines, index) });
    index = end;
  }
  return blocks;
}

function markerBefore(page: string, lines: readonly string[], fence: number): Marker {
  let at = fence - 1;
  while (at >= 0 && lines[at]!.trim() === '') at--;
  const found = at >= 0 ? MARKER.exec(lines[at]!) : null;
  if (!found) return {};
  const marker: { skip?: string; run?: { prints?: string }; worker?: boolean; given?: string[] } = {};
  for (const part of found[1]!.split(';').map((text) => text.trim())) {
    const [word = '', ...rest] = part.split(/\s+/);
    const argument = rest.join(' ');
    if (word === 'skip' && argument) marker.skip = argument;
    else if (word === 'run') marker.run = argument ? { prints: /^prints "(.*)"$/.exec(argument)?.[1] ?? badMarker(page, at, part) } : {};
    else if (word === 'worker' && !argument) marker.worker = true;
    else if (word === 'given' && argument) marker.given = argument.split(',').map((declaration) => declaration.trim());
    else badMarker(page, at, part);
  }
  return marker;
}

function badMarker(page: string, at: number, part: string): never {
  throw new Error(`${page}:${at + 1}: unknown doc-test marker '${part}' (skip <reason>; run [prints "<text>"]; worker; given <name: type>, …)`);
}

export const isTypeScript = (block: CodeBlock): boolean => TS_LANGS.has(block.lang);

/** A page's named TypeScript blocks as projects; a block naming a file already in the project starts a new one that keeps the others. */
export function projects(blocks: readonly CodeBlock[]): Project[] {
  const found: Project[] = [];
  let files = new Map<string, CodeBlock>();
  let own = new Set<string>();
  for (const block of blocks) {
    if (!isTypeScript(block) || !block.file || block.marker.skip) continue;
    if (files.has(block.file)) {
      found.push({ page: block.page, files, own });
      files = new Map(files);
      own = new Set();
    }
    files.set(block.file, block);
    own.add(block.file);
  }
  if (files.size > 0) found.push({ page: blocks[0]!.page, files, own });
  return found;
}
