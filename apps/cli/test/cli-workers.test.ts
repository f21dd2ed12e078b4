import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { TEST_REDIS_URL, cleanupPrefix, testPrefix } from '@arcflow/testing';
import { ARCFLOW_BIN, type WorkerProcess, spawnWorker } from '@arcflow/worker';
import { afterAll, describe, expect, it } from 'vitest';
import { runArcflow } from './run-arcflow.ts';

const EXAMPLE = new URL('../../../examples/weather-agent.ts', import.meta.url).pathname;
const CRASH = new URL('../../../packages/queue/test/fixtures/crash-agents.ts', import.meta.url).pathname;
const prefixes: string[] = [];
const workers: WorkerProcess[] = [];

function setup(name: string) {
  const prefix = testPrefix(name);
  prefixes.push(prefix);
  const env = { REDIS_URL: TEST_REDIS_URL, ARCFLOW_PREFIX: prefix, OPENAI_API_KEY: '', OPENAI_BASE_URL: '' };
  const arcflow = (...args: string[]) => runArcflow({ ...process.env, ...env }, ...args);
  const start = async (module: string, args: string[] = []) => {
    const worker = await spawnWorker(module, { env, args });
    workers.push(worker);
    return worker;
  };
  return { env, arcflow, start };
}

afterAll(async () => {
  await Promise.all(workers.map((worker) => worker.stop()));
  for (const prefix of prefixes) await cleanupPrefix(prefix);
});

describe('arcflow worker roles and run control', () => {
  it('splits provider and tool roles across processes, with --tools choosing the queues', async () => {
    const { arcflow, start } = setup('roles');
    const provider = await start(EXAMPLE, ['--roles', 'provider']);
    const tools = await start(EXAMPLE, ['--roles', 'tools', '--tools', 'get_weather,get_local_time,convert_currency', '--concurrency', '8']);
    const done = await arcflow('enqueue', 'travel_researcher', 'Trip to Oslo?', '--wait', '--json');
    expect(JSON.parse(done.stdout).status).toBe('completed');
    expect(provider.stderr() + tools.stderr()).not.toContain('error');
  });

  it('follows events live until the run ends, and cancels a running run', async () => {
    const { env, arcflow, start } = setup('follow');
    await start(CRASH);
    const enqueued = await arcflow('enqueue', 'crash_agent', 'go');
    const run_id = enqueued.stdout.trim();
    const follower = spawn(process.execPath, [ARCFLOW_BIN, 'events', run_id, '--follow', '--json'], { env: { ...process.env, ...env } });
    let followed = '';
    follower.stdout.on('data', (chunk: Buffer) => (followed += chunk.toString()));
    const followerDone = new Promise((resolve) => follower.on('exit', resolve));
    // The crash fixture's `block` tool never returns on its first execution: the run stays running.
    for (let tries = 0; tries < 100 && !followed.includes('"tool_name":"block"'); tries += 1) await new Promise((resolve) => setTimeout(resolve, 100));
    const cancelled = await arcflow('cancel', run_id);
    expect(cancelled.stdout.trim()).toBe(`cancelled ${run_id}`);
    expect(await followerDone).toBe(0);
    const lines = followed
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line));
    // Followed in batches read from offsets, the log still numbers 1..n.
    expect(lines.map((event) => event.seq)).toEqual(lines.map((_, index) => index + 1));
    const kinds = lines.map((event) => event.kind);
    expect(kinds[0]).toBe('RunEnqueued');
    expect(kinds.at(-1)).toBe('RunCancelled');
    expect(kinds).toContain('ToolCallFailed');
    const got = await arcflow('get', run_id, '--json');
    expect(JSON.parse(got.stdout).status).toBe('cancelled');
    const again = await arcflow('cancel', run_id);
    expect(again.stdout).toContain('had already ended (cancelled)');
  });

  it('keeps a worker serving when the reader of its stdout goes away', async () => {
    const { env, arcflow } = setup('closed-stdout');
    const worker = spawn(process.execPath, [ARCFLOW_BIN, 'worker', '--module', EXAMPLE], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    const exited = new Promise<number | null>((resolve) => worker.once('exit', resolve));
    worker.stdout.destroy(); // its ready line goes to a closed pipe
    try {
      // The worker registers its agents just before it prints the ready line; until then enqueue refuses.
      let enqueued = { code: 1, stdout: '' };
      for (let tries = 0; tries < 100 && enqueued.code !== 0; tries += 1) {
        if (tries > 0) await new Promise((resolve) => setTimeout(resolve, 100));
        enqueued = await arcflow('enqueue', 'travel_researcher', 'Oslo?', '--wait', '--json', '--timeout-ms', '20000');
      }
      expect(JSON.parse(enqueued.stdout).status).toBe('completed');
      expect(worker.exitCode).toBeNull();
    } finally {
      worker.kill('SIGTERM');
      await exited;
    }
  });

  it('refuses a missing module, a module with no definition (ES or CommonJS) and a bad --roles value with a clear message', async () => {
    const { arcflow } = setup('bad-worker');
    const missing = await arcflow('worker', '--module', 'does/not/exist.ts');
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/^arcflow: cannot load module 'does\/not\/exist\.ts': there is no file \/.*does\/not\/exist\.ts\n$/);
    // An ES-module .ts file where the nearest package.json is CommonJS (no "type": "module"): it loads, and the message says what it exports.
    const cjsPackage = mkdtempSync(join(tmpdir(), 'arcflow-cjs-'));
    writeFileSync(join(cjsPackage, 'package.json'), '{"name": "cjs-app"}');
    writeFileSync(join(cjsPackage, 'agents.ts'), 'export const answer: number = 42;\n');
    writeFileSync(join(cjsPackage, 'agents.cjs'), 'module.exports = { answer: 42 };\n');
    const esm = await arcflow('worker', '--module', join(cjsPackage, 'agents.ts'));
    const commonJs = await arcflow('worker', '--module', join(cjsPackage, 'agents.cjs'));
    rmSync(cjsPackage, { recursive: true });
    expect(esm.code).toBe(1);
    expect(esm.stderr).toContain("exports no Agent or Workflow (it exports 'answer'; export the new Agent(…) and new Workflow(…) values themselves)");
    expect(commonJs.code).toBe(1);
    expect(commonJs.stderr).toContain('exports no Agent or Workflow: Node loaded it as CommonJS, and its module.exports holds none');
    const roles = await arcflow('worker', '--module', EXAMPLE, '--roles', 'chef');
    expect(roles.code).toBe(1);
    expect(roles.stderr).toContain("roles must be a non-empty list of 'provider' and 'tools'");
    const unknownRun = await arcflow('get', 'run_nope');
    expect(unknownRun.code).toBe(1);
    expect(unknownRun.stderr).toContain("unknown run 'run_nope'");
  });
});
