import type { TraceEvent } from '@arcflow/core';
import { createClient, keysFor } from '@arcflow/queue';
import { type FakeOpenAIServer, type FakeRequest, startFakeOpenAI } from '@arcflow/testing';
import { afterEach, describe, expect, it } from 'vitest';
import { collect, fixtureWorkers, until } from './harness.ts';

// Tenant budgets through worker processes that are SIGKILLed while they hold calls (SPEC §14): no
// budget is overshot, spend is counted once whatever re-deliveries happen, and no refused call
// reaches the provider.

const FIXTURE = new URL('./fixtures/cost-agents.ts', import.meta.url).pathname;
const { forTest } = fixtureWorkers(FIXTURE);
const servers: FakeOpenAIServer[] = [];

afterEach(async () => {
  for (const server of servers.splice(0)) await server.close();
});

const BUDGET_MICROS = 100_000; // $0.10 a day
// A call's worst case: its prompt's bytes at $1/Mtok plus max_tokens (50) at $200/Mtok ≈ $0.0103;
// each answer (100 + 45 tokens) costs $0.0091.
const OPTIONS = {
  pricing: { priced: { input_per_mtok: 1, output_per_mtok: 200 } },
  tenant_budgets: { acme: { max_cost_usd_per_day: BUDGET_MICROS / 1_000_000 } },
};
const RUNS = 30;
const CONCURRENCY = 3;

const inputOf = (request: FakeRequest) => String((request.body as { messages: { role: string; content: unknown }[] }).messages.find((m) => m.role === 'user')?.content ?? '');

describe('tenant budgets under worker kills', () => {
  it('never overshoots a $0.10 day, counts each answer once, and lets no refused call reach the provider', async () => {
    const fake = await startFakeOpenAI({
      fallback: async () => {
        await new Promise((resolve) => setTimeout(resolve, 600 + Math.random() * 600));
        return { type: 'text', content: 'ok', usage: { prompt_tokens: 100, completion_tokens: 45 } };
      },
    });
    servers.push(fake);
    const workers = forTest('cost-chaos');
    const env = { OPENAI_BASE_URL: fake.url, OPENAI_API_KEY: 'k', COST_OPTIONS: JSON.stringify(OPTIONS), ARCFLOW_MAX_STALLED_COUNT: '20' };
    // Generous start times: worker processes start slowly on a loaded machine.
    const start = () => workers.start({ env, args: ['--concurrency', String(CONCURRENCY)], readyTimeoutMs: 60_000 });
    const live = await Promise.all([start(), start(), start()]);
    const client = createClient({ redis: workers.url, prefix: workers.prefix });
    const runs = await Promise.all(Array.from({ length: RUNS }, (_, i) => client.enqueue({ agent: 'chat', input: `q${i}`, tenant: 'acme' })));
    // Each first worker is SIGKILLed while it holds calls (answers take 0.6–1.2 s), and replaced.
    const replacements: Promise<unknown>[] = [];
    let kills = 0;
    for (const worker of live) {
      await new Promise((resolve) => setTimeout(resolve, 700));
      worker.kill('SIGKILL');
      kills += 1;
      replacements.push(start());
    }
    await Promise.all(replacements);
    const records = await Promise.all(runs.map(({ run_id }) => client.wait(run_id, { timeout_ms: 40_000 })));

    const completed = records.filter((record) => record.status === 'completed');
    const refused = records.filter((record) => record.error?.error_code === 'budget_exceeded');
    expect(completed.length + refused.length, JSON.stringify(records.map((r) => [r.status, r.error]))).toBe(RUNS);
    expect(kills).toBeGreaterThanOrEqual(3);
    expect(refused.length).toBeGreaterThan(0);

    // No overshoot: the day's settled spend plus any hold left is within the budget.
    const dayKey = keysFor(workers.prefix).tenantSpend('acme', new Date().toISOString().slice(0, 10));
    const readDay = () => workers.reader().hgetall(dayKey);
    const early = await readDay();
    expect(Number(early.spent ?? 0) + Number(early.held ?? 0)).toBeLessThanOrEqual(BUDGET_MICROS);
    // A worker killed between recording the answer that ended its run and settling the call's hold
    // leaves the hold to the job's re-delivery, once its lock lapses (5 s, checked every 2 s).
    await until(async () => Number((await readDay()).held ?? 0) === 0, 30_000, 200).catch(() => undefined);
    const day = await readDay();
    const spent = Number(day.spent ?? 0);
    expect(spent + Number(day.held ?? 0)).toBeLessThanOrEqual(BUDGET_MICROS);
    // Once: every run has ended, so every hold was settled, at the cost its events report.
    const events: TraceEvent[][] = await Promise.all(runs.map(({ run_id }) => collect(client, run_id)));
    const reported = events.flat().flatMap((event) => (event.kind === 'TokensConsumed' ? [event.cost_usd ?? 0] : []));
    expect(reported).toHaveLength(completed.length);
    const reportedMicros = reported.reduce((sum, cost) => sum + Math.round(cost * 1_000_000), 0);
    expect(reportedMicros).toBeLessThanOrEqual(BUDGET_MICROS);
    expect(Number(day.held ?? 0)).toBe(0);
    expect(spent).toBe(reportedMicros);
    expect((await client.tenant('acme')).cost_usd_today).toBe(spent / 1_000_000);

    // No refused call reached the provider; every request is a recorded answer's or one whose worker was killed mid-flight.
    const refusedInputs = new Set(records.flatMap((record, i) => (record.error?.error_code === 'budget_exceeded' ? [`q${i}`] : [])));
    expect(fake.requests.filter((request) => refusedInputs.has(inputOf(request)))).toEqual([]);
    // One hold per answered call, settled; none for a refused one: a killed call's re-delivery reused its hold.
    const holds = await Promise.all(runs.map(({ run_id }) => workers.reader().hget(keysFor(workers.prefix).runCost(run_id), 's1|1')));
    expect(holds.map((hold, i) => [records[i]!.status, hold])).toEqual(records.map((record) => [record.status, record.status === 'completed' ? 's' : null]));
    // Calls in flight when their worker was killed were asked again (the provider saw them twice), answered once.
    expect(fake.requests.length).toBeGreaterThan(completed.length);
    // At most the calls the killed workers held, and one worker's more: on a starved machine a live
    // worker can miss renewing its locks, and BullMQ's stall check then hands its calls on as well.
    expect(fake.requests.length - completed.length).toBeLessThanOrEqual((kills + 1) * CONCURRENCY);
    await client.close();
  }, 120_000);

  it("stops a worker whose module's worker_options has a bad price or budget, naming it", async () => {
    const workers = forTest('cost-bad-module');
    const bad = (options: object) => workers.start({ env: { OPENAI_BASE_URL: 'http://127.0.0.1:9/v1', OPENAI_API_KEY: 'k', COST_OPTIONS: JSON.stringify(options) } });
    await expect(bad({ pricing: { priced: { input_per_mtok: -1, output_per_mtok: 1 } } })).rejects.toThrow(/pricing\.priced\.input_per_mtok: expected a number from 0 to 1000000/);
    await expect(bad({ tenant_budgets: { acme: { max_cost_usd_per_day: 'ten' } } })).rejects.toThrow(
      /tenant_budgets\.acme\.max_cost_usd_per_day: expected a number of USD >= 0, got "ten"/,
    );
    await expect(bad({ pricing: {}, budgets: {} })).rejects.toThrow(/budgets/);
  }, 60_000);
});
