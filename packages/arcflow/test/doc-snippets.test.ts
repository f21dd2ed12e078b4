/**
 * Doc tests: every code block of README.md and docs/*.md is checked, so a snippet cannot drift
 * from the product.
 *
 * - A ```ts block whose first line is `// name.ts` is that file of the page's project; the named
 *   blocks of a page are written side by side and type-checked together, so `import … from
 *   './agents.ts'` finds the page's agents.ts. A block naming a file the project has already starts
 *   the page's next project, which keeps the other files.
 * - Any other ```ts block is a fragment: type-checked as a module of its own, with what it uses of
 *   `arcflow` and `arcflow/testing` imported and, unless it declares them, `client` (an
 *   `ArcflowClient`) and `run_id` (a string) declared.
 * - Type-checking uses the repository's compiler options (strict, NodeNext), with `arcflow` and
 *   `arcflow/testing` mapped to their entry files: a snippet sees what the package exports.
 * - ```json blocks must parse; ```sh, ```bash and ```console blocks (the `$ ` lines) may name only
 *   commands and flags that `arcflow help` lists, and only `npm run` scripts that package.json has.
 *
 * A marker, an HTML comment on the line before a block (invisible on GitHub), says more; several
 * are separated by `;`:
 *
 * - `<!-- doc-test: run -->` before a named block: once the project type-checks, the file runs with
 *   tsx and must exit 0 (`run prints "text"`: and print `text`). It runs with `OPENAI_BASE_URL` at a
 *   fake OpenAI-compatible server that calls the first tool offered, then answers; `REDIS_URL` at
 *   the test Redis and an `ARCFLOW_PREFIX` of its own.
 * - `<!-- doc-test: worker -->` before a named block: that file is served by `arcflow worker
 *   --module` while the project's run blocks run.
 * - `<!-- doc-test: given key: string, threadId: string -->` before a fragment: declares those names.
 * - `<!-- doc-test: skip <reason> -->`: the block is not checked; the reason is required.
 */
import { execFile } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { type FakeOpenAIServer, TEST_REDIS_URL, cleanupPrefix, startFakeOpenAI, testPrefix } from '@arcflow/testing';
import { type WorkerProcess, spawnWorker } from '@arcflow/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { anyModel } from './doc-snippets/any-model.ts';
import { commandLines, commandProblems, helpCommands } from './doc-snippets/commands.ts';
import { codeBlocks, isTypeScript } from './doc-snippets/extract.ts';
import { type WrittenSnippets, docBlocks, pageProjects, writeSnippets } from './doc-snippets/pages.ts';
import { type SnippetFile, typeErrors } from './doc-snippets/typecheck.ts';

const exec = promisify(execFile);
const ROOT = resolve(new URL('../../..', import.meta.url).pathname);
const TSX = join(ROOT, 'node_modules/.bin/tsx');
/** Under the repository, so that tsx and the worker resolve `arcflow` through tsconfig.json's paths. */
const DIR = join(ROOT, '.doc-snippets', `${process.pid}-${Math.random().toString(36).slice(2, 8)}`);

/** A page with a mistake of each kind, to show that the checks find them (and a fragment whose marker declares what it uses). */
const BROKEN = [
  '# Mistakes',
  '',
  '```ts',
  '// agents.ts',
  "import { Agent } from 'arcflow';",
  "export const helper = new Agent({ name: 'helper', instructionz: 'Help.' });",
  '```',
  '',
  '```ts',
  "const { run_id } = await client.enqueue({ agent: 'helper', input: 'Hi', idempotency: 'k' });",
  'console.log(run_id, undefinedName);',
  '```',
  '',
  '```sh',
  'npx arcflow enqueue helper Hi --wiat',
  'npx arcflow frobnicate && npm run nothing',
  '```',
  '',
  '<!-- doc-test: given key: string -->',
  '',
  '```ts',
  'console.log(key.toUpperCase()); // declared by its marker: no error',
  '```',
  '',
].join('\n');

const prefixes: string[] = [];
const blocks = docBlocks(ROOT);
const projects = pageProjects(blocks);
let written: WrittenSnippets;
let brokenSnippets: SnippetFile[] = [];
let model: FakeOpenAIServer;

beforeAll(async () => {
  mkdirSync(DIR, { recursive: true });
  written = writeSnippets(ROOT, DIR, blocks, projects);
  const broken = codeBlocks('broken.md', BROKEN);
  brokenSnippets = [...writeSnippets(ROOT, join(DIR, 'broken'), broken, pageProjects(broken)).files];
  model = await startFakeOpenAI({ fallback: anyModel });
});

afterAll(async () => {
  await model?.close();
  for (const prefix of prefixes) await cleanupPrefix(prefix);
  rmSync(DIR, { recursive: true, force: true });
});

describe('the code blocks of README.md and docs/', () => {
  it('are found, each TypeScript block written as a file of its page or a fragment, unless skipped', () => {
    const typescript = blocks.filter(isTypeScript);
    expect(typescript.length).toBeGreaterThan(20);
    const checked = new Set(written.files.map((file) => file.block));
    expect(typescript.filter((block) => !checked.has(block) && !block.marker.skip).map((block) => `${block.page}:${block.line}`)).toEqual([]);
  });

  it('type-check against the arcflow package (and the mistakes of a broken page are found, at their lines)', () => {
    const errors = typeErrors(ROOT, [...written.files, ...brokenSnippets]);
    expect(errors.filter((error) => !error.startsWith('broken.md:'))).toEqual([]);
    expect(errors.filter((error) => error.startsWith('broken.md:'))).toEqual([
      expect.stringMatching(/^broken\.md:6: Object literal may only specify known properties.*'instructionz'/),
      expect.stringMatching(/^broken\.md:10: Object literal may only specify known properties.*'idempotency'/),
      expect.stringMatching(/^broken\.md:11: Cannot find name 'undefinedName'/),
    ]);
  });

  it('hold JSON that parses in their json blocks', () => {
    const broken = blocks
      .filter((block) => block.lang === 'json' && !block.marker.skip)
      .flatMap((block) => {
        try {
          JSON.parse(block.code);
          return [];
        } catch (error) {
          return [`${block.page}:${block.line}: ${(error as Error).message}`];
        }
      });
    expect(broken).toEqual([]);
  });

  it("name only the arcflow commands and flags that `arcflow help` lists, and package.json's scripts", async () => {
    const { stdout } = await exec(TSX, [join(ROOT, 'apps/cli/src/main.ts'), 'help']);
    const arcflow = helpCommands(stdout);
    expect([...arcflow.keys()]).toContain('enqueue');
    const scripts = new Set(Object.keys((JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { scripts: object }).scripts));
    const shells = blocks.filter((block) => ['sh', 'bash', 'console'].includes(block.lang) && !block.marker.skip);
    const problems = shells.flatMap((block) =>
      commandLines(block).flatMap((line) => commandProblems(line, arcflow, scripts).map((problem) => `${block.page}:${line.line}: ${problem}`)),
    );
    expect(problems).toEqual([]);
    const mistakes = commandLines(codeBlocks('broken.md', BROKEN)[2]!).flatMap((line) => commandProblems(line, arcflow, scripts).map((problem) => `${line.line}: ${problem}`));
    expect(mistakes).toEqual(['15: arcflow enqueue has no flag --wiat', "16: arcflow has no command 'frobnicate'", "16: package.json has no script 'nothing'"]);
  });
});

describe.concurrent('the runnable snippets', () => {
  const runnable = projects.map((project) => ({ project, runs: [...project.own].filter((name) => project.files.get(name)!.marker.run) })).filter(({ runs }) => runs.length > 0);

  it('are some', () => {
    expect(runnable.flatMap(({ runs }) => runs).length).toBeGreaterThan(2);
  });

  // A project's workers serve all its run blocks; projects run side by side.
  for (const { project, runs } of runnable) {
    it(`${project.page}: ${runs.join(', ')} run against a fake model`, async () => {
      const dir = written.dirOf(project);
      const prefix = testPrefix('docs');
      prefixes.push(prefix);
      const env = { REDIS_URL: TEST_REDIS_URL, ARCFLOW_PREFIX: prefix, OPENAI_BASE_URL: model.url, OPENAI_API_KEY: 'test-key' };
      const workers: WorkerProcess[] = [];
      try {
        for (const [file, served] of project.files) if (served.marker.worker) workers.push(await spawnWorker(join(dir, file), { env, readyTimeoutMs: 90_000 }));
        await Promise.all(
          runs.map(async (name) => {
            const block = project.files.get(name)!;
            const ran = await exec(TSX, [join(dir, name)], { cwd: dir, env: { ...process.env, ...env }, timeout: 150_000 }).catch(
              (error: { code: number; stdout: string; stderr: string }) => error,
            );
            const output = `${ran.stdout}${ran.stderr}`;
            expect('code' in ran ? `${block.page}:${block.line} ${name} exited ${ran.code}:\n${output}` : 'exit 0').toBe('exit 0');
            if (block.marker.run?.prints) expect(output, `${block.page}:${block.line} ${name}`).toContain(block.marker.run.prints);
          }),
        );
      } finally {
        await Promise.all(workers.map((worker) => worker.stop()));
      }
    }, 240_000);
  }
});
