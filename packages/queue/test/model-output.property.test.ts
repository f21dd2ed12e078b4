import type { ModelProvider, ProviderRequest, ProviderResponse } from '@arcflow/core';
import { silentLogger } from '@arcflow/core';
import { createClient, startWorker } from '@arcflow/queue';
import { TEST_REDIS_URL, cleanupPrefix, reply, testPrefix } from '@arcflow/testing';
import fc from 'fast-check';
import { afterAll, describe, it } from 'vitest';
import { expectRunSurvived, fuzzedAgent, modelTurns } from '../../core/test/model-output-arbitrary.ts';
import { FAST, collect } from './harness.ts';

const prefix = testPrefix('model-output');
/** Each run's turns, by its input: the model answers every run from its own script, then with text. */
const scripts = new Map<string, { turns: readonly ProviderResponse[]; next: number }>();
const provider: ModelProvider = {
  id: 'fuzz',
  defaultModel: 'm',
  complete: async (request: ProviderRequest) => {
    const input = request.messages.find((message) => message.role === 'user')?.content;
    const script = scripts.get(String(input));
    if (!script) throw new Error(`no script for input ${String(input)}`);
    const turn = script.turns[script.next] ?? reply('done');
    script.next += 1;
    return turn;
  },
};
const worker = await startWorker({ agents: [fuzzedAgent], provider, redis: TEST_REDIS_URL, prefix, logger: silentLogger, ...FAST, provider_attempts: 2, provider_backoff_ms: 1 });
const client = createClient({ redis: TEST_REDIS_URL, prefix });

afterAll(async () => {
  await client.close();
  await worker.close();
  await cleanupPrefix(prefix);
});

describe('any model output, through the queue engine (property)', () => {
  it('ends the run, ends every call exactly once, and keeps values and input-chosen keys out of every event', async () => {
    let runs = 0;
    await fc.assert(
      fc.asyncProperty(modelTurns, async (turns) => {
        runs += 1;
        const input = `fuzz ${runs}`;
        scripts.set(input, { turns, next: 0 });
        const { run_id } = await client.enqueue({ agent: fuzzedAgent.name, input });
        const run = await client.wait(run_id, { timeout_ms: 20_000 });
        expectRunSurvived({ ...run, events: await collect(client, run_id) });
      }),
      { numRuns: 200 },
    );
  });
});
