import { Agent, ConfigError, type TraceEvent, agentTool, runLocal, silentLogger, tool } from '@arcflow/core';
import { openaiProvider } from '@arcflow/provider-openai';
import { type WorkerOptions, createClient, keysFor, startWorker } from '@arcflow/queue';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { QueueName } from '../src/redis/keys.ts';
import { type FakeOpenAIServer, type FakeRequest, type FakeTurn, TEST_REDIS_URL, assertEventInvariants, startFakeOpenAI, testPrefix } from '@arcflow/testing';
import { describe, expect, it } from 'vitest';
import { FAST, collect, testResources, until } from './harness.ts';

// SPEC §14 "Cost" through the BullMQ engine and runLocal: calls priced at the model that answered,
// cost on TokensConsumed and the record (child runs rolled up), max_cost_usd and tenant budgets
// held before the call. Real Redis, real BullMQ, a fake OpenAI server over HTTP.

const { prefixes, open } = testResources();

const USAGE = { prompt_tokens: 1_000, completion_tokens: 100 };
const PRICING = {
  'boss-m': { input_per_mtok: 2, output_per_mtok: 10 }, // 1,000 × 2 + 100 × 10 = 3,000 µ$ a call
  'fb-m': { input_per_mtok: 3, output_per_mtok: 30 }, // 6,000 µ$ a call
  'helper-m': { input_per_mtok: 1, output_per_mtok: 1 },
  cheap: { input_per_mtok: 1, output_per_mtok: 1 },
} as const;

const noop = tool({ name: 'noop', description: 'does nothing', input_schema: { type: 'object' }, handler: async () => 'nothing' });

/** The system prompt of a request: which agent asks. */
const roleOf = (request: FakeRequest) => String((request.body as { messages: { role: string; content: unknown }[] }).messages[0]?.content ?? '');
const hasToolResult = (request: FakeRequest) => (request.body as { messages: { role: string }[] }).messages.some((message) => message.role === 'tool');
const modelOf = (request: FakeRequest) => String((request.body as { model: string }).model);

/** The boss asks its helper once, then answers; the helper's own model always fails (500), so its fallback answers. */
function bossAndHelper(request: FakeRequest): FakeTurn {
  if (roleOf(request) === 'role:helper') {
    if (modelOf(request) === 'helper-m') return { type: 'status', status: 500, body: { error: { message: 'down' } } };
    return { type: 'text', content: 'helped', usage: USAGE };
  }
  if (!hasToolResult(request)) return { type: 'tools', calls: [{ name: 'helper', arguments: { input: 'help' } }], usage: USAGE };
  return { type: 'text', content: 'done', usage: USAGE };
}

const helper = new Agent({ name: 'helper', instructions: 'role:helper', model: 'helper-m', model_fallbacks: [{ model: 'fb-m' }] });
const boss = new Agent({ name: 'boss', instructions: 'role:boss', model: 'boss-m', tools: [agentTool(helper)] });

async function server(fallback: (request: FakeRequest) => FakeTurn): Promise<FakeOpenAIServer> {
  const started = await startFakeOpenAI({ fallback });
  open.push(started);
  return started;
}

async function engine(name: string, fake: FakeOpenAIServer, options: Omit<WorkerOptions, 'redis' | 'prefix' | 'provider'>) {
  const prefix = testPrefix(name);
  prefixes.push(prefix);
  const worker = await startWorker({ redis: TEST_REDIS_URL, prefix, logger: silentLogger, ...FAST, provider: openaiProvider({ base_url: fake.url, api_key: 'k' }), ...options });
  open.push(worker);
  const client = createClient({ redis: TEST_REDIS_URL, prefix });
  open.push(client);
  return { prefix, client };
}

const ofKind = <K extends TraceEvent['kind']>(events: readonly TraceEvent[], kind: K) => events.filter((event): event is Extract<TraceEvent, { kind: K }> => event.kind === kind);
const costs = (events: readonly TraceEvent[]) => ofKind(events, 'TokensConsumed').map(({ cost_usd, cumulative_cost_usd }) => ({ cost_usd, cumulative_cost_usd }));

describe('cost on events and records', () => {
  it("prices each call at the model that answered (a fallback's), and rolls a child run's cost up into its parent's usage and its tenant's day", async () => {
    const fake = await server(bossAndHelper);
    const { client } = await engine('cost-events', fake, { agents: [boss, helper], pricing: PRICING });
    const { run_id } = await client.enqueue({ agent: 'boss', input: 'go', tenant: 'acme' });
    const record = await client.wait(run_id, { timeout_ms: 20_000 });
    expect(record.status).toBe('completed');
    const events = await collect(client, run_id);
    assertEventInvariants(events);
    // Its own calls cost 0.003 each; its second call's cumulative counts the helper's 0.006.
    expect(costs(events)).toEqual([
      { cost_usd: 0.003, cumulative_cost_usd: 0.003 },
      { cost_usd: 0.003, cumulative_cost_usd: 0.012 },
    ]);
    expect(record.usage).toEqual({ input: 2_000, output: 200, total: 2_200, cost_usd: 0.012 });
    const child_run_id = ofKind(events, 'ToolCallStarted')[0]!.child_run_id!;
    const child = await client.get(child_run_id);
    expect(child?.usage.cost_usd).toBe(0.006);
    const childEvents = await collect(client, child_run_id);
    expect(ofKind(childEvents, 'ProviderError').map((event) => event.model_id)).toContain('helper-m');
    expect(ofKind(childEvents, 'ProviderResponseReceived').map((event) => event.model_id)).toEqual(['fb-m']);
    expect(costs(childEvents)).toEqual([{ cost_usd: 0.006, cumulative_cost_usd: 0.006 }]);
    // Every hold settled at the true cost: the tenant's day is the sum, nothing held.
    await until(async () => (await client.tenant('acme')).cost_usd_today === 0.012);
  });

  it("gives a child run what its parent's max_cost_usd leaves: a child call whose worst case does not fit is refused", async () => {
    const fake = await server(bossAndHelper);
    const { client } = await engine('cost-child-cap', fake, { agents: [boss, helper], pricing: PRICING });
    // The boss's calls each hold about $0.165 (16,384 output tokens at $10/Mtok); the helper's fallback would hold about $0.49.
    const { run_id } = await client.enqueue({ agent: 'boss', input: 'go', config: { budget: { max_cost_usd: 0.17 } } });
    const record = await client.wait(run_id, { timeout_ms: 20_000 });
    const events = await collect(client, run_id);
    const child = await client.get(ofKind(events, 'ToolCallStarted')[0]!.child_run_id!);
    expect(child?.error?.error_code).toBe('budget_exceeded');
    // What the parent's cap left after its first call ($0.003).
    expect(child?.error?.message).toMatch(/the run's max_cost_usd is \$0\.167: .*the next call to 'fb-m' could cost up to/);
    expect(ofKind(events, 'ToolCallFailed')[0]?.error_code).toBe('child_failed');
    expect(fake.requests.filter((request) => modelOf(request) === 'fb-m')).toHaveLength(0);
    expect(record.status).toBe('completed');
  });

  it('reports the same costs from runLocal', async () => {
    const fake = await server(bossAndHelper);
    const provider = openaiProvider({ base_url: fake.url, api_key: 'k' });
    const run = await runLocal(boss, 'go', { provider, pricing: PRICING, logger: false, provider_retry: { attempts: 2, backoff_ms: 1 } });
    expect(run.status).toBe('completed');
    expect(costs(run.events)).toEqual([
      { cost_usd: 0.003, cumulative_cost_usd: 0.003 },
      { cost_usd: 0.003, cumulative_cost_usd: 0.012 },
    ]);
    expect(run.usage.cost_usd).toBe(0.012);
  });

  it('leaves cost out for a model with no price', async () => {
    const fake = await server(() => ({ type: 'text', content: 'ok', usage: USAGE }));
    const { client } = await engine('cost-unpriced', fake, { agents: [new Agent({ name: 'plain', model: 'unlisted' })], pricing: PRICING });
    const { run_id } = await client.enqueue({ agent: 'plain', input: 'go' });
    const record = await client.wait(run_id, { timeout_ms: 20_000 });
    expect(record.usage).toEqual({ input: 1_000, output: 100, total: 1_100 });
    const consumed = ofKind(await collect(client, run_id), 'TokensConsumed');
    expect(consumed).toHaveLength(1);
    expect('cost_usd' in consumed[0]!).toBe(false);
  });
});

describe('max_cost_usd', () => {
  // Worst case of a call: its prompt's bytes × $1/Mtok plus max_tokens (100) × $1/Mtok; each answer costs 1,100 µ$.
  const looper = new Agent({ name: 'looper', instructions: 'role:looper', model: 'cheap', model_settings: { max_tokens: 100 }, tools: [noop] });
  const callsNoop = (): FakeTurn => ({ type: 'tools', calls: [{ name: 'noop', arguments: {} }], usage: USAGE });

  it('fails the step budget_exceeded before a call whose worst case does not fit, and the provider is not called', async () => {
    const fake = await server(callsNoop);
    const { client } = await engine('cost-run-cap', fake, { agents: [looper], pricing: PRICING });
    const { run_id } = await client.enqueue({ agent: 'looper', input: 'go', config: { budget: { max_cost_usd: 0.0015 } } });
    const record = await client.wait(run_id, { timeout_ms: 20_000 });
    expect(record.status).toBe('failed');
    expect(record.error?.error_code).toBe('budget_exceeded');
    expect(record.error?.message).toMatch(
      /the run's max_cost_usd is \$0\.0015: it has spent \$0\.0011 .*the next call to 'cheap' could cost up to \$0\.000\d+; the call was not made/,
    );
    // One call made (1,100 µ$ spent); the second's worst case (~600 µ$) would pass 1,500.
    expect(fake.requests).toHaveLength(1);
    const events = await collect(client, run_id);
    assertEventInvariants(events);
    expect(ofKind(events, 'ProviderRequestSent')).toHaveLength(1);
    expect(ofKind(events, 'StepExecutionFailed')[0]?.error_code).toBe('budget_exceeded');
    expect(ofKind(events, 'RunFailed')[0]?.error_code).toBe('budget_exceeded');

    // runLocal refuses the same call.
    const local = await runLocal(looper, 'go', {
      provider: openaiProvider({ base_url: fake.url, api_key: 'k' }),
      pricing: PRICING,
      config: { budget: { max_cost_usd: 0.0015 } },
      logger: false,
    });
    expect(local.error?.error_code).toBe('budget_exceeded');
    expect(fake.requests).toHaveLength(2);
  });

  it('refuses a call to a model with no price when the run has a max_cost_usd, and makes none', async () => {
    const fake = await server(callsNoop);
    const { client } = await engine('cost-unpriced-cap', fake, { agents: [new Agent({ name: 'unlisted', model: 'unlisted' })], pricing: PRICING });
    const { run_id } = await client.enqueue({ agent: 'unlisted', input: 'go', config: { budget: { max_cost_usd: 1 } } });
    const record = await client.wait(run_id, { timeout_ms: 20_000 });
    expect(record.error).toMatchObject({ error_code: 'budget_exceeded' });
    expect(record.error?.message).toMatch(/model 'unlisted' has no entry in the worker's pricing, so the run's max_cost_usd cannot be checked/);
    expect(fake.requests).toHaveLength(0);
  });

  it('refuses a bad max_cost_usd at enqueue, naming it', async () => {
    const fake = await server(callsNoop);
    const { client } = await engine('cost-bad-cap', fake, { agents: [looper] });
    await expect(client.enqueue({ agent: 'looper', input: 'go', config: { budget: { max_cost_usd: -1 } } })).rejects.toThrow(/config\.budget\.max_cost_usd must be a number >= 0/);
    await expect(client.enqueue({ agent: 'looper', input: 'go', config: { budget: { max_cost_usd: '1' } } })).rejects.toThrow(/max_cost_usd/);
  });
});

describe('tenant_budgets', () => {
  const chat = new Agent({ name: 'chat', instructions: 'role:chat', model: 'boss-m', model_settings: { max_tokens: 100 } });

  it("refuses a tenant's call once its day's worst cases no longer fit, naming the tenant and the amounts; other tenants go on", async () => {
    // Each call's worst case is about 600 µ$ + 1,000 µ$ and costs 3,000 µ$: a $0.01 day takes three.
    const fake = await server(() => ({ type: 'text', content: 'ok', usage: USAGE }));
    const { client } = await engine('cost-tenant', fake, { agents: [chat], pricing: PRICING, tenant_budgets: { acme: { max_cost_usd_per_day: 0.01 } } });
    const statuses: string[] = [];
    for (let i = 0; i < 5; i += 1) {
      const { run_id } = await client.enqueue({ agent: 'chat', input: `q${i}`, tenant: 'acme' });
      statuses.push((await client.wait(run_id, { timeout_ms: 20_000 })).status);
    }
    expect(statuses).toEqual(['completed', 'completed', 'completed', 'failed', 'failed']);
    expect(fake.requests).toHaveLength(3);
    const refused = (await client.list({ tenant: 'acme', status: 'failed' })).runs[0]!;
    expect(refused.error?.error_code).toBe('budget_exceeded');
    expect(refused.error?.message).toMatch(
      /tenant 'acme' has spent \$0\.009 today .* of its max_cost_usd_per_day, \$0\.01, and the next call to 'boss-m' could cost up to \$0\.00\d+; the call was not made/,
    );
    expect((await client.tenant('acme')).cost_usd_today).toBe(0.009);
    // A tenant without a budget is not held back.
    const { run_id } = await client.enqueue({ agent: 'chat', input: 'other', tenant: 'globex' });
    expect((await client.wait(run_id, { timeout_ms: 20_000 })).status).toBe('completed');
  });

  it('settles, on its re-delivery, the hold of a call whose worker died between recording the answer that ended the run and settling it', async () => {
    const fake = await server(() => ({ type: 'text', content: 'ok', usage: USAGE }));
    const { prefix, client } = await engine('cost-settle-redelivered', fake, { agents: [chat], pricing: PRICING, tenant_budgets: { acme: { max_cost_usd_per_day: 1 } } });
    const { run_id } = await client.enqueue({ agent: 'chat', input: 'q', tenant: 'acme' });
    expect((await client.wait(run_id, { timeout_ms: 20_000 })).status).toBe('completed');
    const keys = keysFor(prefix);
    const day = keys.tenantSpend('acme', new Date().toISOString().slice(0, 10));
    const redis = new Redis(TEST_REDIS_URL);
    open.push({ close: async () => void (await redis.quit()) });
    // The ending write compacts the run: what a re-delivery reads comes from its archive.
    await until(async () => (await redis.hexists(keys.run(run_id).record, 'archived')) === 1);
    expect(await redis.hgetall(day)).toEqual({ spent: '3000', held: '0' });
    // As the worker left it had it died before settling: the call's worst case still held, nothing spent.
    const worst = 1_500;
    await redis
      .multi()
      .hset(keys.runCost(run_id), 's1|1', `${worst}|${day}`)
      .hincrby(keys.runCost(run_id), 'held', worst)
      .hincrby(day, 'held', worst)
      .hincrby(day, 'spent', -3_000)
      .exec();
    // The stall check hands its provider job on.
    const queue = new Queue(QueueName.agent('chat'), { connection: redis, prefix: `{${prefix}}` });
    open.push(queue);
    await queue.add('provider', { run_id, step_id: 's1', iteration: 1, trace: {} });
    await until(async () => (await redis.hget(keys.runCost(run_id), 's1|1')) === 's');
    expect(await redis.hgetall(day)).toEqual({ spent: '3000', held: '0' });
    expect(fake.requests).toHaveLength(1);
  });

  it('refuses a call to a model with no price when the tenant has a budget', async () => {
    const fake = await server(() => ({ type: 'text', content: 'ok', usage: USAGE }));
    const { client } = await engine('cost-tenant-unpriced', fake, {
      agents: [new Agent({ name: 'unlisted', model: 'unlisted' })],
      tenant_budgets: { '*': { max_cost_usd_per_day: 5 } },
    });
    const { run_id } = await client.enqueue({ agent: 'unlisted', input: 'go' });
    const record = await client.wait(run_id, { timeout_ms: 20_000 });
    expect(record.error?.message).toMatch(/model 'unlisted' has no entry in the worker's pricing, so tenant 'default''s max_cost_usd_per_day cannot be checked/);
    expect(fake.requests).toHaveLength(0);
  });
});

describe('bad cost options', () => {
  const agents = [new Agent({ name: 'a' })];
  const provider = openaiProvider({ base_url: 'http://127.0.0.1:9/v1', api_key: 'k' });
  it.each([
    [{ pricing: [] }, /^pricing must be an object keyed by model$/],
    [{ pricing: { m: { input_per_mtok: 1 } } }, /^pricing\.m\.output_per_mtok: required/],
    [{ pricing: { m: { input_per_mtok: 1, output_per_mtok: -2 } } }, /^pricing\.m\.output_per_mtok: expected a number from 0 to 1000000 \(USD per million tokens\), got -2$/],
    [{ pricing: { m: { input_per_mtok: 1, output_per_mtok: 2, max_output_tokens: 0.5 } } }, /^pricing\.m\.max_output_tokens: expected a whole number of at least 1, got 0\.5$/],
    [
      { pricing: { m: { input_per_mtok: 1, output_per_mtok: 2, cached_per_mtok: 1 } } },
      /^pricing\.m: unknown key 'cached_per_mtok' \(keys: input_per_mtok, output_per_mtok, max_output_tokens\)$/,
    ],
    [{ tenant_budgets: { acme: { max_cost_usd_per_day: -1 } } }, /^tenant_budgets\.acme\.max_cost_usd_per_day: expected a number of USD >= 0, got -1$/],
    [{ tenant_budgets: { acme: { max_cost: 1 } } }, /^tenant_budgets\.acme: unknown key 'max_cost' \(keys: max_cost_usd_per_day\)$/],
    [{ tenant_budgets: { 'no spaces': { max_cost_usd_per_day: 1 } } }, /^tenant_budgets: 'no spaces' is not a tenant name/],
  ])('refuses %j at start, naming it', async (options, message) => {
    const prefix = testPrefix('cost-bad');
    prefixes.push(prefix);
    const started = startWorker({ redis: TEST_REDIS_URL, prefix, logger: silentLogger, agents, provider, ...(options as Partial<WorkerOptions>) });
    await expect(started).rejects.toThrow(ConfigError);
    await expect(started).rejects.toThrow(message);
  });

  it('refuses bad pricing in runLocal too', async () => {
    await expect(runLocal(new Agent({ name: 'a' }), 'go', { pricing: { m: { input_per_mtok: 'x' } } as never, logger: false })).rejects.toThrow(
      /^pricing\.m\.input_per_mtok: expected a number/,
    );
  });
});
