import { Agent, type ModelProvider, type ProviderRequest, silentLogger } from '@arcflow/core';
import { createClient, startWorker } from '@arcflow/queue';
import { TEST_REDIS_URL, cleanupPrefix, reply, testPrefix } from '@arcflow/testing';
import { afterAll, describe, expect, it } from 'vitest';

// A run in test mode with a given output, on a thread (SPEC §3, §11): it completes as an answer
// would, so the thread holds its input and its output, and the thread's next run sees them.

const prefix = testPrefix('thread-test-mode');
afterAll(() => cleanupPrefix(prefix));

function notingProvider(): ModelProvider & { requests: ProviderRequest[] } {
  const requests: ProviderRequest[] = [];
  return { id: 'real', defaultModel: 'real-model', requests, complete: async (request) => (requests.push(request), reply('second answer')) };
}

describe('a given output on a thread', () => {
  it("appends the run's input and its given output to the thread; the next run is asked with them; an output its schema refuses appends nothing", async () => {
    const chat = new Agent({ name: 'tt_chat', instructions: 'Chat along.' });
    const typed = new Agent({ name: 'tt_typed', output_schema: { type: 'object', properties: { n: { type: 'number' } }, required: ['n'] } });
    const provider = notingProvider();
    const worker = await startWorker({ agents: [chat, typed], provider, redis: TEST_REDIS_URL, prefix, logger: silentLogger });
    const client = createClient({ redis: TEST_REDIS_URL, prefix });
    try {
      const given = { test: { steps: { s1: { output: 'fixed answer' } } } };
      const first = await client.enqueue({ agent: 'tt_chat', input: 'first question', thread_id: 'tt1', exec_config: given });
      expect(await client.wait(first.run_id, { timeout_ms: 20_000 })).toMatchObject({ status: 'completed', output: 'fixed answer' });
      expect(await client.thread('tt1').messages()).toEqual([
        { role: 'user', content: 'first question' },
        { role: 'assistant', content: 'fixed answer' },
      ]);
      const second = await client.enqueue({ agent: 'tt_chat', input: 'second question', thread_id: 'tt1' });
      expect((await client.wait(second.run_id, { timeout_ms: 20_000 })).status).toBe('completed');
      expect(provider.requests[0]?.messages.slice(1)).toEqual([
        { role: 'user', content: 'first question' },
        { role: 'assistant', content: 'fixed answer' },
        { role: 'user', content: 'second question' },
      ]);
      expect(await client.thread('tt1').messages()).toHaveLength(4);
      // Refused by its output schema: the run fails, and the thread gets nothing of it.
      const refused = await client.enqueue({ agent: 'tt_typed', input: 'count', thread_id: 'tt2', exec_config: { test: { steps: { s1: { output: 'not json' } } } } });
      expect((await client.wait(refused.run_id, { timeout_ms: 20_000 })).status).toBe('failed');
      expect(await client.thread('tt2').messages()).toEqual([]);
      // On no thread, as before.
      const plain = await client.enqueue({ agent: 'tt_chat', input: 'q', exec_config: given });
      expect(await client.wait(plain.run_id, { timeout_ms: 20_000 })).toMatchObject({ status: 'completed', output: 'fixed answer' });
    } finally {
      await client.close();
      await worker.close();
    }
  });
});
