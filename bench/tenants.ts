// Fair scheduling across tenants (SPEC §14, ADR 0029): what it costs Redis per job, and what it
// buys light tenants when one tenant floods a queue. Both against the single first-come queue in
// the same run: the same BullMQ jobs added without a priority.
import { resolve } from 'node:path';
import { type Queue, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { createClient, keysFor } from '@arcflow/queue';
import { spawnWorker } from '@arcflow/worker';
import { Dispatcher } from '../packages/queue/src/jobs/dispatcher.ts';
import { FairClock } from '../packages/queue/src/tenancy/fair-clock.ts';
import { type CpuSplit, REDIS_URL, cpuPer, percentile, sleep } from './lib.ts';
import { BENCH_AGENTS } from './processes.ts';
import { FAN, RUNS, engineTrial } from './throughput.ts';

const COST_JOBS = 2_000;
const COST_TRIALS = 5;
const FLOOD_RUNS = 10_000;
const LIGHT_TENANTS = 20;

/** Jobs added together, as a round of one run fans its tool calls out (throughput.ts's FAN). */
const ROUND = 8;

/**
 * Adds `count` jobs in rounds of ROUND jobs of one tenant, `tenants` tenants in turn, fairly (a
 * priority from the queue's fair clock, asked for in the round's tick as a provider job does) or
 * not, and waits until a worker has done them.
 */
async function addAndDrain(dispatcher: Dispatcher | undefined, queue: Queue, count: number, tenants: number, trial: number, fixed?: number): Promise<void> {
  const done = new Promise<void>((resolve) => {
    let left = count;
    const onDone = () => {
      left -= 1;
      if (left === 0) resolve();
    };
    doneHooks.push(onDone);
  });
  for (let round = 0; round * ROUND < count; round += 1) {
    const run_id = `run_t${trial}_${round}`;
    dispatcher?.fair.remember(run_id, { tenant: `t${round % tenants}` });
    await Promise.all(
      Array.from({ length: Math.min(ROUND, count - round * ROUND) }, async (_, call) => {
        const jobId = `${run_id}_${call}`;
        const priority = dispatcher ? await dispatcher.fair.priority(queue, run_id, jobId) : fixed;
        await queue.add('job', { call }, { jobId, ...(priority ? { priority } : {}) });
      }),
    );
  }
  await done;
  doneHooks.length = 0;
}
const doneHooks: (() => void)[] = [];

/**
 * Redis CPU per job: BullMQ jobs added in rounds, taken and completed by a no-op worker, one
 * tenant in ten a round, with fair priorities against without, and with one fixed priority (BullMQ's
 * prioritized path without the clock); alternating trials, medians.
 */
export async function fairJobCost(prefix: string): Promise<{ fair: number; plain: number; fixed: number; commands: { fair: number; plain: number; fixed: number } }> {
  const connection = new Redis(REDIS_URL, { maxRetriesPerRequest: null });
  const dispatcher = new Dispatcher(connection, keysFor(prefix));
  const arms = {
    plain: { queue: dispatcher.get('plain'), fair: undefined, cpu: [] as number[], commands: [] as number[] },
    fair: { queue: dispatcher.get('fair'), fair: dispatcher, cpu: [] as number[], commands: [] as number[] },
    fixed: { queue: dispatcher.get('fixed'), fair: undefined, cpu: [] as number[], commands: [] as number[] },
  };
  const workers = Object.values(arms).map(
    ({ queue }) => new Worker(queue.name, async () => doneHooks[0]?.(), { connection, prefix: keysFor(prefix).tag, concurrency: 32, removeOnComplete: { count: 0 } }),
  );
  try {
    for (let trial = 0; trial < COST_TRIALS + 1; trial += 1) {
      for (const [name, arm] of Object.entries(arms)) {
        const measured = await cpuPer(connection, [], COST_JOBS, () =>
          addAndDrain(arm.fair, arm.queue, COST_JOBS, 10, trial * 10 + (name === 'fair' ? 1 : 0), name === 'fixed' ? 50 : undefined),
        );
        if (trial === 0) continue;
        arm.cpu.push(measured.cpu.redis * 1000);
        arm.commands.push(measured.commands.all);
      }
    }
  } finally {
    await Promise.all(workers.map((worker) => worker.close()));
    await dispatcher.close();
    await connection.quit();
  }
  const median = (values: number[]) => percentile(values, 50);
  return {
    fair: median(arms.fair.cpu),
    plain: median(arms.plain.cpu),
    fixed: median(arms.fixed.cpu),
    commands: { fair: median(arms.fair.commands), plain: median(arms.plain.commands), fixed: median(arms.fixed.commands) },
  };
}

/**
 * Light tenants' wait under a flood: one tenant's FLOOD_RUNS jobs queued, then LIGHT_TENANTS
 * tenants add one job each, 20 ms apart, while 16 slots take jobs of 2 ms; each light job's wait
 * (from its add to its start), with fair priorities and without. Returns the p50 and p99 of each.
 */
export async function floodWaits(prefix: string): Promise<{ fair: { p50: number; p99: number }; plain: { p50: number; p99: number } }> {
  const result = { fair: { p50: 0, p99: 0 }, plain: { p50: 0, p99: 0 } };
  for (const arm of ['plain', 'fair'] as const) {
    const connection = new Redis(REDIS_URL, { maxRetriesPerRequest: null });
    const dispatcher = new Dispatcher(connection, keysFor(`${prefix}-${arm}`));
    const queue = dispatcher.get('flood');
    const add = async (run_id: string, tenant: string) => {
      if (arm === 'fair') dispatcher.fair.remember(run_id, { tenant });
      const priority = arm === 'fair' ? await dispatcher.fair.priority(queue, run_id, run_id) : undefined;
      await queue.add('job', { tenant }, { jobId: run_id, ...(priority ? { priority } : {}) });
    };
    for (let from = 0; from < FLOOD_RUNS; from += 500) await Promise.all(Array.from({ length: 500 }, (_, i) => add(`run_flood_${from + i}`, 'flood')));
    const waits: number[] = [];
    const workerConnection = connection.duplicate();
    const worker = new Worker(
      queue.name,
      async (job) => {
        if (job.data.tenant !== 'flood') waits.push(Date.now() - job.timestamp);
        await sleep(2);
      },
      { connection: workerConnection, prefix: keysFor(`${prefix}-${arm}`).tag, concurrency: 16, removeOnComplete: { count: 0 } },
    );
    for (let light = 0; light < LIGHT_TENANTS; light += 1) {
      await add(`run_light_${light}`, `light${light}`);
      await sleep(20);
    }
    while (waits.length < LIGHT_TENANTS) await sleep(20);
    await worker.close();
    await workerConnection.quit();
    await dispatcher.close();
    await connection.quit();
    result[arm] = { p50: percentile(waits, 50), p99: percentile(waits, 99) };
  }
  return result;
}

/** The most waiting jobs one `fairPriority.lua` call moves. */
const MOST_MOVED = 1_000;

/**
 * What a higher-priority job costs Redis when its tenant has MOST_MOVED level-5 jobs waiting
 * (SPEC §14, strict priority within a tenant: the waiting jobs it goes before move a turn back):
 * Redis CPU per add of 10 level-1 jobs, one at a time, against the same adds at level 5 (nothing
 * moves), each on a fresh queue holding the waiting jobs.
 */
export async function priorityMoveCost(prefix: string): Promise<{ urgent: number; same: number; moved: number }> {
  const connection = new Redis(REDIS_URL, { maxRetriesPerRequest: null });
  const dispatcher = new Dispatcher(connection, keysFor(prefix));
  const ADDS = 10;
  const perAdd: Record<'urgent' | 'same', number> = { urgent: 0, same: 0 };
  try {
    for (const arm of ['same', 'urgent'] as const) {
      const queue = dispatcher.get(`moves-${arm}`);
      const add = async (run_id: string, priority: number) => {
        dispatcher.fair.remember(run_id, { tenant: 'flood', priority });
        await queue.add('job', {}, { jobId: run_id, priority: await dispatcher.fair.priority(queue, run_id, run_id) });
      };
      for (let from = 0; from < MOST_MOVED; from += 500) await Promise.all(Array.from({ length: 500 }, (_, i) => add(`run_flood_${from + i}`, 5)));
      const measured = await cpuPer(connection, [], ADDS, async () => {
        for (let i = 0; i < ADDS; i += 1) await add(`run_${arm}_${i}`, arm === 'urgent' ? 1 : 5);
      });
      perAdd[arm] = measured.cpu.redis * 1000;
      await queue.obliterate({ force: true });
    }
  } finally {
    await dispatcher.close();
    await connection.quit();
  }
  return { ...perAdd, moved: MOST_MOVED };
}

/** The bench agents with every job added without a priority (the single first-come queue). */
const SINGLE_QUEUE_AGENTS = resolve(BENCH_AGENTS, '../agents-single-queue.ts');
const CALL_TRIALS = 9;
const CALL_WARMUP = 2;

/**
 * The whole engine with one tenant busy, fair scheduling against the single first-come queue:
 * one worker process each (the baseline's loads agents-single-queue.ts), RUNS runs of FAN no-op
 * calls a trial, the arms alternating trial by trial. Redis CPU per tool call and tool calls per
 * second, medians; `ratio` is the median of each trial's fair rate over the single queue's just before it.
 */
export async function fairCallCost(prefixes: { readonly fair: string; readonly single: string }): Promise<{ fair: Arm; single: Arm; rateRatio: number }> {
  const env = (arm: 'fair' | 'single') => ({ REDIS_URL, ARCFLOW_PREFIX: prefixes[arm], OPENAI_API_KEY: '', OPENAI_BASE_URL: '' });
  const connection = new Redis(REDIS_URL);
  const arms = {
    single: {
      worker: await spawnWorker(SINGLE_QUEUE_AGENTS, { env: env('single') }),
      client: createClient({ redis: REDIS_URL, prefix: prefixes.single }),
      rates: [] as number[],
      cpu: [] as CpuSplit[],
    },
    fair: {
      worker: await spawnWorker(BENCH_AGENTS, { env: env('fair') }),
      client: createClient({ redis: REDIS_URL, prefix: prefixes.fair }),
      rates: [] as number[],
      cpu: [] as CpuSplit[],
    },
  };
  const fairPriority = FairClock.prototype.priority;
  try {
    for (let trial = 0; trial < CALL_WARMUP + CALL_TRIALS; trial += 1) {
      for (const [name, arm] of Object.entries(arms)) {
        // This process's clock too: a run's first provider job is added by the client that enqueues it.
        if (name === 'single') FairClock.prototype.priority = async () => undefined as unknown as number;
        const measured = await cpuPer(connection, [arm.worker.pid], RUNS, () => engineTrial(arm.client, trial)).finally(() => {
          FairClock.prototype.priority = fairPriority;
        });
        if (trial < CALL_WARMUP) continue;
        arm.rates.push(measured.result);
        arm.cpu.push(measured.cpu);
      }
    }
  } finally {
    FairClock.prototype.priority = fairPriority;
    for (const arm of Object.values(arms)) {
      await arm.client.close();
      await arm.worker.stop();
    }
    await connection.quit();
  }
  const summary = (arm: { rates: number[]; cpu: CpuSplit[] }): Arm => ({
    rate: percentile(arm.rates, 50),
    cpuPerCall:
      (percentile(
        arm.cpu.map((cpu) => cpu.redis + cpu.workers + cpu.client),
        50,
      ) *
        1000) /
      FAN,
    redisPerCall:
      (percentile(
        arm.cpu.map((cpu) => cpu.redis),
        50,
      ) *
        1000) /
      FAN,
  });
  return {
    fair: summary(arms.fair),
    single: summary(arms.single),
    rateRatio: percentile(
      arms.fair.rates.map((rate, trial) => rate / arms.single.rates[trial]!),
      50,
    ),
  };
}

interface Arm {
  /** Tool calls per second. */
  readonly rate: number;
  /** Redis CPU per tool call, µs. */
  readonly redisPerCall: number;
  /** Redis's, the worker's and the client's CPU per tool call, µs. */
  readonly cpuPerCall: number;
}
