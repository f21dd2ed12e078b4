import v8 from 'node:v8';
import { runInNewContext } from 'node:vm';
import { type ArcflowClient, createClient, startWorker } from '@arcflow/queue';
import { silentLogger } from '@arcflow/core';
import { type WorkerProcess, spawnWorker } from '@arcflow/worker';
import { Redis } from 'ioredis';
import { benchNap, benchNoop, provider } from './agents.ts';
import { REDIS_URL, percentile, redisUsedBytes, rssMiB, sleep } from './lib.ts';
import { BENCH_AGENTS } from './processes.ts';

/** Run latency of one iteration of 8 tools that each take 250 ms (p50 of 5 runs, in-process worker). */
export async function parallelNapLatency(prefix: string): Promise<number> {
  const worker = await startWorker({ agents: [benchNap], provider, redis: REDIS_URL, prefix, logger: silentLogger });
  const client = createClient({ redis: REDIS_URL, prefix });
  const latencies: number[] = [];
  try {
    for (let run = 0; run < 5; run += 1) {
      const started = performance.now();
      const { run_id } = await client.enqueue({ agent: 'bench_nap', input: `nap ${run} fan=8` });
      await client.wait(run_id, { timeout_ms: 30_000 });
      latencies.push(performance.now() - started);
    }
  } finally {
    await client.close();
    await worker.close();
  }
  return percentile(latencies, 50);
}

/** Runs `count` runs of one no-op call, 100 at a time, numbered from `from`. */
async function runNoops(client: ArcflowClient, from: number, count: number): Promise<void> {
  for (let batch = 0; batch < count; batch += 100) {
    const ids = await Promise.all(Array.from({ length: 100 }, (_, index) => client.enqueue({ agent: 'bench_noop', input: `m${from + batch + index}` })));
    await Promise.all(ids.map(({ run_id }) => client.wait(run_id, { timeout_ms: 60_000 })));
  }
}

/**
 * Worker RSS after 1k and 10k runs (one no-op call each), and Redis bytes per retained run.
 * `nodeOptions` starts the worker with those Node options (e.g. a heap cap).
 */
export async function memoryProfile(prefix: string, nodeOptions?: string): Promise<{ rss1k: number; rss10k: number; bytesPerRun: number }> {
  const redis = new Redis(REDIS_URL);
  const env = { REDIS_URL, ARCFLOW_PREFIX: prefix, OPENAI_API_KEY: '', OPENAI_BASE_URL: '', ...(nodeOptions ? { NODE_OPTIONS: nodeOptions } : {}) };
  const worker = await spawnWorker(BENCH_AGENTS, { env });
  const client = createClient({ redis: REDIS_URL, prefix });
  const before = await redisUsedBytes(redis);
  try {
    await runNoops(client, 0, 1_000);
    await sleep(500);
    const rss1k = rssMiB(worker.pid);
    await runNoops(client, 1_000, 9_000);
    await sleep(500);
    const rss10k = rssMiB(worker.pid);
    const bytesPerRun = ((await redisUsedBytes(redis)) - before) / 10_000;
    return { rss1k, rss10k, bytesPerRun };
  } finally {
    await client.close();
    await worker.stop();
    await redis.quit();
  }
}

/**
 * The leak check behind the RSS row: heap in use after a full GC, after 1k and after 10k runs,
 * with the worker in this process. RSS follows V8's heap sizing (old space grows between major
 * GCs and is rarely given back), so it moves by tens of MiB with no leak; this does not.
 */
export async function heapAfterGc(prefix: string): Promise<{ heap1k: number; heap10k: number }> {
  v8.setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as () => void;
  const heapMiB = () => {
    gc();
    gc();
    return process.memoryUsage().heapUsed / 1024 / 1024;
  };
  const worker = await startWorker({ agents: [benchNoop], provider, redis: REDIS_URL, prefix, logger: silentLogger });
  const client = createClient({ redis: REDIS_URL, prefix });
  try {
    await runNoops(client, 0, 1_000);
    const heap1k = heapMiB();
    await runNoops(client, 1_000, 9_000);
    return { heap1k, heap10k: heapMiB() };
  } finally {
    await client.close();
    await worker.close();
  }
}

/** Seconds from SIGKILL of the worker running a blocked tool to that call starting again on the other worker. */
export async function recoverySeconds(prefix: string): Promise<number> {
  const redis = new Redis(REDIS_URL);
  const env = { REDIS_URL, ARCFLOW_PREFIX: prefix, OPENAI_API_KEY: '', OPENAI_BASE_URL: '' };
  const workers: WorkerProcess[] = await Promise.all([spawnWorker(BENCH_AGENTS, { env }), spawnWorker(BENCH_AGENTS, { env })]);
  const client = createClient({ redis: REDIS_URL, prefix });
  const key = `{${prefix}}:bench:stuck`;
  try {
    const { run_id } = await client.enqueue({ agent: 'bench_stuck', input: 'stuck' });
    while ((await redis.llen(key)) < 1) await sleep(10);
    const pid = Number((await redis.lindex(key, 0))!.split(':')[1]);
    const victim = workers.find((worker) => worker.pid === pid)!;
    const killedAt = Date.now();
    victim.kill('SIGKILL');
    while ((await redis.llen(key)) < 2) await sleep(20);
    const restartedAt = Number((await redis.lindex(key, 1))!.split(':')[0]);
    const run = await client.wait(run_id, { timeout_ms: 30_000 });
    if (run.status !== 'completed') throw new Error(`recovery run ended ${run.status}`);
    return (restartedAt - killedAt) / 1000;
  } finally {
    await client.close();
    await Promise.all(workers.map((worker) => (worker.child.exitCode === null && worker.child.signalCode === null ? worker.stop() : undefined)));
    await redis.quit();
  }
}
