import { silentLogger } from '@arcflow/core';
import { createClient, startWorker } from '@arcflow/queue';
import { startServer } from '@arcflow/server';
import { Redis } from 'ioredis';
import { benchHold, benchNoop, provider } from './agents.ts';
import { REDIS_URL, percentile, redisCpuSeconds, sleep } from './lib.ts';

const SEQUENTIAL = 300;
const CONCURRENT = 2_000;
const IN_FLIGHT = 32;

export interface EnqueueCost {
  readonly p50Ms: number;
  readonly perSecond: number;
}

/** Times `enqueue` one at a time (p50), then with IN_FLIGHT at once (per second). */
async function measure(enqueue: (index: number) => Promise<unknown>): Promise<EnqueueCost> {
  const times: number[] = [];
  for (let index = 0; index < SEQUENTIAL; index += 1) {
    const started = performance.now();
    await enqueue(index);
    times.push(performance.now() - started);
  }
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: IN_FLIGHT }, async () => {
      while (next < CONCURRENT) await enqueue(SEQUENTIAL + next++);
    }),
  );
  return { p50Ms: percentile(times, 50), perSecond: (CONCURRENT * 1000) / (performance.now() - started) };
}

/** `POST /v1/runs` on `arcflow serve` against `client.enqueue`, same Redis, same agent, in this run. */
export async function enqueueOverHttp(prefix: string): Promise<{ http: EnqueueCost; client: EnqueueCost }> {
  // A worker registers the agent and runs what is enqueued (one iteration each), for both arms alike.
  const worker = await startWorker({ agents: [benchNoop], provider, redis: REDIS_URL, prefix, logger: silentLogger });
  const server = await startServer({ redis: REDIS_URL, prefix, port: 0, log: false, rate_per_second: 1_000_000 });
  const client = createClient({ redis: REDIS_URL, prefix });
  try {
    const body = (index: number) => JSON.stringify({ agent: benchNoop.name, input: `http ${index}` });
    const http = await measure(async (index) => {
      const response = await fetch(`${server.url}/v1/runs`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: body(index) });
      if (response.status !== 201) throw new Error(`POST /v1/runs answered ${response.status}`);
      await response.arrayBuffer();
    });
    const direct = await measure((index) => client.enqueue({ agent: benchNoop.name, input: `client ${index}` }));
    return { http, client: direct };
  } finally {
    await client.close();
    await server.close();
    await worker.close();
  }
}

const RUNS = 50;
const FOLLOWERS = 500;
const WINDOW_MS = 4_000;

/**
 * What following costs Redis: 50 runs each waiting on a minute-long tool call (so the runs
 * themselves leave Redis nearly idle), and Redis CPU over the same window length with no
 * follower, with 500 followers over SSE on one `serve` process (10 per run), and with the same
 * 500 followers polling through `client.events({ follow: true })` (every 100 ms).
 */
export async function followerCost(prefix: string): Promise<{ none: number; sse: number; polling: number }> {
  const worker = await startWorker({ agents: [benchHold], provider, redis: REDIS_URL, prefix, logger: silentLogger });
  const server = await startServer({ redis: REDIS_URL, prefix, port: 0, log: false, rate_per_second: 1_000_000 });
  const client = createClient({ redis: REDIS_URL, prefix });
  const redis = new Redis(REDIS_URL);
  const stop = new AbortController();
  try {
    const ids: string[] = [];
    for (let run = 0; run < RUNS; run += 1) ids.push((await client.enqueue({ agent: benchHold.name, input: `follow ${run}` })).run_id);
    await sleep(1_000);
    const cpuOver = async () => {
      const before = await redisCpuSeconds(redis);
      await sleep(WINDOW_MS);
      return ((await redisCpuSeconds(redis)) - before) * 1000;
    };
    const none = await cpuOver();
    const streams = ids.flatMap((run_id) =>
      Array.from({ length: FOLLOWERS / RUNS }, () =>
        fetch(`${server.url}/v1/runs/${run_id}/events`, { headers: { accept: 'text/event-stream' }, signal: stop.signal })
          .then(async (response) => {
            const reader = response.body!.getReader();
            for (;;) if ((await reader.read()).done) return;
          })
          .catch(() => undefined),
      ),
    );
    await sleep(1_000);
    const sse = await cpuOver();
    stop.abort();
    await Promise.all(streams);
    const polling = new AbortController();
    const pollers = ids.flatMap((run_id) =>
      Array.from({ length: FOLLOWERS / RUNS }, async () => {
        for await (const _event of client.events(run_id, { follow: true })) if (polling.signal.aborted) return;
      }),
    );
    await sleep(1_000);
    const polled = await cpuOver();
    polling.abort();
    await Promise.all(ids.map((run_id) => client.cancel(run_id)));
    await Promise.race([Promise.all(pollers), sleep(5_000)]);
    return { none, sse, polling: polled };
  } finally {
    stop.abort();
    await client.close();
    await server.close();
    await worker.close();
    await redis.quit();
  }
}
