import { Agent, silentLogger, tool } from '@arcflow/core';
import { createClient, startWorker } from '@arcflow/queue';
import { TEST_REDIS_URL, type ScriptedProvider, reply, scriptedProvider, testPrefix, toolCall } from '@arcflow/testing';
import { describe, expect, it } from 'vitest';
import { FAST, testResources } from './harness.ts';

const { prefixes, open } = testResources();

const echo = (name: string) => tool({ name, description: name, input_schema: { type: 'object' }, handler: () => `${name} done` });
const research = new Agent({ name: 'fleet_research', instructions: 'research', tools: [echo('fleet_search')] });
const billing = new Agent({ name: 'fleet_billing', instructions: 'billing', tools: [echo('fleet_refund')] });

/** A model that calls the agent's one tool, then answers; it keeps every request it saw. */
function model(): ScriptedProvider {
  return scriptedProvider(
    [
      (request) => {
        const answered = request.messages.some((message) => message.role === 'tool');
        return answered ? reply('done') : toolCall(request.tools[0]!.name, {});
      },
    ],
    { repeat: true },
  );
}

/** Which agents' instructions a provider was asked about. */
const agentsSeen = (provider: ScriptedProvider) => new Set(provider.requests.map((request) => (request.messages[0] as { content: string }).content));

describe('mixed fleets on one prefix', () => {
  it('gives each worker only the jobs of agents it serves: disjoint and overlapping modules, 50 runs of each agent', async () => {
    const prefix = testPrefix('fleet');
    prefixes.push(prefix);
    const start = async (agents: Agent[]) => {
      const provider = model();
      open.push(await startWorker({ agents, provider, redis: TEST_REDIS_URL, prefix, logger: silentLogger, ...FAST }));
      return provider;
    };
    const researchOnly = await start([research]);
    const billingOnly = await start([billing]);
    const both = await start([research, billing]);
    const client = createClient({ redis: TEST_REDIS_URL, prefix });
    open.push(client);
    const enqueued = await Promise.all(
      Array.from({ length: 100 }, (_, index) => client.enqueue({ agent: index % 2 === 0 ? 'fleet_research' : 'fleet_billing', input: `run ${index}` })),
    );
    const runs = await Promise.all(enqueued.map(({ run_id }) => client.wait(run_id, { timeout_ms: 30_000 })));
    expect(runs.filter((run) => run.status !== 'completed')).toEqual([]);
    expect(agentsSeen(researchOnly)).toEqual(new Set(['research']));
    expect(agentsSeen(billingOnly)).toEqual(new Set(['billing']));
    // Every provider call was made by a worker serving the run's agent: two per run, 200 in all.
    expect(researchOnly.requests.length + billingOnly.requests.length + both.requests.length).toBe(200);
  });

  it('keeps a run waiting while no worker serves its agent, though other workers are up, and runs it when one starts', async () => {
    const prefix = testPrefix('fleet-wait');
    prefixes.push(prefix);
    // Registers the agent, then goes away (a rolling deploy, scale to zero).
    await (await startWorker({ agents: [billing], provider: model(), redis: TEST_REDIS_URL, prefix, logger: silentLogger, ...FAST })).close();
    open.push(await startWorker({ agents: [research], provider: model(), redis: TEST_REDIS_URL, prefix, logger: silentLogger, ...FAST }));
    const client = createClient({ redis: TEST_REDIS_URL, prefix });
    open.push(client);
    const { run_id } = await client.enqueue({ agent: 'fleet_billing', input: 'refund order 7' });
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    expect(await client.get(run_id)).toMatchObject({ status: 'queued' });
    open.push(await startWorker({ agents: [billing], provider: model(), redis: TEST_REDIS_URL, prefix, logger: silentLogger, ...FAST }));
    expect(await client.wait(run_id, { timeout_ms: 15_000 })).toMatchObject({ status: 'completed', output: 'done' });
  });
});

describe('a rolling deploy', () => {
  it('continues runs in flight on workers whose agent changed (a new tool, a new max_iterations), each run saying so once', async () => {
    const prefix = testPrefix('rolling');
    prefixes.push(prefix);
    const slow = tool({
      name: 'rolling_slow',
      description: 'slow',
      input_schema: { type: 'object' },
      handler: () => new Promise((resolve) => setTimeout(() => resolve('slow done'), 300)),
    });
    const v1 = new Agent({ name: 'rolling', instructions: 'v1', tools: [slow], tool_execution: { max_iterations: 4 } });
    const v2 = new Agent({ name: 'rolling', instructions: 'v1', tools: [slow, echo('rolling_new')], tool_execution: { max_iterations: 6 } });
    expect(v2.definition_hash).not.toBe(v1.definition_hash);
    const first = await startWorker({ agents: [v1], provider: model(), redis: TEST_REDIS_URL, prefix, logger: silentLogger, ...FAST });
    const client = createClient({ redis: TEST_REDIS_URL, prefix });
    open.push(client);
    const ids = (await Promise.all(Array.from({ length: 10 }, (_, index) => client.enqueue({ agent: 'rolling', input: `run ${index}` })))).map(({ run_id }) => run_id);
    // Every run has started its first round on the old worker; then the worker is replaced.
    for (const run_id of ids) {
      for (let tries = 0; tries < 200; tries += 1) {
        const kinds = [];
        for await (const event of client.events(run_id)) kinds.push(event.kind);
        if (kinds.includes('ToolCallStarted')) break;
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    }
    open.push(await startWorker({ agents: [v2], provider: model(), redis: TEST_REDIS_URL, prefix, logger: silentLogger, ...FAST }));
    await first.close();
    const runs = await Promise.all(ids.map((run_id) => client.wait(run_id, { timeout_ms: 20_000 })));
    expect(runs.map((run) => run.status)).toEqual(ids.map(() => 'completed'));
    for (const run_id of ids) {
      const changes = [];
      for await (const event of client.events(run_id)) if (event.kind === 'DefinitionChanged') changes.push(event);
      expect(changes).toEqual([expect.objectContaining({ previous_hash: v1.definition_hash, current_hash: v2.definition_hash })]);
    }
  });
});
