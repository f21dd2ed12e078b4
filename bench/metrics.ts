import { readFileSync, readdirSync } from 'node:fs';
import { QueueName, collectReadings, createClient, hashTag } from '@arcflow/queue';
import { type FakeOpenAIServer, type FakeTurn, freePort, startFakeOpenAI, startPrivateRedis } from '@arcflow/testing';
import { type WorkerProcess, spawnWorker } from '@arcflow/worker';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { REDIS_URL, percentile } from './lib.ts';
import { BENCH_AGENTS } from './processes.ts';

/**
 * Runs per trial: one round of one no-op call each (two provider jobs, one tool job). Long trials:
 * a worker's CPU comes in lumps (a major GC is several percent of a 300-run trial), and in A/A runs
 * (both arms off) the trials' ratios spread with sd 0.08 at 300 runs, 0.01 at 1,500.
 */
const RUNS_PER_TRIAL = 1500;
/** Counted trials (odd, so the median is one trial's); each gives one on / off ratio, and the result is their median. */
const TRIALS = 11;
const WARMUP_TRIALS = 2;
/** Prometheus's default scrape interval. */
const SCRAPE_INTERVAL_MS = 15_000;
/** Scrapes timed on their own at the end. */
const SCRAPES = 20;

export interface MetricsCpu {
  /** Worker CPU per run (ms), metrics off and on: medians over the counted trials. */
  readonly off: number;
  readonly on: number;
  /** The median of the trials' on / off ratios: what the target is checked against. */
  readonly ratio: number;
  /** All the counted trials' CPU on / off. */
  readonly pooled: number;
  /** Each trial's on / off: their spread says how far one trial can be trusted on this machine. */
  readonly trialRatios: readonly number[];
  /** Worker CPU of one scrape (ms): a collection, its Redis read and the text (0 in an A/A run). */
  readonly scrapeMs: number;
}

export interface MetricsCpuOptions {
  readonly model: 'instant' | 'http';
  /** Both arms without metrics (an A/A run): the ratio's noise on this machine. */
  readonly aa?: boolean;
}

/**
 * CPU milliseconds a process's threads have run so far, in nanoseconds' precision (each thread's
 * `schedstat`), where `/proc/<pid>/stat` counts 10 ms ticks: a trial's few hundred ms of CPU
 * would be off by several percent.
 */
function processCpuMs(pid: number): number {
  let ns = 0;
  for (const task of readdirSync(`/proc/${pid}/task`)) {
    try {
      ns += Number(readFileSync(`/proc/${pid}/task/${task}/schedstat`, 'utf8').split(' ')[0]);
    } catch {
      // A thread that ended between the listing and the read.
    }
  }
  return ns / 1e6;
}

/**
 * Worker CPU per run with metrics on (the Prometheus endpoint, scraped every 15 s as Prometheus
 * does by default) against off, with the bench's instant in-process model (the least CPU a run
 * takes, so the most metrics can add) or an OpenAI-compatible model over loopback HTTP (what a
 * deployment's worker does): two worker processes, each under its own prefix, given the same
 * runs at the same time in each trial, after the same warm-up. Side by side rather than one arm
 * after the other: whatever else the machine does in a trial, it does to both (in A/A runs on the
 * shared machine, alternating arms spread sd 0.06 against 0.01). CPU is read per thread from
 * `schedstat` (ns), not `/proc/<pid>/stat`'s 10 ms ticks.
 */
export async function workerCpuWithMetrics(prefixOff: string, prefixOn: string, options: MetricsCpuOptions): Promise<MetricsCpu> {
  const { model, aa = false } = options;
  const port = await freePort();
  const server = model === 'http' ? await startOneRoundModel() : undefined;
  const provider: Record<string, string> = server
    ? { OPENAI_API_KEY: 'bench-key', OPENAI_BASE_URL: server.url, ARCFLOW_MODEL: 'bench-model' }
    : { OPENAI_API_KEY: '', OPENAI_BASE_URL: '' };
  const env = (prefix: string) => ({ REDIS_URL, ARCFLOW_PREFIX: prefix, ...provider, OTEL_EXPORTER_OTLP_ENDPOINT: '' });
  const workers: Record<Arm, WorkerProcess> = {
    off: await spawnWorker(BENCH_AGENTS, { env: env(prefixOff) }),
    on: await spawnWorker(BENCH_AGENTS, { env: env(prefixOn), args: aa ? [] : ['--metrics-port', String(port)] }),
  };
  const clients = { off: createClient({ redis: REDIS_URL, prefix: prefixOff }), on: createClient({ redis: REDIS_URL, prefix: prefixOn }) };
  const trial = async (arm: Arm): Promise<number> => {
    const pid = workers[arm].pid;
    const before = processCpuMs(pid);
    const ids = await Promise.all(Array.from({ length: RUNS_PER_TRIAL }, () => clients[arm].enqueue({ agent: 'bench_noop', input: 'iterations=1' })));
    for (const { run_id } of ids) await clients[arm].wait(run_id, { timeout_ms: 60_000 });
    return (processCpuMs(pid) - before) / RUNS_PER_TRIAL;
  };
  // Scraped as Prometheus would, every SCRAPE_INTERVAL_MS, all along the trials.
  const scrape = async () => (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  const scraper = aa ? undefined : setInterval(() => void scrape().catch(() => undefined), SCRAPE_INTERVAL_MS);
  try {
    const off: number[] = [];
    const on: number[] = [];
    for (let n = 0; n < WARMUP_TRIALS + TRIALS; n += 1) {
      // Both arms at once; the arm whose runs are enqueued first switches from trial to trial, so neither always has the head start.
      const order: [Arm, Arm] = n % 2 === 0 ? ['off', 'on'] : ['on', 'off'];
      const measured = await Promise.all(order.map(trial));
      if (n < WARMUP_TRIALS) continue;
      off.push(measured[order.indexOf('off')]!);
      on.push(measured[order.indexOf('on')]!);
    }
    const total = (values: readonly number[]) => values.reduce((sum, value) => sum + value, 0);
    const trialRatios = on.map((value, index) => value / off[index]!);
    let scrapeMs = 0;
    if (!aa) {
      const beforeScrapes = processCpuMs(workers.on.pid);
      for (let n = 0; n < SCRAPES; n += 1) await scrape();
      scrapeMs = (processCpuMs(workers.on.pid) - beforeScrapes) / SCRAPES;
    }
    return { off: percentile(off, 50), on: percentile(on, 50), ratio: percentile(trialRatios, 50), pooled: total(on) / total(off), trialRatios, scrapeMs };
  } finally {
    if (scraper) clearInterval(scraper);
    await Promise.all([clients.off.close(), clients.on.close()]);
    await Promise.all([workers.off.stop(), workers.on.stop()]);
    await server?.close();
  }
}

type Arm = 'off' | 'on';

/**
 * An OpenAI-compatible model on loopback (this process's CPU, not the workers'): the request's
 * first tool, once, then an answer: one tool round per run, as the instant model gives it.
 */
function startOneRoundModel(): Promise<FakeOpenAIServer> {
  const usage = { prompt_tokens: 12, completion_tokens: 4 };
  return startFakeOpenAI({
    fallback: (request): FakeTurn => {
      const answered = (request.body.messages as { role: string }[]).some((message) => message.role === 'tool');
      const tool = (request.body.tools as { function: { name: string } }[] | undefined)?.[0]?.function.name;
      return answered || !tool ? { type: 'text', content: 'done', usage } : { type: 'tools', calls: [{ name: tool, arguments: {} }], usage };
    },
  });
}

export interface CollectionCost {
  /** One collection's wall time (ms), p50: the one-round-trip read, and BullMQ's reads queue by queue (what `/v1/queues` does). */
  readonly oneTrip: number;
  readonly perQueue: number;
  /** Commands each collection sends to Redis (scripts and CLIENT LIST; a script's own calls inside it not counted). */
  readonly oneTripCommands: number;
  readonly perQueueCommands: number;
}

const COLLECTIONS = 100;

/**
 * The cost of one collection of the queue gauges over `queues` queues with some jobs in them, on
 * a Redis of its own (so its command count is this bench's alone).
 */
export async function collectionCost(prefix: string, queues: number): Promise<CollectionCost> {
  const server = await startPrivateRedis();
  const redis = new Redis(server.url, { maxRetriesPerRequest: null });
  const tag = hashTag(prefix);
  const names = Array.from({ length: queues }, (_, n) => QueueName.tool(`bench_tool_${n}`, '0123456789abcdef'));
  const bullQueues = names.map((name) => new Queue(name, { connection: redis, prefix: tag }));
  try {
    await Promise.all(
      bullQueues.map((queue, n) => queue.addBulk(Array.from({ length: n % 5 }, (_, k) => ({ name: 'job', data: { k }, opts: { delay: k % 2 === 0 ? 0 : 60_000 } })))),
    );
    const layout = { names, tags: [tag] };
    // Commands sent by the client: scripts and CLIENT LIST (the commands a script runs inside are not sent).
    const calls = async () =>
      [...(await redis.info('commandstats')).matchAll(/cmdstat_(evalsha|eval|client\|list|script\|load):calls=(\d+)/g)].reduce((sum, match) => sum + Number(match[2]), 0);
    const measure = async (collect: () => Promise<unknown>) => {
      for (let n = 0; n < 10; n += 1) await collect();
      const times: number[] = [];
      const before = await calls();
      for (let n = 0; n < COLLECTIONS; n += 1) {
        const started = performance.now();
        await collect();
        times.push(performance.now() - started);
      }
      return { p50: percentile(times, 50), commands: ((await calls()) - before) / COLLECTIONS };
    };
    const oneTrip = await measure(() => collectReadings(redis, layout));
    const perQueue = await measure(() =>
      Promise.all(bullQueues.map((queue) => Promise.all([queue.getJobCounts('waiting', 'prioritized', 'active', 'delayed'), queue.getWorkersCount()]))),
    );
    return { oneTrip: oneTrip.p50, perQueue: perQueue.p50, oneTripCommands: oneTrip.commands, perQueueCommands: perQueue.commands };
  } finally {
    await Promise.all(bullQueues.map((queue) => queue.close()));
    await redis.quit();
    await server.close();
  }
}
