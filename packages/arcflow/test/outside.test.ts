import { execFile, spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { type FakeOpenAIServer, TEST_REDIS_URL, cleanupPrefix, startFakeOpenAI, testPrefix } from '@arcflow/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { anyModel } from './doc-snippets/any-model.ts';
import { codeBlocks } from './doc-snippets/extract.ts';
import { docBlocks, pageProjects, writeSnippets } from './doc-snippets/pages.ts';

const run = promisify(execFile);
const ROOT = resolve(new URL('../../..', import.meta.url).pathname);
const prefixes: string[] = [];
let project: string;
let clone: string;
let model: FakeOpenAIServer;

/** What a user writes: an agent with a tool, as TypeScript (strict, NodeNext) and as plain JavaScript. */
const AGENT_TS = `import { Agent, Workflow, tool, createClient, type RunRecord } from 'arcflow';

export const shout = tool({
  name: 'shout',
  description: 'Upper-cases a word',
  input_schema: { type: 'object', properties: { word: { type: 'string' } }, required: ['word'] },
  handler: async ({ word }: { word: string }) => word.toUpperCase(),
});

export const shouter = new Agent({ name: 'shouter_ts', instructions: 'Shout.', tools: [shout] });

export const shoutTwice = new Workflow({
  name: 'shout_flow_ts',
  steps: [
    { id: 'asked', agent: shouter },
    { id: 'again', tool: shout, depends_on: ['asked'], args: ({ outputs }) => ({ word: outputs.asked ?? '' }) },
  ],
});

export async function shoutOnce(input: string): Promise<RunRecord> {
  const client = createClient({ redis: process.env.REDIS_URL, prefix: process.env.ARCFLOW_PREFIX });
  try {
    const { run_id } = await client.enqueue({ agent: 'shouter_ts', input });
    return await client.wait(run_id, { timeout_ms: 30_000 });
  } finally {
    await client.close();
  }
}
`;
const AGENT_JS = `import { Agent, tool } from 'arcflow';

const shout = tool({
  name: 'shout',
  description: 'Upper-cases a word',
  input_schema: { type: 'object', properties: { word: { type: 'string' } }, required: ['word'] },
  handler: async ({ word }) => word.toUpperCase(),
});

export default new Agent({ name: 'shouter_js', instructions: 'Shout.', tools: [shout] });
`;
/** The same agent as CommonJS: `require` and `module.exports`. */
const AGENT_CJS = `const { Agent, tool } = require('arcflow');

const shout = tool({
  name: 'shout',
  description: 'Upper-cases a word',
  input_schema: { type: 'object', properties: { word: { type: 'string' } }, required: ['word'] },
  handler: async ({ word }) => word.toUpperCase(),
});

module.exports = { shouter: new Agent({ name: 'shouter_cjs', instructions: 'Shout.', tools: [shout] }) };
`;
/**
 * Preloaded into an arcflow command (NODE_OPTIONS=--import): writes every module URL the process
 * resolved to the file named by ARCFLOW_LOADED_OUT when it exits.
 */
const RECORD_LOADS = `import { registerHooks } from 'node:module';
import { writeFileSync } from 'node:fs';
const seen = new Set();
registerHooks({ resolve: (specifier, context, next) => { const resolved = next(specifier, context); seen.add(resolved.url); return resolved; } });
process.on('exit', () => writeFileSync(process.env.ARCFLOW_LOADED_OUT, [...seen].join('\\n')));
`;
const TSCONFIG = JSON.stringify({
  compilerOptions: { target: 'ES2022', module: 'NodeNext', moduleResolution: 'NodeNext', strict: true, noEmit: true, skipLibCheck: false, types: ['node'] },
  include: ['agents.ts'],
});

/** The model: one `shout` call, then text with the tool's result. */
function answer(body: Record<string, any>): { type: 'tools'; calls: { name: string; arguments: unknown }[] } | { type: 'text'; content: string } {
  const result = (body.messages as { role: string; content: string }[]).find((message) => message.role === 'tool');
  return result ? { type: 'text', content: `they said ${result.content}` } : { type: 'tools', calls: [{ name: 'shout', arguments: { word: 'hello' } }] };
}

async function arcflowIn(cwd: string, env: Record<string, string>, ...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run('npx', ['--no-install', 'arcflow', ...args], { cwd, env: { ...process.env, ...env }, timeout: 60_000 });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const failed = error as { code: number; stdout: string; stderr: string };
    return { code: failed.code, stdout: failed.stdout, stderr: failed.stderr };
  }
}

/** Starts `npx arcflow worker` in `cwd` and resolves once it says it is ready. */
function startWorker(cwd: string, module: string, env: Record<string, string>) {
  const child = spawn('npx', ['--no-install', 'arcflow', 'worker', '--module', module], {
    cwd,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  let output = '';
  const ready = new Promise<void>((resolveReady, reject) => {
    const timer = setTimeout(() => reject(new Error(`worker not ready:\n${output}`)), 60_000);
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      if (/ready: /.test(output)) {
        clearTimeout(timer);
        resolveReady();
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.once('exit', (code) => reject(new Error(`worker exited (${code}):\n${output}`)));
  });
  // npx runs the command in a child of its own: signal the whole group.
  return { ready, stop: () => process.kill(-child.pid!, 'SIGKILL') };
}

beforeAll(async () => {
  model = await startFakeOpenAI({ fallback: ({ body }) => answer(body) });
  // What is published: every package built and packed from this tree (unless ARCFLOW_PACKED says
  // where this tree's packages were packed already: .ci/run's smoke on other Node lines).
  if (!process.env.ARCFLOW_PACKED) await run('npm', ['run', 'pack', '--silent'], { cwd: ROOT, timeout: 120_000 });
  project = mkdtempSync(join(tmpdir(), 'arcflow-user-'));
  writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'user-project', private: true, type: 'module' }));
  writeFileSync(join(project, 'agents.ts'), AGENT_TS);
  writeFileSync(join(project, 'agents.js'), AGENT_JS);
  writeFileSync(join(project, 'agents.mjs'), AGENT_JS.replace("'shouter_js'", "'shouter_mjs'"));
  writeFileSync(join(project, 'agents.cjs'), AGENT_CJS);
  writeFileSync(join(project, 'record-loads.mjs'), RECORD_LOADS);
  writeFileSync(join(project, 'tsconfig.json'), TSCONFIG);
  const { stdout } = await run('sh', ['-c', `ls ${resolve(ROOT, process.env.ARCFLOW_PACKED ?? 'build/tarballs')}/*.tgz`]);
  await run('npm', ['install', '--no-audit', '--no-fund', ...stdout.trim().split('\n'), 'typescript@5.9.3', '@types/node@22.20.7', 'tsx@4.23.15'], {
    cwd: project,
    timeout: 300_000,
  });
}, 420_000);

afterAll(async () => {
  await model?.close();
  for (const prefix of prefixes) await cleanupPrefix(prefix);
  if (project) rmSync(project, { recursive: true, force: true });
  if (clone) rmSync(clone, { recursive: true, force: true });
}, 180_000);

describe('arcflow installed from its packages, outside the repository', () => {
  it("type-checks a user's TypeScript agent and client under strict NodeNext", async () => {
    const { stdout } = await run('npx', ['--no-install', 'tsc', '-p', 'tsconfig.json'], { cwd: project }).catch((error: { stdout: string }) => error);
    expect(stdout).toBe('');
  });

  it("names files that exist in a stack trace through the packages' source maps (--enable-source-maps)", async () => {
    const script = "import { Agent } from 'arcflow'; try { new Agent({ name: 'bad name!' }); } catch (error) { console.log(error.stack); }";
    const { stdout } = await run(process.execPath, ['--enable-source-maps', '--input-type=module', '-e', script], { cwd: project });
    const files = [...stdout.matchAll(/\((\/[^():]+):\d+:\d+\)/g)].map((match) => match[1]!).filter((file) => file.includes('node_modules'));
    // The frame that threw is arcflow's own TypeScript, mapped from dist/ to the sources shipped beside it.
    expect(files[0]).toMatch(/node_modules\/@arcflow\/core\/src\/.+\.ts$/);
    expect(files.filter((file) => !existsSync(file))).toEqual([]);
  });

  it('exposes arcflow/ai-sdk, which loads without the ai package (its peer dependency, needed for types only)', async () => {
    const { stdout } = await run(process.execPath, ['--input-type=module', '-e', "const m = await import('arcflow/ai-sdk'); console.log(typeof m.ArcflowChatTransport)"], {
      cwd: project,
    });
    expect(stdout.trim()).toBe('function');
  });

  it('serves a .js, an .mjs, a CommonJS .cjs and a .ts module with `npx arcflow worker`, against an OpenAI-compatible server', async () => {
    const prefix = testPrefix('outside');
    prefixes.push(prefix);
    const env = { REDIS_URL: TEST_REDIS_URL, ARCFLOW_PREFIX: prefix, OPENAI_BASE_URL: model.url, OPENAI_API_KEY: 'k' };
    for (const [module, agent] of [
      ['agents.js', 'shouter_js'],
      ['agents.mjs', 'shouter_mjs'],
      ['agents.cjs', 'shouter_cjs'],
      ['agents.ts', 'shouter_ts'],
    ] as const) {
      const worker = startWorker(project, module, env);
      try {
        await worker.ready;
        const enqueued = await arcflowIn(project, env, 'enqueue', agent, 'say hello', '--wait', '--json');
        expect(enqueued.stderr).toBe('');
        expect(JSON.parse(enqueued.stdout)).toMatchObject({ status: 'completed', output: 'they said HELLO', iterations: 2 });
        if (module === 'agents.ts') {
          const flow = await arcflowIn(project, env, 'enqueue', 'shout_flow_ts', 'say hello', '--wait', '--json');
          expect(JSON.parse(flow.stdout)).toMatchObject({ status: 'completed', output: 'THEY SAID HELLO', workflow: 'shout_flow_ts', iterations: 2 });
        }
      } finally {
        worker.stop();
      }
    }
    // The HTTP API and the console, served from the installed packages (the console's bundle is in them).
    const serve = spawn('npx', ['--no-install', 'arcflow', 'serve', '--port', '0'], {
      cwd: project,
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    try {
      const url = await new Promise<string>((resolveUrl, reject) => {
        let output = '';
        const timer = setTimeout(() => reject(new Error(`serve did not start:\n${output}`)), 60_000);
        const onData = (chunk: Buffer) => {
          output += chunk.toString();
          const match = /listening on (http:\/\/\S+) /.exec(output);
          if (match) {
            clearTimeout(timer);
            resolveUrl(match[1]!);
          }
        };
        serve.stdout!.on('data', onData);
        serve.stderr!.on('data', onData);
      });
      expect(await (await fetch(`${url}/readyz`)).json()).toEqual({ status: 'ready' });
      const script = await fetch(`${url}/console/app.js`);
      expect(script.status).toBe(200);
      expect((await script.text()).length).toBeGreaterThan(5_000);
      const agents = (await (await fetch(`${url}/v1/agents`)).json()) as { agents: { name: string }[] };
      expect(agents.agents.map((agent) => agent.name)).toContain('shout_flow_ts');
    } finally {
      process.kill(-serve.pid!, 'SIGKILL');
    }
    const version = await arcflowIn(project, env, '--version');
    expect(version.stdout.trim()).toBe('0.2.0');
  });

  it('loads only what a command uses: `get` no HTTP server, engine, BullMQ, ajv or tracing SDK; a worker no HTTP server, no OpenTelemetry package while tracing is off, and no Prometheus exporter without a metrics port', async () => {
    const prefix = testPrefix('loads');
    prefixes.push(prefix);
    const out = join(project, 'loaded.txt');
    const env = {
      REDIS_URL: TEST_REDIS_URL,
      ARCFLOW_PREFIX: prefix,
      OPENAI_BASE_URL: model.url,
      OPENAI_API_KEY: 'k',
      NODE_OPTIONS: '--import=./record-loads.mjs',
      ARCFLOW_LOADED_OUT: out,
    };
    const loaded = () => readFileSync(out, 'utf8').split('\n');
    // The installed command itself, not through npx (whose own process would record its modules too).
    const bin = join(project, 'node_modules/arcflow/bin/arcflow.js');
    /** Starts a worker of the installed command, waits for its ready line, stops it and waits for its exit. */
    const readyThenStopped = async (module: string, extraEnv: Record<string, string> = {}) => {
      const worker = spawn(process.execPath, [bin, 'worker', '--module', module], {
        cwd: project,
        env: { ...process.env, ...env, ...extraEnv },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let output = '';
      worker.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
      await new Promise<void>((resolveReady, reject) => {
        worker.stdout!.on('data', (chunk: Buffer) => {
          output += chunk.toString();
          if (/ ready: /.test(output)) resolveReady();
        });
        worker.once('exit', (code) => reject(new Error(`worker exited (${code}):\n${output}`)));
      });
      const exited = new Promise((resolveExit) => worker.once('exit', resolveExit));
      worker.kill('SIGTERM');
      await exited;
    };
    await readyThenStopped('agents.ts');
    const byWorker = loaded();
    expect(byWorker.some((url) => url.includes('/node_modules/bullmq/'))).toBe(true);
    expect(byWorker.filter((url) => /\/node_modules\/(fastify|@fastify|@opentelemetry\/[a-z-]+|@arcflow\/server)\//.test(url))).toEqual([]);
    // Traces and metrics over OTLP (to a server that refuses them): their exporters, and no Prometheus exporter (no metrics port).
    await readyThenStopped('agents.js', { OTEL_EXPORTER_OTLP_ENDPOINT: model.url });
    const byTracingWorker = loaded();
    expect(byTracingWorker.some((url) => url.includes('/node_modules/@opentelemetry/exporter-trace-otlp-http/'))).toBe(true);
    expect(byTracingWorker.some((url) => url.includes('/node_modules/@opentelemetry/exporter-metrics-otlp-http/'))).toBe(true);
    expect(byTracingWorker.filter((url) => url.includes('/node_modules/@opentelemetry/exporter-prometheus/'))).toEqual([]);
    const got = await run(process.execPath, [bin, 'get', 'run_not_there'], { cwd: project, env: { ...process.env, ...env } }).catch((error: { stderr: string }) => error);
    expect(got.stderr).toContain("unknown run 'run_not_there'");
    const byGet = loaded();
    expect(byGet.some((url) => url.includes('/node_modules/ioredis/'))).toBe(true);
    expect(
      byGet.filter((url) => /\/node_modules\/(fastify|@fastify|@opentelemetry\/sdk-[a-z-]+|@arcflow\/server|@arcflow\/worker|bullmq|ajv|jose|openai|tsx)\//.test(url)),
    ).toEqual([]);
  });

  it("runs the README's project as it says: tsc with its tsconfig.json, `npx tsx backend.ts` against a worker, and `node local.ts` where Node strips types", async () => {
    const readme = codeBlocks('README.md', readFileSync(join(ROOT, 'README.md'), 'utf8'));
    const dir = join(project, 'readme');
    mkdirSync(dir);
    for (const block of readme) if (block.file) writeFileSync(join(dir, block.file), block.code);
    const tsconfig = readme.find((block) => block.lang === 'json' && block.code.includes('compilerOptions'))!;
    writeFileSync(join(dir, 'tsconfig.json'), tsconfig.code);
    const checked = await run('npx', ['--no-install', 'tsc', '-p', 'readme/tsconfig.json'], { cwd: project }).catch((error: { stdout: string }) => error);
    expect(checked.stdout).toBe('');

    const anything = await startFakeOpenAI({ fallback: anyModel });
    const prefix = testPrefix('readme');
    prefixes.push(prefix);
    const env = { REDIS_URL: TEST_REDIS_URL, ARCFLOW_PREFIX: prefix, OPENAI_BASE_URL: anything.url, OPENAI_API_KEY: 'k' };
    const worker = startWorker(project, 'readme/agents.ts', env);
    try {
      await worker.ready;
      const backend = await run('npx', ['--no-install', 'tsx', 'backend.ts'], { cwd: dir, env: { ...process.env, ...env }, timeout: 60_000 });
      expect(backend.stdout).toContain('completed The tool said: 18°C in Oslo');
      // Node 22.18 and later run TypeScript files as they are (process.features.typescript: 'strip').
      if ((process.features as { typescript?: string }).typescript) {
        const local = await run(process.execPath, ['local.ts'], { cwd: dir, env: { ...process.env, ...env }, timeout: 60_000 });
        expect(local.stdout).toContain('The tool said: 18°C in Oslo');
      }
    } finally {
      worker.stop();
      await anything.close();
    }
  }, 240_000);

  it("type-checks every TypeScript block of README.md and docs/ against the installed packages' types, with the README's tsconfig.json", async () => {
    const blocks = docBlocks(ROOT);
    const dir = join(project, 'doc-snippets');
    writeSnippets(ROOT, dir, blocks, pageProjects(blocks));
    writeFileSync(join(dir, 'tsconfig.json'), blocks.find((block) => block.page === 'README.md' && block.lang === 'json' && block.code.includes('compilerOptions'))!.code);
    const checked = await run('npx', ['--no-install', 'tsc', '-p', 'doc-snippets/tsconfig.json'], { cwd: project }).catch((error: { stdout: string }) => error);
    expect(checked.stdout).toBe('');
  }, 240_000);

  it('starts a worker from a clean clone installed for production (npm ci --omit=dev) that serves a run', async () => {
    clone = mkdtempSync(join(tmpdir(), 'arcflow-clone-'));
    await run('git', ['clone', '-q', ROOT, clone]);
    await run('npm', ['ci', '--omit=dev', '--no-audit', '--no-fund'], { cwd: clone, timeout: 300_000 });
    const prefix = testPrefix('production');
    prefixes.push(prefix);
    const env = { REDIS_URL: TEST_REDIS_URL, ARCFLOW_PREFIX: prefix, OPENAI_BASE_URL: '', OPENAI_API_KEY: '' };
    const worker = startWorker(clone, 'examples/weather-agent.ts', env);
    try {
      await worker.ready;
      const enqueued = await arcflowIn(clone, env, 'enqueue', 'travel_researcher', 'Trip to Oslo?', '--wait', '--json');
      expect(JSON.parse(enqueued.stdout)).toMatchObject({ status: 'completed' });
      const briefing = await arcflowIn(clone, env, 'enqueue', 'city_briefing', 'Oslo', '--wait', '--json');
      expect(JSON.parse(briefing.stdout)).toMatchObject({ status: 'completed', output: expect.stringContaining('Briefing for Oslo') });
    } finally {
      worker.stop();
    }
  }, 300_000);
});
