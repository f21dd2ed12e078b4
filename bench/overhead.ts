import { type Agent, type ModelProvider, runLocal, silentLogger } from '@arcflow/core';
import { createClient, startWorker } from '@arcflow/queue';
import { FlowProducer, type Job, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { benchNoop, provider as instant } from './agents.ts';
import { cleanupPrefix } from '@arcflow/testing';
import { REDIS_URL, percentile } from './lib.ts';

const RUNS = 20;
const ITERATIONS = 10;

/** The instant model, noting when each call of each conversation arrives. */
function timedModel(): { provider: ModelProvider; deltas: () => number[] } {
  const calls = new Map<string, number[]>();
  return {
    provider: {
      id: 'instant',
      defaultModel: 'instant',
      complete(request, options) {
        const key = String(request.messages.find((message) => message.role === 'user')?.content);
        calls.set(key, [...(calls.get(key) ?? []), performance.now()]);
        return instant.complete(request, options);
      },
    },
    deltas: () => [...calls.values()].flatMap((times) => times.slice(1).map((time, index) => time - times[index]!)),
  };
}

/** Per-iteration time of arcflow's engine: one no-op tool per iteration, instant model, in-process worker. */
export async function engineIteration(prefix: string, agent: Agent = benchNoop): Promise<number[]> {
  const model = timedModel();
  const worker = await startWorker({ agents: [agent], provider: model.provider, redis: REDIS_URL, prefix, logger: silentLogger });
  const client = createClient({ redis: REDIS_URL, prefix });
  try {
    for (let run = 0; run < RUNS; run += 1) {
      const { run_id } = await client.enqueue({ agent: agent.name, input: `run ${run} iterations=${ITERATIONS}` });
      const record = await client.wait(run_id, { timeout_ms: 60_000 });
      if (record.status !== 'completed') throw new Error(`bench run ${run_id} ended ${record.status}`);
    }
  } finally {
    await client.close();
    await worker.close();
  }
  return model.deltas();
}

export async function localIteration(): Promise<number[]> {
  const model = timedModel();
  for (let run = 0; run < RUNS; run += 1) {
    await runLocal(benchNoop, `run ${run} iterations=${ITERATIONS}`, { provider: model.provider, logger: false });
  }
  return model.deltas();
}

/** The same shape in raw BullMQ: job i is the parent of the tool job of round i-1 and adds round i as a flow. */
export async function rawFlowIteration(prefix: string): Promise<number[]> {
  const connection = new Redis(REDIS_URL, { maxRetriesPerRequest: null });
  const tag = `{${prefix}}`;
  const flow = new FlowProducer({ connection, prefix: tag });
  const starts = new Map<number, number[]>();
  let finish!: () => void;
  let finished = 0;
  const allDone = new Promise<void>((resolve) => (finish = resolve));
  const parent = new Worker(
    'raw-provider',
    async (job: Job<{ run: number; i: number }>) => {
      const { run, i } = job.data;
      starts.set(run, [...(starts.get(run) ?? []), performance.now()]);
      await job.getChildrenValues();
      if (i >= ITERATIONS) {
        finished += 1;
        if (finished === RUNS) finish();
        return 'done';
      }
      await flow.add({
        name: 'p',
        queueName: 'raw-provider',
        data: { run, i: i + 1 },
        opts: { jobId: `r${run}-p${i + 1}` },
        children: [{ name: 't', queueName: 'raw-tool', data: { run, i }, opts: { jobId: `r${run}-t${i}`, ignoreDependencyOnFailure: true } }],
      });
      return 'next';
    },
    { connection, prefix: tag, concurrency: 8 },
  );
  const tools = new Worker('raw-tool', async () => 'ok', { connection, prefix: tag, concurrency: 16 });
  await Promise.all([parent.waitUntilReady(), tools.waitUntilReady()]);
  for (let run = 0; run < RUNS; run += 1) {
    await flow.add({ name: 'p', queueName: 'raw-provider', data: { run, i: 0 }, opts: { jobId: `r${run}-p0` } });
    await new Promise<void>((resolve) => {
      const check = () => ((starts.get(run)?.length ?? 0) > ITERATIONS ? resolve() : setTimeout(check, 1));
      check();
    });
  }
  await allDone;
  await Promise.all([parent.close(), tools.close(), flow.close()]);
  await cleanupPrefix(prefix, REDIS_URL);
  await connection.quit();
  return [...starts.values()].flatMap((times) => times.slice(1).map((time, index) => time - times[index]!));
}

export const p50 = (values: number[]) => percentile(values, 50);
