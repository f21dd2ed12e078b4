import { newRunId } from '@arcflow/core';
import { WORKER_DEFAULTS, createClient, hashTag } from '@arcflow/queue';
import { type WorkerProcess, spawnWorker } from '@arcflow/worker';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { cleanupPrefix } from '@arcflow/testing';
import { type CpuSplit, REDIS_URL, type RedisCommands, cpuPer, percentile, sleep } from './lib.ts';
import { FLOOR_QUEUES, addJob, floorDoneChannel, floorProviderJob } from './floor-jobs.ts';
import { BENCH_AGENTS, spawnFloorWorker, spawnRawWorker, stop } from './processes.ts';

/** Runs per trial, each of FAN no-op calls in one round. */
export const RUNS = 300;
export const FAN = 8;
/**
 * Counted trials per arm. The machine's speed drifts by tens of percent within seconds (A/A runs
 * of bench/ab/ab.ts), so the arms alternate trial by trial, and a ratio is the median of each
 * trial's ratio to the raw trial run just before it, not a ratio of two medians taken at
 * different moments.
 */
export const TRIALS = 9;
/** Trials run first and not counted: long-running workers are measured warm (JIT-compiled), not cold. */
const WARMUP_TRIALS = 2;

export interface Throughput {
  readonly engine: number;
  readonly raw: number;
  /** The design's floor: arcflow's jobs without the run store (see floor-worker.ts). */
  readonly floor: number;
  /** Median over the trials of arcflow's rate / raw's rate in the same trial. */
  readonly engineToRaw: number;
  readonly floorToRaw: number;
  /** CPU per FAN tool calls (one arcflow run; FAN raw jobs), medians over the counted trials. */
  readonly engineCpu: CpuSplit;
  readonly rawCpu: CpuSplit;
  readonly floorCpu: CpuSplit;
  /** Redis commands per FAN tool calls (those scripts call included), medians over the counted trials. */
  readonly engineCommands: RedisCommands;
  readonly rawCommands: RedisCommands;
  readonly floorCommands: RedisCommands;
}

/**
 * Tool jobs per second on `workers` processes: arcflow (RUNS runs of one round of FAN no-op
 * calls) against raw BullMQ (the same number of no-op jobs) and against the design's floor (the
 * same runs' BullMQ jobs with no run store), in alternating trials after the same warm-up for
 * all three; medians.
 */
export async function toolJobsPerSecond(prefix: string, workers: number): Promise<Throughput> {
  const env = { REDIS_URL, ARCFLOW_PREFIX: prefix, OPENAI_API_KEY: '', OPENAI_BASE_URL: '' };
  const engineWorkers: WorkerProcess[] = await Promise.all(Array.from({ length: workers }, () => spawnWorker(BENCH_AGENTS, { env })));
  const rawWorkers = await Promise.all(Array.from({ length: workers }, () => spawnRawWorker(`${prefix}-raw`, WORKER_DEFAULTS.tools_concurrency)));
  const floorWorkers = await Promise.all(Array.from({ length: workers }, () => spawnFloorWorker(`${prefix}-floor`, FAN)));
  const client = createClient({ redis: REDIS_URL, prefix });
  const connection = new Redis(REDIS_URL, { maxRetriesPerRequest: null });
  const queue = new Queue('raw-tools', { connection, prefix: `{${prefix}-raw}` });
  const floor = await FloorClient.start(connection, `${prefix}-floor`);
  const arms = {
    raw: {
      pids: rawWorkers.map((child) => child.pid!),
      trial: (trial: number) => rawTrial(queue, trial),
      rates: [] as number[],
      cpu: [] as CpuSplit[],
      commands: [] as RedisCommands[],
    },
    engine: {
      pids: engineWorkers.map((worker) => worker.pid),
      trial: (trial: number) => engineTrial(client, trial),
      rates: [] as number[],
      cpu: [] as CpuSplit[],
      commands: [] as RedisCommands[],
    },
    floor: { pids: floorWorkers.map((child) => child.pid!), trial: () => floor.trial(), rates: [] as number[], cpu: [] as CpuSplit[], commands: [] as RedisCommands[] },
  };
  try {
    for (let trial = 0; trial < WARMUP_TRIALS + TRIALS; trial += 1) {
      for (const arm of Object.values(arms)) {
        const measured = await cpuPer(connection, arm.pids, RUNS, () => arm.trial(trial));
        if (trial < WARMUP_TRIALS) continue;
        arm.rates.push(measured.result);
        arm.cpu.push(measured.cpu);
        arm.commands.push(measured.commands);
      }
    }
    const toRaw = (rates: readonly number[]) =>
      percentile(
        rates.map((rate, trial) => rate / arms.raw.rates[trial]!),
        50,
      );
    return {
      engine: percentile(arms.engine.rates, 50),
      raw: percentile(arms.raw.rates, 50),
      floor: percentile(arms.floor.rates, 50),
      engineToRaw: toRaw(arms.engine.rates),
      floorToRaw: toRaw(arms.floor.rates),
      engineCpu: medianOf(arms.engine.cpu),
      rawCpu: medianOf(arms.raw.cpu),
      floorCpu: medianOf(arms.floor.cpu),
      engineCommands: medianOf(arms.engine.commands),
      rawCommands: medianOf(arms.raw.commands),
      floorCommands: medianOf(arms.floor.commands),
    };
  } finally {
    await client.close();
    await queue.close();
    await floor.close();
    await Promise.all([...engineWorkers.map((worker) => worker.stop()), ...rawWorkers.map(stop), ...floorWorkers.map(stop)]);
    await cleanupPrefix(`${prefix}-raw`, REDIS_URL);
    await cleanupPrefix(`${prefix}-floor`, REDIS_URL);
    await connection.quit();
  }
}

/** Enqueues the floor's runs (provider job 1 of each) and waits until each one's provider job 2 has run. */
class FloorClient {
  private readonly waiting = new Map<string, () => void>();

  private constructor(
    private readonly providers: Queue,
    private readonly subscriber: Redis,
  ) {
    subscriber.on('message', (_channel: string, run_id: string) => this.waiting.get(run_id)?.());
  }

  static async start(connection: Redis, prefix: string): Promise<FloorClient> {
    const subscriber = connection.duplicate();
    await subscriber.subscribe(floorDoneChannel(prefix));
    return new FloorClient(new Queue(FLOOR_QUEUES.provider, { connection, prefix: hashTag(prefix) }), subscriber);
  }

  async trial(): Promise<number> {
    const started = performance.now();
    const finished: Promise<void>[] = [];
    for (let batch = 0; batch < RUNS; batch += 50) {
      await Promise.all(
        Array.from({ length: Math.min(50, RUNS - batch) }, () => {
          const run_id = newRunId();
          finished.push(new Promise<void>((done) => this.waiting.set(run_id, done)));
          return addJob(this.providers, floorProviderJob(run_id, 1));
        }),
      );
    }
    await Promise.all(finished);
    this.waiting.clear();
    return (RUNS * FAN) / ((performance.now() - started) / 1000);
  }

  async close(): Promise<void> {
    await this.providers.close();
    await this.subscriber.quit();
  }
}

/** One trial of arcflow: RUNS runs of FAN no-op calls, enqueued 50 at a time; tool jobs per second. */
export async function engineTrial(client: Pick<ReturnType<typeof createClient>, 'enqueue' | 'wait'>, trial: number): Promise<number> {
  const started = performance.now();
  const ids: string[] = [];
  for (let batch = 0; batch < RUNS; batch += 50) {
    const enqueued = await Promise.all(
      Array.from({ length: Math.min(50, RUNS - batch) }, (_, index) => client.enqueue({ agent: 'bench_noop', input: `t${trial}-${batch + index} fan=${FAN}` })),
    );
    ids.push(...enqueued.map((run) => run.run_id));
  }
  const records = await Promise.all(ids.map((id) => client.wait(id, { timeout_ms: 120_000 })));
  const notCompleted = records.find((run) => run.status !== 'completed');
  if (notCompleted) throw new Error(`a throughput run did not complete: ${JSON.stringify({ status: notCompleted.status, error: notCompleted.error })}`);
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

/** The median of each field over trials' rows. */
function medianOf<Row extends { [Key in keyof Row]: number }>(rows: readonly Row[]): Row {
  const keys = Object.keys(rows[0] ?? {}) as (keyof Row)[];
  return Object.fromEntries(
    keys.map((key) => [
      key,
      percentile(
        rows.map((row) => row[key]),
        50,
      ),
    ]),
  ) as Row;
}
