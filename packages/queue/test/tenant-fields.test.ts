import { Agent, silentLogger } from '@arcflow/core';
import { createClient, startWorker } from '@arcflow/queue';
import { TEST_REDIS_URL, scriptedProvider, testPrefix } from '@arcflow/testing';
import { describe, expect, it } from 'vitest';
import { testResources } from './harness.ts';

// A run's tenant and priority (SPEC §14): checked at enqueue, kept on the record, listed by tenant;
// a worker's tenant options are checked at start.

const { prefixes, open } = testResources();
const agent = new Agent({ name: 'tenant_fields', instructions: 'x' });

async function registered(name: string) {
  const prefix = testPrefix(name);
  prefixes.push(prefix);
  // Registers the agent, then goes: the runs below wait in their queue.
  await (await startWorker({ agents: [agent], provider: scriptedProvider([]), redis: TEST_REDIS_URL, prefix, logger: silentLogger })).close();
  const client = createClient({ redis: TEST_REDIS_URL, prefix });
  open.push(client);
  return { client, prefix };
}

describe('tenant and priority on a run', () => {
  it('keeps them on the record, lists by tenant (no tenant: default), and refuses bad ones naming the field', async () => {
    const { client } = await registered('tenant-fields');
    const acme = await client.enqueue({ agent: agent.name, input: 'a', tenant: 'acme.eu:team-1', priority: 1 });
    const plain = await client.enqueue({ agent: agent.name, input: 'b' });
    expect(await client.get(acme.run_id)).toMatchObject({ tenant: 'acme.eu:team-1', priority: 1 });
    const record = await client.get(plain.run_id);
    expect(record?.tenant).toBeUndefined();
    expect(record?.priority).toBeUndefined();
    expect((await client.list({ tenant: 'acme.eu:team-1' })).runs.map((run) => run.run_id)).toEqual([acme.run_id]);
    expect((await client.list({ tenant: 'default' })).runs.map((run) => run.run_id)).toEqual([plain.run_id]);
    for (const [request, message] of [
      [{ tenant: 'a b' }, /^tenant must match/],
      [{ tenant: 'x'.repeat(129) }, /^tenant must match/],
      [{ priority: 0 }, /^priority must be an integer from 1/],
      [{ priority: 11 }, /^priority must be an integer from 1/],
      [{ priority: 2.5 }, /^priority must be an integer from 1/],
    ] as const) {
      await expect(client.enqueue({ agent: agent.name, input: 'c', ...request })).rejects.toMatchObject({ code: 'invalid_request', message: expect.stringMatching(message) });
    }
    await expect(client.list({ tenant: 'no spaces' })).rejects.toMatchObject({ code: 'invalid_request' });
  });

  it('refuses a worker whose tenant_weights or tenant_limits has a bad tenant, key or value, naming it', async () => {
    const prefix = testPrefix('tenant-options');
    prefixes.push(prefix);
    const start = (tenant_weights: Record<string, unknown>) =>
      startWorker({
        agents: [agent],
        provider: scriptedProvider([]),
        redis: TEST_REDIS_URL,
        prefix,
        logger: silentLogger,
        tenant_weights: tenant_weights as Record<string, number>,
      });
    await expect(start({ acme: 0 })).rejects.toThrow('tenant_weights.acme: expected a number from 0.001 to 1000, got 0');
    await expect(start({ acme: '2' })).rejects.toThrow('tenant_weights.acme: expected a number');
    await expect(start({ 'a b': 1 })).rejects.toThrow("tenant_weights: 'a b' is not a tenant name");
    const limited = (tenant_limits: Record<string, unknown>) =>
      startWorker({ agents: [agent], provider: scriptedProvider([]), redis: TEST_REDIS_URL, prefix, logger: silentLogger, tenant_limits: tenant_limits as never });
    await expect(limited({ '*': { max_active_run: 2 } })).rejects.toThrow("tenant_limits.*: unknown key 'max_active_run'");
    await expect(limited({ acme: { runs_per_minute: 0 } })).rejects.toThrow('tenant_limits.acme.runs_per_minute: expected a whole number of at least 1, got 0');
  });
});
