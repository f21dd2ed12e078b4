import { Agent, createToken, silentLogger } from '@arcflow/core';
import { openaiProvider } from '@arcflow/provider-openai';
import { type ArcflowWorker, createClient, startWorker } from '@arcflow/queue';
import { type FakeOpenAIServer, type FakeRequest, TEST_REDIS_URL, cleanupPrefix, startFakeOpenAI, testPrefix } from '@arcflow/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ServeProcess, spawnServe } from './harness.ts';

// GET /v1/tenants/{tenant} (SPEC §14) against a real `arcflow serve` process: a tenant's active and
// queued runs (behind its max_active_runs) and what its calls cost today, from a worker with
// pricing and the fake OpenAI server over HTTP.
const prefix = testPrefix('tenant-standing');
const SECRET = 'a-token-secret-of-at-least-32-bytes-0123456789';
let serve: ServeProcess;
let worker: ArcflowWorker;
let fake: FakeOpenAIServer;
let release: () => void;
const held = new Promise<void>((resolve) => {
  release = resolve;
});

const userInput = (request: FakeRequest) => String((request.body as { messages: { role: string; content: unknown }[] }).messages.find((m) => m.role === 'user')?.content ?? '');

beforeAll(async () => {
  fake = await startFakeOpenAI({
    fallback: async (request) => {
      if (userInput(request).startsWith('hold')) await held;
      return { type: 'text', content: 'ok', usage: { prompt_tokens: 1_000, completion_tokens: 100 } };
    },
  });
  worker = await startWorker({
    agents: [new Agent({ name: 'standing', instructions: 'x', model: 'priced-m' })],
    provider: openaiProvider({ base_url: fake.url, api_key: 'k' }),
    redis: TEST_REDIS_URL,
    prefix,
    logger: silentLogger,
    pricing: { 'priced-m': { input_per_mtok: 2, output_per_mtok: 10 } },
    tenant_limits: { busy: { max_active_runs: 1 } },
  });
  serve = await spawnServe({ REDIS_URL: TEST_REDIS_URL, ARCFLOW_PREFIX: prefix, ARCFLOW_TOKEN_SECRET: SECRET });
}, 60_000);
afterAll(async () => {
  release();
  await Promise.all([serve?.stop(), worker?.close(), fake?.close()]);
  await cleanupPrefix(prefix);
});

const standing = async (tenant: string, headers: Record<string, string> = {}) => {
  const response = await fetch(`${serve.url}/v1/tenants/${tenant}`, { headers });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
};

async function until(check: () => Promise<boolean>, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe('GET /v1/tenants/{tenant}', () => {
  it("counts a tenant's active and queued runs and what its calls cost today", async () => {
    const client = createClient({ redis: TEST_REDIS_URL, prefix });
    const paid = await client.enqueue({ agent: 'standing', input: 'now', tenant: 'paid' });
    await client.wait(paid.run_id, { timeout_ms: 15_000 });
    // One call: 1,000 × $2/Mtok + 100 × $10/Mtok = $0.003.
    await until(async () => (await standing('paid')).body.cost_usd_today === 0.003);
    expect(await standing('paid')).toEqual({ status: 200, body: { tenant: 'paid', active_runs: 0, queued_runs: 0, cost_usd_today: 0.003 } });

    // busy may run one at a time: its first run holds its call open, the other two wait queued.
    const busy = await Promise.all([1, 2, 3].map((n) => client.enqueue({ agent: 'standing', input: `hold ${n}`, tenant: 'busy' })));
    await until(async () => fake.requests.some((request) => userInput(request).startsWith('hold')));
    expect(await standing('busy')).toEqual({ status: 200, body: { tenant: 'busy', active_runs: 1, queued_runs: 2, cost_usd_today: 0 } });
    expect((await standing('default')).body).toEqual({ tenant: 'default', active_runs: 0, queued_runs: 0, cost_usd_today: 0 });

    release();
    await Promise.all(busy.map(({ run_id }) => client.wait(run_id, { timeout_ms: 20_000 })));
    await until(async () => (await standing('busy')).body.cost_usd_today === 0.009);
    expect((await standing('busy')).body).toEqual({ tenant: 'busy', active_runs: 0, queued_runs: 0, cost_usd_today: 0.009 });
    await client.close();
  }, 60_000);

  it('answers a name that is not a tenant 400, and an end user token 403', async () => {
    expect(await standing('has%20space')).toMatchObject({ status: 400, body: { status: 400, code: 'invalid_request' } });
    expect(await standing('x'.repeat(129))).toMatchObject({ status: 400, body: { code: 'invalid_request' } });
    const token = await createToken({ secret: SECRET, thread_id: 'some-thread', actions: ['read'] });
    expect(await standing('paid', { authorization: `Bearer ${token}` })).toMatchObject({
      status: 403,
      body: { code: 'forbidden', detail: expect.stringContaining('GET /v1/tenants/:tenant') },
    });
  });
});
