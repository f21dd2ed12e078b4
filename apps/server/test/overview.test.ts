import type { RunRecord } from '@arcflow/core';
import { CONNECTION_DEFAULTS, RunStore, createClient, keysFor } from '@arcflow/queue';
import { TEST_REDIS_URL, cleanupPrefix, testPrefix } from '@arcflow/testing';
import { type WorkerProcess, spawnWorker } from '@arcflow/worker';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { percentile, readOverview, summarize } from '../src/overview.ts';
import { type ServeProcess, spawnServe } from './harness.ts';

const FIXTURE = new URL('./fixtures/console-views.ts', import.meta.url).pathname;
const prefix = testPrefix('overview');
const KEYS = { read: 'overview-read-0123456789', write: 'overview-write-0123456789' };
let serve: ServeProcess;
let worker: WorkerProcess;
let redis: Redis;

beforeAll(async () => {
  const env = { REDIS_URL: TEST_REDIS_URL, ARCFLOW_PREFIX: prefix };
  [serve, worker] = await Promise.all([
    spawnServe({ ...env, ARCFLOW_API_KEYS: `viewer:${KEYS.read}:read,backend:${KEYS.write}:write`, ARCFLOW_API_RATE: '1000' }),
    spawnWorker(FIXTURE, { env }),
  ]);
  redis = new Redis(TEST_REDIS_URL);
}, 60_000);
afterAll(async () => {
  await Promise.all([serve?.stop(), worker?.stop()]);
  redis?.disconnect();
  await cleanupPrefix(prefix);
});

const call = (path: string, key: keyof typeof KEYS | null = 'read', init: RequestInit = {}) =>
  fetch(`${serve.url}${path}`, { ...init, headers: { ...(key ? { authorization: `Bearer ${KEYS[key]}` } : {}), ...(init.body ? { 'content-type': 'application/json' } : {}) } });
const enqueue = async (agent: string, input: string): Promise<string> =>
  ((await (await call('/v1/runs', 'write', { method: 'POST', body: JSON.stringify({ agent, input }) })).json()) as { run_id: string }).run_id;
async function ended(run_id: string): Promise<RunRecord> {
  for (let tries = 0; tries < 300; tries += 1) {
    const record = (await (await call(`/v1/runs/${run_id}`)).json()) as RunRecord;
    if (['completed', 'failed', 'cancelled'].includes(record.status)) return record;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`run ${run_id} did not end`);
}
type Overview = Awaited<ReturnType<typeof readOverview>>;
const overview = async (query = ''): Promise<Overview> => (await (await call(`/v1/overview${query}`)).json()) as Overview;

describe('GET /v1/overview against a real server, Redis and worker', () => {
  it('reports queue depths now and keeps one sample a minute, however often it is asked', async () => {
    // A run whose eight calls wait 3 s: the tool queue has them active while the overview is read.
    const slow = await enqueue('fan_agent', 'wait=3000');
    let first: Overview | undefined;
    for (let tries = 0; tries < 100; tries += 1) {
      first = await overview();
      if (first.queues.some((queue) => queue.active >= 8)) break;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    const busy = first!.queues.find((queue) => queue.name.startsWith('tool-fan_wait'));
    expect(busy).toMatchObject({ active: 8, waiting: 0 });
    const minute = Math.floor(Date.now() / 60_000) * 60_000;
    // A member of another format is left out, not trusted.
    await redis.zadd(keysFor(prefix).overviewQueueDepths, minute - 120_000, '{"at":"soon","queues":7}');
    const samples = await redis.zrange(keysFor(prefix).overviewQueueDepths, 0, -1);
    const again = await overview();
    if (Math.floor(Date.now() / 60_000) * 60_000 === minute) {
      expect(await redis.zcard(keysFor(prefix).overviewQueueDepths)).toBe(samples.length);
      // This minute's bucket has the sample the minute's first read took; the bucket of the bad member, none.
      expect(again.buckets.find((bucket) => bucket.at === minute)?.active).toEqual(expect.any(Number));
      expect(again.buckets.find((bucket) => bucket.at === minute - 120_000)).toMatchObject({ waiting: null, active: null, delayed: null });
    }
    await ended(slow);
  });

  it('counts a batch of runs: started and ended per minute by status, p50/p95 durations, tokens per agent', async () => {
    const runs = await Promise.all([
      ...Array.from({ length: 6 }, (_, at) => enqueue('fan_agent', `wait=${20 + at * 10}`)),
      ...Array.from({ length: 4 }, (_, at) => enqueue('chat_agent', `what is the sea${at}`)),
    ]);
    const records = await Promise.all(runs.map(ended));
    const hour = await overview('?window=hour');
    expect(hour).toMatchObject({ window: 'hour', bucket_ms: 60_000, truncated: false });
    expect(hour.buckets).toHaveLength(60);
    expect(hour.to - hour.from).toBe(3_600_000);
    expect(hour.buckets.at(-1)!.at).toBeLessThanOrEqual(Date.now());
    // The slow run of the test before, and these ten.
    expect(hour.runs_in_window).toBe(11);
    expect(hour.buckets.reduce((sum, bucket) => sum + bucket.started, 0)).toBe(11);
    expect(hour.buckets.reduce((sum, bucket) => sum + bucket.completed, 0)).toBe(11);
    expect(hour.buckets.reduce((sum, bucket) => sum + bucket.failed + bucket.cancelled, 0)).toBe(0);
    const durations = records.map((record) => record.finished_at! - record.created_at);
    expect(hour.duration_ms.runs).toBe(11);
    expect(hour.duration_ms.p95).toBeGreaterThanOrEqual(Math.max(...durations));
    expect(hour.duration_ms.p50).toBeLessThanOrEqual(hour.duration_ms.p95!);
    expect(hour.agents).toEqual([
      { name: 'fan_agent', kind: 'agent', runs: 7, tokens: { input: 140, output: 70, total: 210 } },
      { name: 'chat_agent', kind: 'agent', runs: 4, tokens: { input: 80, output: 40, total: 120 } },
    ]);

    const day = await overview('?window=day');
    expect(day).toMatchObject({ window: 'day', bucket_ms: 900_000, runs_in_window: 11 });
    expect(day.buckets).toHaveLength(96);
    expect(day.agents).toEqual(hour.agents);
  });

  it('reads at most the newest records it may, and says so', async () => {
    const client = createClient({ redis: TEST_REDIS_URL, prefix });
    try {
      const store = new RunStore(redis, prefix, CONNECTION_DEFAULTS.retention_seconds);
      const capped = await readOverview({ client, store, redis, prefix }, 'hour', Date.now(), { max_runs_read: 5 });
      expect(capped).toMatchObject({ runs_in_window: 11, runs_read: 5, truncated: true });
      expect(capped.duration_ms.runs).toBe(5);
    } finally {
      await client.close();
    }
  });

  it('needs a key, takes read scope, and refuses an unknown window', async () => {
    expect((await call('/v1/overview', null)).status).toBe(401);
    expect((await call('/v1/overview', 'read')).status).toBe(200);
    const refused = await call('/v1/overview?window=week');
    expect(refused.status).toBe(400);
    expect(await refused.json()).toMatchObject({ code: 'invalid_request' });
    expect((await call('/v1/overview?limit=3')).status).toBe(400);
  });
});

describe('the overview’s arithmetic', () => {
  const run = (fields: Partial<RunRecord> & { cost_usd?: number }): RunRecord =>
    ({
      run_id: 'r',
      status: 'completed',
      agent: 'a',
      iterations: 1,
      created_at: 0,
      usage: { input: 1, output: 1, total: 2, ...(fields.cost_usd !== undefined ? { cost_usd: fields.cost_usd } : {}) },
      ...fields,
    }) as RunRecord;

  it('takes nearest-rank percentiles', () => {
    expect(percentile([], 0.5)).toBeNull();
    expect(percentile([5], 0.95)).toBe(5);
    expect(percentile([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 0.5)).toBe(5);
    expect(percentile([10, 9, 8, 7, 6, 5, 4, 3, 2, 1], 0.95)).toBe(10);
  });

  it('puts each run in the bucket it ended in, by status, and sums tokens and cost per agent over runs that ended in the window', () => {
    const frame = { from: 1_000, to: 4_000, bucket_ms: 1_000, started: [2, 1, 0] };
    const summary = summarize(
      [
        run({ created_at: 900, finished_at: 1_100, cost_usd: 0.25 }),
        run({ created_at: 1_000, finished_at: 1_500, status: 'failed', cost_usd: 0.5 }),
        run({ created_at: 2_000, finished_at: 3_900, status: 'cancelled', agent: '', workflow: 'w' }),
        // Ended after the window, or not at all: counted nowhere.
        run({ created_at: 2_000, finished_at: 4_000 }),
        run({ created_at: 2_500, status: 'running' }),
      ],
      frame,
    );
    expect(summary.buckets.map(({ at, started, completed, failed, cancelled, p50_ms, p95_ms }) => [at, started, completed, failed, cancelled, p50_ms, p95_ms])).toEqual([
      [1_000, 2, 1, 1, 0, 200, 500],
      [2_000, 1, 0, 0, 0, null, null],
      [3_000, 0, 0, 0, 1, 1_900, 1_900],
    ]);
    expect(summary.duration_ms).toEqual({ p50: 500, p95: 1_900, runs: 3 });
    expect(summary.agents).toEqual([
      { name: 'a', kind: 'agent', runs: 2, tokens: { input: 2, output: 2, total: 4 }, cost_usd: 0.75 },
      { name: 'w', kind: 'workflow', runs: 1, tokens: { input: 1, output: 1, total: 2 } },
    ]);
  });
});
