import { createClient } from '@arcflow/queue';
import { TEST_REDIS_URL, cleanupPrefix, testPrefix } from '@arcflow/testing';
import { type WorkerProcess, spawnWorker } from '@arcflow/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnServe, type ServeProcess } from '../../server/test/harness.ts';
import { runArcflow } from './run-arcflow.ts';

const EXAMPLE = new URL('../../../examples/weather-agent.ts', import.meta.url).pathname;
const prefix = testPrefix('model-refusals');
const env = { REDIS_URL: TEST_REDIS_URL, ARCFLOW_PREFIX: prefix, OPENAI_API_KEY: '', OPENAI_BASE_URL: '' };
let worker: WorkerProcess;
let serve: ServeProcess;

beforeAll(async () => {
  // The worker registers the example's agents, so the refusals below are about the settings alone.
  worker = await spawnWorker(EXAMPLE, { env });
  serve = await spawnServe(env);
});

afterAll(async () => {
  await Promise.all([worker?.stop(), serve?.stop()]);
  await cleanupPrefix(prefix);
});

/** A bad `config.model_settings` and the sentence it is refused with. */
const REFUSED: [unknown, string][] = [
  [{ temperature: 5 }, 'config.model_settings.temperature: expected a number from 0 to 2'],
  [{ temprature: 0.2 }, "config.model_settings has unknown key 'temprature'; did you mean 'temperature'?"],
  [{ extra_body: { model: 'other' } }, "config.model_settings.extra_body: may not set 'model' (arcflow sets it)"],
  [{ tool_choice: { name: 'no_such_tool' } }, "config.model_settings.tool_choice: names 'no_such_tool', which is not one of the agent's tools"],
];

describe('model settings refused at enqueue from the CLI and over HTTP, naming the key, with nothing queued', () => {
  it('refuses each through `arcflow enqueue --config`', async () => {
    for (const [settings, sentence] of REFUSED) {
      const refused = await runArcflow({ ...process.env, ...env }, 'enqueue', 'travel_researcher', 'Trip?', '--config', JSON.stringify({ model_settings: settings }));
      expect(refused.code).toBe(1);
      expect(refused.stderr).toContain(`arcflow: ${sentence}`);
    }
  });

  it('refuses each through POST /v1/runs as a 400 problem', async () => {
    for (const [settings, sentence] of REFUSED) {
      const response = await fetch(`${serve.url}/v1/runs`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ agent: 'travel_researcher', input: 'Trip?', config: { model_settings: settings } }),
      });
      expect(response.status).toBe(400);
      expect(((await response.json()) as { detail: string }).detail).toContain(sentence);
    }
    const client = createClient({ redis: TEST_REDIS_URL, prefix });
    try {
      expect((await client.list()).runs).toEqual([]);
    } finally {
      await client.close();
    }
  });
});
