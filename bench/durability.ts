import v8 from 'node:v8';
import { runInNewContext } from 'node:vm';
import { type ArcflowClient, createClient, startWorker } from '@arcflow/queue';
import { silentLogger } from '@arcflow/core';
import { type WorkerProcess, spawnWorker } from '@arcflow/worker';
import { Redis } from 'ioredis';
import { REST_MS, benchNap, benchNoop, provider } from './agents.ts';
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

/** What `recoveryAfterKill` measured, in seconds. */
export interface Recovery {
  /** p95 over the interrupted calls of the time from the kill (or the first new worker being ready) to the call starting again. */
  readonly restartP95: number;
  /** The last run's end after the kill (or ready), less its own remaining work (one call of REST_MS). */
  readonly lastRunEnd: number;
  readonly interrupted: number;
}

/**
 * Two worker processes with `runs` runs of one 1 s call each in flight; one is SIGKILLed (or both,
 * and two new ones started: `restart`). Measures, from the kill (or from the first new worker
 * being ready), how soon the interrupted calls run again and the last run ends.
 */
export async function recoveryAfterKill(prefix: string, runs: number, restart: boolean): Promise<Recovery> {
  const redis = new Redis(REDIS_URL);
  const env = { REDIS_URL, ARCFLOW_PREFIX: prefix, OPENAI_API_KEY: '', OPENAI_BASE_URL: '' };
  const spawnTwo = () => Promise.all([spawnWorker(BENCH_AGENTS, { env }), spawnWorker(BENCH_AGENTS, { env })]);
  const workers: WorkerProcess[] = await spawnTwo();
  const client = createClient({ redis: REDIS_URL, prefix });
  const key = `{${prefix}}:bench:rest`;
  try {
    const enqueued = await Promise.all(Array.from({ length: runs }, (_, n) => client.enqueue({ agent: 'bench_rest', input: `rest ${n}` })));
    while ((await redis.llen(key)) < runs) await sleep(10);
    const victims = restart ? workers.splice(0) : workers.splice(0, 1);
    let origin = Date.now();
    for (const victim of victims) victim.kill('SIGKILL');
    if (restart) {
      await Promise.all(victims.map((victim) => victim.exited));
      // From the first new worker's ready line: it takes the interrupted calls before the second is up.
      const starting = [spawnWorker(BENCH_AGENTS, { env }), spawnWorker(BENCH_AGENTS, { env })];
      await Promise.race(starting);
      origin = Date.now();
      workers.push(...(await Promise.all(starting)));
    }
    const records = await Promise.all(enqueued.map(({ run_id }) => client.wait(run_id, { timeout_ms: 60_000 })));
    if (records.some((record) => record.status !== 'completed')) throw new Error('a recovery run did not complete');
    const restarts = (await redis.lrange(key, runs, -1)).map((entry) => (Number(entry.split(':')[0]) - origin) / 1000);
    const lastEnd = Math.max(...records.map((record) => record.finished_at!));
    return { restartP95: percentile(restarts, 95), lastRunEnd: (lastEnd - origin - REST_MS) / 1000, interrupted: restarts.length };
  } finally {
    await client.close();
    await Promise.all(workers.map((worker) => (worker.child.exitCode === null && worker.child.signalCode === null ? worker.stop() : undefined)));
    await redis.quit();
  }
}
