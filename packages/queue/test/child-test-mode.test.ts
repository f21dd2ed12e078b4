import { Agent, type ModelProvider, type ProviderRequest, agentTool, silentLogger } from '@arcflow/core';
import { createClient, startWorker } from '@arcflow/queue';
import { TEST_REDIS_URL, childrenInTestMode, cleanupPrefix, reply, testPrefix } from '@arcflow/testing';
import { afterAll, describe, expect, it } from 'vitest';

// A child of a run in test mode runs in test mode too (SPEC §13): through the queue engine.

const prefix = testPrefix('child-test-mode');
afterAll(() => cleanupPrefix(prefix));

/** A provider that notes every request: in test mode it must never be asked. */
function watchedProvider(): ModelProvider & { requests: ProviderRequest[] } {
  const requests: ProviderRequest[] = [];
  return { id: 'real', defaultModel: 'real-model', requests, complete: async (request) => (requests.push(request), reply('from the real provider')) };
}

describe('a child run of a run in test mode', () => {
  it("runs its agent's script from exec_config.test.agents; a child with no script fails with no provider call; no real provider is called", async () => {
    const researcher = new Agent({ name: 'tm_researcher' });
    const writer = new Agent({ name: 'tm_writer' });
    const lead = new Agent({ name: 'tm_lead', tools: [agentTool(researcher), agentTool(writer)] });
    const provider = watchedProvider();
    const worker = await startWorker({ agents: [lead, researcher, writer], provider, redis: TEST_REDIS_URL, prefix, logger: silentLogger });
    const client = createClient({ redis: TEST_REDIS_URL, prefix });
    try {
      const { run_id } = await client.enqueue({
        agent: 'tm_lead',
        input: 'go',
        exec_config: childrenInTestMode(
          [
            { tool: 'tm_researcher', input: 'Oslo', id: 'ask' },
            { tool: 'tm_writer', input: 'draft', id: 'write' },
          ],
          { tm_researcher: { output: 'Oslo is mild (scripted)' } },
        ),
      });
      const record = await client.wait(run_id, { timeout_ms: 20_000 });
      expect(record.status).toBe('completed');
      const ends: Record<string, string> = {};
      const children: Record<string, string> = {};
      for await (const event of client.events(run_id)) {
        if (event.kind === 'ToolCallCompleted') ends[event.tool_call_id] = 'completed';
        if (event.kind === 'ToolCallFailed') ends[event.tool_call_id] = event.error_code;
        if (event.kind === 'ToolCallStarted' && event.child_run_id) children[event.tool_call_id] = event.child_run_id;
      }
      expect(ends).toEqual({ ask: 'completed', write: 'child_failed' });
      expect(await client.get(children.ask!)).toMatchObject({ status: 'completed', output: 'Oslo is mild (scripted)' });
      expect(await client.get(children.write!)).toMatchObject({ status: 'failed' });
      const providerIds = new Set<string>();
      for await (const event of client.events(children.write!)) if (event.kind === 'ProviderRequestSent') providerIds.add(event.provider_id);
      expect([...providerIds]).toEqual(['test']);
      expect(provider.requests).toEqual([]);
    } finally {
      await client.close();
      await worker.close();
    }
  });
});
