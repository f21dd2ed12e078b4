import { WORKER_DEFAULTS, createClient } from '@arcflow/queue';
import { type WorkerProcess, spawnWorker } from '@arcflow/worker';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { cleanupPrefix } from '@arcflow/testing';
import { type CpuSplit, REDIS_URL, cpuPer, percentile, sleep } from './lib.ts';
import { BENCH_AGENTS, spawnRawWorker, stop } from './processes.ts';

const RUNS = 300;
const FAN = 8;
const TRIALS = 3;
/** Trials run first and not counted: long-running workers are measured warm (JIT-compiled), not cold. */
const WARMUP_TRIALS = 2;

export interface Throughput {
  readonly engine: number;
  readonly raw: number;
  /** CPU per FAN tool calls (one arcflow run; FAN raw jobs), medians over the counted trials. */
  readonly engineCpu: CpuSplit;
  readonly rawCpu: CpuSplit;
}

/**
 * Tool jobs per second on `workers` processes: arcflow (RUNS runs of one round of FAN no-op
 * calls) against raw BullMQ (the same number of no-op jobs), in alternating trials after the
 * same warm-up for both; medians.
 */
export async function toolJobsPerSecond(prefix: string, workers: number): Promise<Throughput> {
  const env = { REDIS_URL, ARCFLOW_PREFIX: prefix, OPENAI_API_KEY: '', OPENAI_BASE_URL: '' };
  const engineWorkers: WorkerProcess[] = await Promise.all(Array.from({ length: workers }, () => spawnWorker(BENCH_AGENTS, { env })));
  const rawWorkers = await Promise.all(Array.from({ length: workers }, () => spawnRawWorker(`${prefix}-raw`, WORKER_DEFAULTS.tools_concurrency)));
  const client = createClient({ redis: REDIS_URL, prefix });
  const connection = new Redis(REDIS_URL, { maxRetriesPerRequest: null });
  const queue = new Queue('raw-tools', { connection, prefix: `{${prefix}-raw}` });
  const engine: number[] = [];
  const raw: number[] = [];
  const engineCpu: CpuSplit[] = [];
  const rawCpu: CpuSplit[] = [];
  try {
    for (let trial = 0; trial < WARMUP_TRIALS + TRIALS; trial += 1) {
      const rawTrialResult = await cpuPer(connection, rawWorkers.map((child) => child.pid!), RUNS, () => rawTrial(queue, trial));
      const engineTrialResult = await cpuPer(connection, engineWorkers.map((worker) => worker.pid), RUNS, () => engineTrial(client, trial));
      if (trial < WARMUP_TRIALS) continue;
      raw.push(rawTrialResult.result);
      engine.push(engineTrialResult.result);
      rawCpu.push(rawTrialResult.cpu);
      engineCpu.push(engineTrialResult.cpu);
    }
    return { engine: percentile(engine, 50), raw: percentile(raw, 50), engineCpu: medianSplit(engineCpu), rawCpu: medianSplit(rawCpu) };
  } finally {
    await client.close();
    await queue.close();
    await Promise.all([...engineWorkers.map((worker) => worker.stop()), ...rawWorkers.map(stop)]);
    await cleanupPrefix(`${prefix}-raw`, REDIS_URL);
    await connection.quit();
  }
}

async function engineTrial(client: ReturnType<typeof createClient>, trial: number): Promise<number> {
  const started = performance.now();
  const ids: string[] = [];
  for (let batch = 0; batch < RUNS; batch += 50) {
    const enqueued = await Promise.all(
      Array.from({ length: Math.min(50, RUNS - batch) }, (_, index) => client.enqueue({ agent: 'bench_noop', input: `t${trial}-${batch + index} fan=${FAN}` })),
    );
    ids.push(...enqueued.map((run) => run.run_id));
  }
  const records = await Promise.all(ids.map((id) => client.wait(id, { timeout_ms: 120_000 })));
  if (records.some((run) => run.status !== 'completed')) throw new Error('a throughput run did not complete');
  return (RUNS * FAN) / ((performance.now() - started) / 1000);
}

async function rawTrial(queue: Queue, trial: number): Promise<number> {
  const total = RUNS * FAN;
  const before = await queue.getJobCountByTypes('completed');
  const started = performance.now();
  for (let batch = 0; batch < total; batch += 400) {
    await queue.addBulk(Array.from({ length: Math.min(400, total - batch) }, (_, index) => ({ name: 'noop', data: { trial, n: batch + index } })));
  }
  while ((await queue.getJobCountByTypes('completed')) < before + total) await sleep(5);
  return total / ((performance.now() - started) / 1000);
}

function medianSplit(splits: readonly CpuSplit[]): CpuSplit {
  return {
    redis: percentile(splits.map((split) => split.redis), 50),
    workers: percentile(splits.map((split) => split.workers), 50),
    client: percentile(splits.map((split) => split.client), 50),
  };
}
