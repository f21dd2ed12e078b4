import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { createClient } from '@arcflow/queue';
import { type FakeOpenAIServer, TEST_REDIS_URL, cleanupPrefix, startFakeOpenAI, testPrefix } from '@arcflow/testing';
import { ARCFLOW_BIN, type WorkerProcess, spawnWorker } from '@arcflow/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const run = promisify(execFile);
const fixture = (name: string) => new URL(`./fixtures/${name}.ts`, import.meta.url).pathname;
const prefix = testPrefix('worker-options');
const env = { REDIS_URL: TEST_REDIS_URL, ARCFLOW_PREFIX: prefix, OPENAI_API_KEY: '', OPENAI_BASE_URL: '' };
let fast: FakeOpenAIServer;
let hosted: FakeOpenAIServer;
const workers: WorkerProcess[] = [];

beforeAll(async () => {
  fast = await startFakeOpenAI({ fallback: () => ({ type: 'text', content: 'from fast' }) });
  hosted = await startFakeOpenAI({ fallback: () => ({ type: 'text', content: 'from hosted' }) });
});

afterAll(async () => {
  await Promise.all(workers.map((worker) => worker.stop()));
  await Promise.all([fast?.close(), hosted?.close()]);
  await cleanupPrefix(prefix);
});

/** `arcflow worker --module <fixture>` run to its end: it should refuse to start. */
async function refusedStart(name: string, extra: Record<string, string> = {}): Promise<{ code: number; stderr: string }> {
  return run(process.execPath, [ARCFLOW_BIN, 'worker', '--module', fixture(name)], { env: { ...process.env, ...env, ...extra }, timeout: 30_000 }).then(
    () => ({ code: 0, stderr: '' }),
    (error: { code: number; stderr: string }) => ({ code: error.code, stderr: error.stderr }),
  );
}

describe("a module's worker_options", () => {
  it('serves two agents on two named providers in one worker process, each reaching only its own server', async () => {
    const worker = await spawnWorker(fixture('two-providers'), { env: { ...env, FAST_URL: fast.url, HOSTED_URL: hosted.url } });
    workers.push(worker);
    const client = createClient({ redis: TEST_REDIS_URL, prefix });
    try {
      const runs = await Promise.all(['triage', 'writer', 'triage', 'writer'].map((agent) => client.enqueue({ agent, input: 'hello' })));
      const done = await Promise.all(runs.map(({ run_id }) => client.wait(run_id, { timeout_ms: 30_000 })));
      expect(done.map((record) => record.output)).toEqual(['from fast', 'from hosted', 'from fast', 'from hosted']);
      expect(fast.requests.map((request) => request.body.model)).toEqual(['small-model', 'small-model']);
      expect(hosted.requests.map((request) => request.body.model)).toEqual(['big-model', 'big-model']);
      expect(hosted.requests.every((request) => request.body.temperature === 0.4)).toBe(true);
      expect(fast.requests.some((request) => 'temperature' in request.body)).toBe(false);
      const events = [];
      for await (const event of client.events(runs[1]!.run_id)) events.push(event);
      expect(events.find((event) => event.kind === 'ProviderResponseReceived')).toMatchObject({ provider_id: 'hosted', model_id: 'big-model' });
    } finally {
      await client.close();
    }
  });

  it('refuses to start, in one line and exit 1, a worker whose agent names a provider it does not hold', async () => {
    const refused = await refusedStart('missing-provider');
    expect(refused.code).toBe(1);
    expect(refused.stderr.trim()).toBe("arcflow: agent 'writer' uses provider 'hosted', which this worker does not hold (it holds: local)");
  });

  it('refuses a misspelt worker_options key, naming it and the nearest known one', async () => {
    const refused = await refusedStart('bad-worker-options');
    expect(refused.code).toBe(1);
    expect(refused.stderr.trim()).toMatch(/^arcflow: unknown option 'provider' in worker_options of '.*bad-worker-options\.ts'; did you mean 'providers'\?$/);
  });

  it('refuses a worker_options value that is null, 0 or false, naming the option, as startWorker does', async () => {
    const refusals = await Promise.all(
      [{ pricing: null }, { tenant_limits: 0 }, { tenant_budgets: false }, { tenant_weights: null }, { providers: null }].map((options) =>
        refusedStart('falsy-worker-options', { WORKER_OPTIONS_JSON: JSON.stringify(options) }),
      ),
    );
    for (const [index, name] of ['pricing', 'tenant_limits', 'tenant_budgets', 'tenant_weights', 'providers'].entries()) {
      expect(refusals[index]!.code, name).toBe(1);
      expect(refusals[index]!.stderr.trim()).toMatch(new RegExp(`^arcflow: ${name} must be`));
    }
  });
});
