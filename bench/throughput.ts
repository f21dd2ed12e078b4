import { WORKER_DEFAULTS, createClient } from '@arcflow/queue';
import { type WorkerProcess, spawnWorker } from '@arcflow/testing';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { REDIS_URL, deletePrefix, sleep } from './lib.ts';
import { BENCH_AGENTS, spawnRawWorker, stop } from './processes.ts';

const RUNS = 300;
const FAN = 8;

/** Tool jobs per second through arcflow: RUNS runs of one round of FAN no-op calls, on `workers` processes. */
export async function engineToolJobsPerSecond(prefix: string, workers: number): Promise<number> {
  const env = { REDIS_URL, ARCFLOW_PREFIX: prefix, OPENAI_API_KEY: '', OPENAI_BASE_URL: '' };
  const processes: WorkerProcess[] = await Promise.all(Array.from({ length: workers }, () => spawnWorker(BENCH_AGENTS, { env })));
  const client = createClient({ redis: REDIS_URL, prefix });
  try {
    const started = performance.now();
    const ids: string[] = [];
    for (let batch = 0; batch < RUNS; batch += 50) {
      const enqueued = await Promise.all(
        Array.from({ length: Math.min(50, RUNS - batch) }, (_, index) => client.enqueue({ agent: 'bench_noop', input: `t${batch + index} fan=${FAN}` })),
      );
      ids.push(...enqueued.map((run) => run.run_id));
    }
    const records = await Promise.all(ids.map((id) => client.wait(id, { timeout_ms: 120_000 })));
    const seconds = (performance.now() - started) / 1000;
    if (records.some((run) => run.status !== 'completed')) throw new Error('a throughput run did not complete');
    return (RUNS * FAN) / seconds;
  } finally {
    await client.close();
    await Promise.all(processes.map((worker) => worker.stop()));
  }
}

/** The baseline: the same number of no-op jobs through raw BullMQ worker processes. */
export async function rawJobsPerSecond(prefix: string, workers: number): Promise<number> {
  const processes = await Promise.all(Array.from({ length: workers }, () => spawnRawWorker(prefix, WORKER_DEFAULTS.tools_concurrency)));
  const connection = new Redis(REDIS_URL, { maxRetriesPerRequest: null });
  const queue = new Queue('raw-tools', { connection, prefix: `{${prefix}}` });
  const total = RUNS * FAN;
  try {
    const started = performance.now();
    for (let batch = 0; batch < total; batch += 400) {
      await queue.addBulk(Array.from({ length: Math.min(400, total - batch) }, (_, index) => ({ name: 'noop', data: { n: batch + index } })));
    }
    while ((await queue.getJobCountByTypes('completed')) < total) await sleep(5);
    return total / ((performance.now() - started) / 1000);
  } finally {
    await queue.close();
    await Promise.all(processes.map(stop));
    await deletePrefix(connection, prefix);
    await connection.quit();
  }
}
