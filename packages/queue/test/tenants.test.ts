import { createClient } from '@arcflow/queue';
import { type FakeOpenAIServer, type FakeRequest, startFakeOpenAI } from '@arcflow/testing';
import { afterEach, describe, expect, it } from 'vitest';
import { fixtureWorkers, until } from './harness.ts';

// Tenants through worker processes (SPEC §14): jobs are taken across tenants in turn, weighted, and
// by priority within a tenant. Every run is enqueued while no worker is live (a worker registers the
// agent first, then is killed), so the order the fake provider sees is the scheduler's alone.

const FIXTURE = new URL('./fixtures/tenant-agents.ts', import.meta.url).pathname;
const { forTest } = fixtureWorkers(FIXTURE);
const servers: FakeOpenAIServer[] = [];

afterEach(async () => {
  for (const server of servers.splice(0)) await server.close();
});

/** The input of a provider request: the run's user message. */
const inputOf = (request: FakeRequest) => {
  const messages = (request.body as { messages: { role: string; content: unknown }[] }).messages;
  return String(messages.find((message) => message.role === 'user')?.content ?? '');
};

async function setup(name: string, tenantOptions: object = {}, answerMs = 0) {
  const fake = await startFakeOpenAI({
    fallback: async () => {
      if (answerMs > 0) await new Promise((resolve) => setTimeout(resolve, answerMs));
      return { type: 'text', content: 'ok' };
    },
  });
  servers.push(fake);
  const workers = forTest(name);
  const env = { OPENAI_BASE_URL: fake.url, OPENAI_API_KEY: 'k', TENANT_OPTIONS: JSON.stringify(tenantOptions) };
  const client = createClient({ redis: workers.url, prefix: workers.prefix });
  // Registers the agent, then goes: what is enqueued next waits for the workers the test starts.
  const first = await workers.start({ env });
  first.kill('SIGKILL');
  await first.exited;
  const start = (concurrency: number) => workers.start({ env, args: ['--concurrency', String(concurrency)] });
  return { fake, client, start };
}

/** Enqueues `count` runs of `tenant` (inputs `<tenant>-<i>`), `batch` at a time. */
async function flood(client: ReturnType<typeof createClient>, tenant: string, count: number, extra: { priority?: number; prefix?: string } = {}) {
  const ids: string[] = [];
  for (let from = 0; from < count; from += 100) {
    const batch = Array.from({ length: Math.min(100, count - from) }, (_, i) =>
      client.enqueue({ agent: 'chat', input: `${extra.prefix ?? tenant}-${from + i}`, tenant, ...(extra.priority ? { priority: extra.priority } : {}) }),
    );
    ids.push(...(await Promise.all(batch)).map((each) => each.run_id));
  }
  return ids;
}

describe('fair scheduling across tenants', () => {
  it('serves ten light tenants first calls before a 2,000-run tenant has finished 100 runs', async () => {
    const { fake, client, start } = await setup('fair-flood');
    await flood(client, 'A', 2_000);
    const light = 'BCDEFGHIJK'.split('');
    const lightRuns = await Promise.all(light.map((tenant) => client.enqueue({ agent: 'chat', input: `${tenant}-0`, tenant })));
    await start(8);
    await Promise.all(lightRuns.map(({ run_id }) => client.wait(run_id, { timeout_ms: 30_000 })));
    const order = fake.requests.map(inputOf);
    // A's runs make one call each: its 100th run cannot finish before its 100th call.
    const hundredthOfA =
      order.filter((input) => input.startsWith('A-')).length >= 100
        ? order.findIndex((_, at) => order.slice(0, at + 1).filter((input) => input.startsWith('A-')).length === 100)
        : order.length;
    for (const tenant of light) {
      const at = order.indexOf(`${tenant}-0`);
      expect(at, `first call of tenant ${tenant}`).toBeGreaterThanOrEqual(0);
      expect(at).toBeLessThan(hundredthOfA);
    }
    // Well before, in fact: behind at most one job per worker slot and A's first.
    expect(Math.max(...light.map((tenant) => order.indexOf(`${tenant}-0`)))).toBeLessThan(8 + light.length + 2);
    await client.close();
  }, 60_000);

  it("takes a newcomer's first run right after the head of a flooding tenant's queue: one job per slot", async () => {
    const { fake, client, start } = await setup('fair-newcomer');
    await flood(client, 'A', 50);
    const { run_id } = await client.enqueue({ agent: 'chat', input: 'B-0', tenant: 'B' });
    await start(1);
    await client.wait(run_id, { timeout_ms: 30_000 });
    // One slot: A's head first, then B (a newcomer starts at the head's own tag), not A's second.
    expect(fake.requests.map(inputOf).slice(0, 2)).toEqual(['A-0', 'B-0']);
    await client.close();
  }, 60_000);

  it('gives two flooding tenants with weights 2:1 two calls to one, within 10 %', async () => {
    const { fake, client, start } = await setup('fair-weights', { tenant_weights: { heavy: 2, light: 1 } });
    // Enqueued in turns of 100, as two tenants flooding at once would.
    for (let round = 0; round < 4; round += 1) {
      await flood(client, 'heavy', 100, { prefix: `heavy-r${round}` });
      await flood(client, 'light', 100, { prefix: `light-r${round}` });
    }
    await start(4);
    // While both still have work queued (400 each): the first 450 calls.
    await until(async () => fake.requests.length >= 450, 30_000);
    const first = fake.requests.slice(0, 450).map(inputOf);
    const heavy = first.filter((input) => input.startsWith('heavy-')).length;
    const lightCount = first.filter((input) => input.startsWith('light-')).length;
    expect(heavy / lightCount).toBeGreaterThan(2 * 0.9);
    expect(heavy / lightCount).toBeLessThan(2 * 1.1);
    await client.close();
  }, 60_000);

  it("takes a tenant's priority 1 runs before its priority 5 runs enqueued earlier", async () => {
    const { fake, client, start } = await setup('fair-priority');
    await flood(client, 'A', 200);
    const urgent = await flood(client, 'A', 5, { priority: 1, prefix: 'urgent' });
    await start(1);
    await Promise.all(urgent.map((run_id) => client.wait(run_id, { timeout_ms: 30_000 })));
    await until(async () => fake.requests.length >= 10, 30_000);
    const order = fake.requests.map(inputOf);
    // Strictly first: the 5 urgent runs are A's first 5 calls; its runs enqueued before them follow.
    expect(order.slice(0, 5).sort()).toEqual(urgent.map((_, i) => `urgent-${i}`));
    expect(order.slice(5, 10).every((input) => input.startsWith('A-'))).toBe(true);
    expect((await client.get(urgent[0]!))?.priority).toBe(1);
    expect((await client.get(urgent[0]!))?.tenant).toBe('A');
    await client.close();
  }, 60_000);
});

describe("a tenant's limits", () => {
  it('holds runs beyond max_active_runs queued, runs them as others end, and holds no other tenant back', async () => {
    const { fake, client, start } = await setup('limit-active', { tenant_limits: { capped: { max_active_runs: 2 } } }, 300);
    const capped = await flood(client, 'capped', 6);
    const free = await flood(client, 'free', 2);
    await start(8);
    // While two capped runs are running, the other four wait queued.
    await until(async () => (await Promise.all(capped.map((run_id) => client.get(run_id)))).filter((run) => run?.status === 'running').length === 2, 20_000);
    const statuses = (await Promise.all(capped.map((run_id) => client.get(run_id)))).map((run) => run?.status);
    expect(statuses.filter((status) => status === 'queued')).toHaveLength(4);
    await Promise.all(free.map((run_id) => client.wait(run_id, { timeout_ms: 20_000 })));
    await Promise.all(capped.map((run_id) => client.wait(run_id, { timeout_ms: 30_000 })));
    // Never more than two of its calls at the provider at once. A call is answered 300 ms after it
    // arrives, so when one arrives, the others still running are those that arrived less than
    // 300 ms before it: at most one.
    const cappedCalls = fake.requests.filter((request) => inputOf(request).startsWith('capped-')).map((request) => request.received_at);
    for (const [at, arrived] of cappedCalls.entries())
      expect(cappedCalls.filter((other, i) => i !== at && other <= arrived && arrived - other < 300).length, 'calls running when one arrives').toBeLessThanOrEqual(1);
    const freeFirst = Math.min(...fake.requests.filter((request) => inputOf(request).startsWith('free-')).map((request) => request.received_at));
    expect(freeFirst).toBeLessThan(cappedCalls[2]!);
    await client.close();
  }, 60_000);
});
