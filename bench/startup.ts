// `npm run bench -- startup`: how long the arcflow command and a worker take to start, on a
// production install (the packed packages installed into an empty project), each against its
// floor measured in the same run: bare Node, Node with only what the command cannot do without,
// one Redis round trip.
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { REDIS_URL, type Row } from './lib.ts';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
/** Starts of each command and each floor; the median is reported. */
const TRIALS = 11;

const AGENT = `import { Agent, tool } from 'arcflow';
const echo = tool({
  name: 'echo',
  description: 'Echoes a word',
  input_schema: { type: 'object', properties: { word: { type: 'string' } }, required: ['word'] },
  handler: async ({ word }) => word,
});
export const greeter = new Agent({ name: 'greeter', instructions: 'Greet.', tools: [echo] });
`;
const AGENT_TS = AGENT.replace('async ({ word })', 'async ({ word }: { word: string })');
/** The floor of a read command: Node, ioredis, one round trip. */
const FLOOR_CLIENT = `import { Redis } from 'ioredis';
const redis = new Redis(process.env.REDIS_URL);
await redis.get('arcflow-bench-floor');
redis.disconnect();
`;
/** The floor of a worker: Node, the four libraries a worker cannot do without, one round trip. */
const FLOOR_WORKER = `import { Redis } from 'ioredis';
await Promise.all([import('bullmq'), import('openai'), import('ajv')]);
const redis = new Redis(process.env.REDIS_URL);
await redis.get('arcflow-bench-floor');
redis.disconnect();
console.log('ready');
`;

interface Project {
  readonly dir: string;
  readonly env: NodeJS.ProcessEnv;
}

/** The packed packages installed into an empty project, as a user installs them. */
function productionInstall(prefix: string): Project {
  execFileSync('npm', ['run', 'pack', '--silent'], { cwd: ROOT, stdio: ['ignore', 'ignore', 'inherit'] });
  const dir = mkdtempSync(join(tmpdir(), 'arcflow-startup-'));
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'startup-bench', private: true, type: 'module' }));
  writeFileSync(join(dir, 'agents.js'), AGENT);
  writeFileSync(join(dir, 'agents.ts'), AGENT_TS);
  writeFileSync(join(dir, 'floor-client.mjs'), FLOOR_CLIENT);
  writeFileSync(join(dir, 'floor-worker.mjs'), FLOOR_WORKER);
  const tarballs = join(ROOT, 'build/tarballs');
  const files = readdirSync(tarballs).map((file) => join(tarballs, file));
  execFileSync('npm', ['install', '--omit=dev', '--no-audit', '--no-fund', '--loglevel=error', ...files], { cwd: dir, stdio: ['ignore', 'ignore', 'inherit'] });
  // The command's shebang runs the `node` on PATH: the one running this bench.
  const env = {
    ...process.env,
    PATH: `${dirname(process.execPath)}${delimiter}${process.env.PATH ?? ''}`,
    REDIS_URL,
    ARCFLOW_PREFIX: prefix,
    OPENAI_BASE_URL: 'http://127.0.0.1:9/v1',
    OPENAI_API_KEY: 'bench',
    OTEL_EXPORTER_OTLP_ENDPOINT: '',
  };
  return { dir, env };
}

/** Seconds from spawn to exit. */
function timeCommand(project: Project, command: string, args: string[]): number {
  const started = process.hrtime.bigint();
  const result = spawnSync(command, args, { cwd: project.dir, env: project.env, stdio: ['ignore', 'ignore', 'pipe'] });
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  if (result.status !== 0) throw new Error(`${command} ${args.join(' ')} exited ${result.status}: ${result.stderr}`);
  return seconds;
}

/** Seconds from spawn to the line that says it is ready; then SIGTERM, and wait for the exit. */
async function timeReady(project: Project, command: string, args: string[], extraEnv: NodeJS.ProcessEnv = {}): Promise<number> {
  const started = process.hrtime.bigint();
  const child = spawn(command, args, { cwd: project.dir, env: { ...project.env, ...extraEnv }, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<void>((done) => child.once('exit', () => done()));
  const seconds = await new Promise<number>((ready, fail) => {
    child.stdout.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      if (/\bready\b/.test(output)) ready(Number(process.hrtime.bigint() - started) / 1e9);
    });
    void exited.then(() => fail(new Error(`${args.join(' ')} exited before it was ready:\n${output}`)));
  });
  child.kill('SIGTERM');
  await exited;
  return seconds;
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
const seconds = (value: number) => `${value.toFixed(3)} s`;

/** Alternates the measure and its floor, so that a change in the machine's load falls on both. */
async function paired(measure: () => number | Promise<number>, floor: () => number | Promise<number>): Promise<{ value: number; floor: number }> {
  const values: number[] = [];
  const floors: number[] = [];
  for (let trial = 0; trial < TRIALS; trial += 1) {
    floors.push(await floor());
    values.push(await measure());
  }
  return { value: median(values), floor: median(floors) };
}

function row(measure: string, floorName: string, result: { value: number; floor: number }, limit?: number): Row {
  const ratio = result.value / result.floor;
  return {
    measure,
    arcflow: seconds(result.value),
    baseline: `${seconds(result.floor)} (${floorName})`,
    ratio: `${ratio.toFixed(2)}x`,
    target: limit === undefined ? 'info' : `<= ${limit}x`,
    verdict: limit === undefined ? '-' : ratio <= limit ? 'yes' : 'NO',
  };
}

/** The startup rows: the command's quick paths, the read commands, and a worker's ready line. */
export async function startupRows(prefix: string, progress: (message: string) => void): Promise<Row[]> {
  progress('startup: packing and installing the packages into an empty project');
  const project = productionInstall(prefix);
  try {
    const arcflow = join(project.dir, 'node_modules/.bin/arcflow');
    const node = process.execPath;
    const bare = () => timeCommand(project, node, ['-e', '0']);
    const floorClient = () => timeCommand(project, node, ['floor-client.mjs']);
    const floorWorker = () => timeReady(project, node, ['floor-worker.mjs']);
    const rows: Row[] = [];
    progress('startup: arcflow --version and help');
    rows.push(row('arcflow --version', 'node -e 0', await paired(() => timeCommand(project, arcflow, ['--version']), bare), 2));
    rows.push(row('arcflow help', 'node -e 0', await paired(() => timeCommand(project, arcflow, ['help']), bare), 2));
    progress('startup: a worker, and a run for the read commands');
    const worker = spawn(arcflow, ['worker', '--module', 'agents.js'], { cwd: project.dir, env: project.env, stdio: ['ignore', 'pipe', 'inherit'] });
    await new Promise<void>((ready) => worker.stdout.on('data', (chunk: Buffer) => /\bready\b/.test(chunk.toString()) && ready()));
    const testMode = JSON.stringify({ test: { steps: { s1: { output: 'hello' } } } });
    const enqueued = execFileSync(arcflow, ['enqueue', 'greeter', 'hi', '--exec-config', testMode, '--wait', '--json'], { cwd: project.dir, env: project.env, encoding: 'utf8' });
    const run_id = (JSON.parse(enqueued) as { run_id: string }).run_id;
    worker.kill('SIGTERM');
    for (const args of [
      ['get', run_id],
      ['runs', '--limit', '5'],
      ['events', run_id],
      ['cancel', run_id],
    ]) {
      progress(`startup: arcflow ${args[0]}`);
      rows.push(
        row(`arcflow ${args.join(' ').replace(run_id, '<run_id>')}`, 'node + ioredis + 1 round trip', await paired(() => timeCommand(project, arcflow, args), floorClient), 1.5),
      );
    }
    const floorName = 'node + bullmq, ioredis, openai, ajv + 1 round trip';
    for (const module of ['agents.ts', 'agents.js']) {
      progress(`startup: a worker's ready line, ${module}`);
      rows.push(row(`worker ready, ${module}, tracing off`, floorName, await paired(() => timeReady(project, arcflow, ['worker', '--module', module]), floorWorker), 1.6));
    }
    progress('startup: a worker with tracing on');
    const tracing = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318' };
    rows.push(row('worker ready, agents.ts, tracing on', floorName, await paired(() => timeReady(project, arcflow, ['worker', '--module', 'agents.ts'], tracing), floorWorker)));
    return rows;
  } finally {
    rmSync(project.dir, { recursive: true, force: true });
  }
}
