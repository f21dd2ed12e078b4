import { Workflow, silentLogger } from '@arcflow/core';
import { createClient, startWorker } from '@arcflow/queue';
import { cleanupPrefix } from '@arcflow/testing';
import { FlowProducer, type Job, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { noop, provider } from './agents.ts';
import { REDIS_URL } from './lib.ts';

/** The shape measured: 8 no-op tool steps in 3 layers; each step depends on every step of the layer before. */
export const LAYERS = [2, 4, 2] as const;
const RUNS = 30;

const stepId = (layer: number, index: number) => `l${layer}s${index}`;

export const layeredNoop = new Workflow({
  name: 'bench_layers',
  steps: LAYERS.flatMap((size, layer) =>
    Array.from({ length: size }, (_, index) => ({
      id: stepId(layer, index),
      tool: noop,
      args: () => ({}),
      depends_on: layer === 0 ? [] : Array.from({ length: LAYERS[layer - 1]! }, (__, before) => stepId(layer - 1, before)),
    })),
  ),
});

/** Milliseconds from enqueue to the client seeing the run completed, per run (one run at a time, in-process worker). */
export async function workflowRunTimes(prefix: string): Promise<number[]> {
  const worker = await startWorker({ agents: [layeredNoop], provider, redis: REDIS_URL, prefix, logger: silentLogger });
  const client = createClient({ redis: REDIS_URL, prefix });
  const times: number[] = [];
  try {
    for (let run = 0; run < RUNS; run += 1) {
      const started = performance.now();
      const { run_id } = await client.enqueue({ agent: layeredNoop.name, input: '{}' });
      const record = await client.wait(run_id, { timeout_ms: 60_000 });
      if (record.status !== 'completed') throw new Error(`bench workflow ${run_id} ended ${record.status}`);
      times.push(performance.now() - started);
    }
  } finally {
    await client.close();
    await worker.close();
  }
  return times;
}

/**
 * The same shape in raw BullMQ flows, as a user without arcflow would build it: each layer is a
 * flow whose parent (the layer's join) has the layer's step jobs as children; the join adds the
 * next layer's flow, and the last join ends the run. Timed from the first add to the last join.
 */
export async function rawLayeredFlowTimes(prefix: string): Promise<number[]> {
  const connection = new Redis(REDIS_URL, { maxRetriesPerRequest: null });
  const tag = `{${prefix}}`;
  const flow = new FlowProducer({ connection, prefix: tag });
  const done = new Map<number, () => void>();
  const addLayer = (run: number, layer: number) =>
    flow.add({
      name: 'join',
      queueName: 'raw-join',
      data: { run, layer },
      opts: { jobId: `r${run}-j${layer}` },
      children: Array.from({ length: LAYERS[layer]! }, (_, index) => ({ name: 'step', queueName: 'raw-step', data: {}, opts: { jobId: `r${run}-${stepId(layer, index)}` } })),
    });
  const joins = new Worker(
    'raw-join',
    async (job: Job<{ run: number; layer: number }>) => {
      const { run, layer } = job.data;
      await job.getChildrenValues();
      if (layer + 1 < LAYERS.length) await addLayer(run, layer + 1);
      else done.get(run)?.();
      return 'joined';
    },
    { connection, prefix: tag, concurrency: 8 },
  );
  const steps = new Worker('raw-step', async () => 'ok', { connection, prefix: tag, concurrency: 16 });
  await Promise.all([joins.waitUntilReady(), steps.waitUntilReady()]);
  const times: number[] = [];
  try {
    for (let run = 0; run < RUNS; run += 1) {
      const started = performance.now();
      const finished = new Promise<void>((resolve) => done.set(run, resolve));
      await addLayer(run, 0);
      await finished;
      times.push(performance.now() - started);
    }
  } finally {
    await Promise.all([joins.close(), steps.close(), flow.close()]);
    await cleanupPrefix(prefix, REDIS_URL);
    await connection.quit();
  }
  return times;
}
