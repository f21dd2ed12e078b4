import { Agent, silentLogger, tool } from '@arcflow/core';
import { createClient, startWorker } from '@arcflow/queue';
import { TEST_REDIS_URL, cleanupPrefix, reply, scriptedProvider, testPrefix, toolCalls } from '@arcflow/testing';
import { metrics } from '@opentelemetry/api';
import { AggregationTemporality, type DataPoint, type Histogram, MeterProvider, MetricReader, type ResourceMetrics } from '@opentelemetry/sdk-metrics';
import { afterAll, describe, expect, it } from 'vitest';
import { startMetrics } from '../src/index.ts';
import { METER_NAME } from '../src/metrics.ts';

// An application that embeds a worker and registered its own global MeterProvider (SPEC §18).

/** A reader the test collects by hand. */
class AppReader extends MetricReader {
  constructor(temporality = AggregationTemporality.CUMULATIVE) {
    super({ aggregationTemporalitySelector: () => temporality });
  }
  protected async onShutdown(): Promise<void> {}
  protected async onForceFlush(): Promise<void> {}
}

const prefix = testPrefix('app-meter-provider');
const reader = new AppReader();
const appProvider = new MeterProvider({ readers: [reader] });
metrics.setGlobalMeterProvider(appProvider);

afterAll(async () => {
  metrics.disable();
  await appProvider.shutdown();
  await cleanupPrefix(prefix);
});

/** arcflow's points as the application's reader collects them: metric name → points. */
async function arcflowPoints(): Promise<Map<string, DataPoint<number | Histogram>[]>> {
  const { resourceMetrics } = (await reader.collect()) as { resourceMetrics: ResourceMetrics };
  const scope = resourceMetrics.scopeMetrics.find((entry) => entry.scope.name === METER_NAME);
  return new Map((scope?.metrics ?? []).map((metric) => [metric.descriptor.name, metric.dataPoints as DataPoint<number | Histogram>[]]));
}

const lookup = tool({ name: 'lookup', description: 'Looks up', input_schema: { type: 'object' }, handler: () => 'found' });

describe('an application with its own global MeterProvider', () => {
  it("gets arcflow's metrics through it, its queues' gauges included; a model given per run that nothing names is recorded as _OTHER; the provider stays the application's", async () => {
    const agent = new Agent({ name: 'embedded', tools: [lookup], model: 'named-model' });
    const model = scriptedProvider([toolCalls([{ name: 'lookup', args: {} }]), reply('done'), reply('again')]);
    const worker = await startWorker({ agents: [agent], provider: model, redis: TEST_REDIS_URL, prefix, logger: silentLogger });
    const client = createClient({ redis: TEST_REDIS_URL, prefix });
    try {
      const first = await client.enqueue({ agent: 'embedded', input: 'go' });
      expect((await client.wait(first.run_id, { timeout_ms: 20_000 })).status).toBe('completed');
      const second = await client.enqueue({ agent: 'embedded', input: 'go', config: { model: 'caller-chosen-7f3a' } });
      expect((await client.wait(second.run_id, { timeout_ms: 20_000 })).status).toBe('completed');
      // The gauges of the worker's own queues, read from Redis at the collection.
      const gauges = await arcflowPoints();
      const depth = gauges.get('arcflow.queue.depth') ?? [];
      expect(new Set(depth.map((point) => point.attributes['arcflow.job.state']))).toEqual(new Set(['waiting', 'active', 'delayed']));
      expect(new Set(depth.map((point) => point.attributes['arcflow.queue']))).toEqual(new Set(worker.queues));
      const live = gauges.get('arcflow.workers.live') ?? [];
      expect(live.map((point) => point.attributes['arcflow.queue']).sort()).toEqual([...worker.queues].sort());
      expect(live.every((point) => point.value === 1)).toBe(true);
    } finally {
      await client.close();
      await worker.close();
    }
    const points = await arcflowPoints();
    const runs = points.get('arcflow.runs') ?? [];
    expect(runs.map((point) => [point.attributes['arcflow.agent'], point.attributes['arcflow.status'], point.value])).toEqual([['embedded', 'completed', 2]]);
    expect((points.get('gen_ai.execute_tool.duration') ?? []).map((point) => [point.attributes['gen_ai.tool.name'], (point.value as Histogram).count])).toEqual([['lookup', 1]]);
    const calls = (points.get('gen_ai.client.operation.duration') ?? []).map((point) => [point.attributes['gen_ai.request.model'], (point.value as Histogram).count]);
    expect(calls.sort()).toEqual([
      ['_OTHER', 1],
      ['named-model', 2],
    ]);
    expect(JSON.stringify([...points.values()])).not.toContain('caller-chosen-7f3a');
    // The histogram keeps arcflow's buckets (given to the application's SDK as advice).
    expect((points.get('gen_ai.client.operation.duration')![0]!.value as Histogram).buckets.boundaries[0]).toBe(0.01);
    expect(metrics.getMeterProvider()).toBe(appProvider);
  });

  it("records a deferred call's execution, its handler up to the defer, once", async () => {
    const later = tool({ name: 'later_tool', description: 'answers later', input_schema: { type: 'object' }, handler: (_args, ctx) => ctx.defer() });
    const agent = new Agent({ name: 'deferring', tools: [later] });
    const model = scriptedProvider([toolCalls([{ name: 'later_tool', args: {}, id: 'call_later' }]), reply('done')]);
    const worker = await startWorker({ agents: [agent], provider: model, redis: TEST_REDIS_URL, prefix, logger: silentLogger });
    const client = createClient({ redis: TEST_REDIS_URL, prefix });
    try {
      const { run_id } = await client.enqueue({ agent: 'deferring', input: 'go' });
      for (let tries = 0; (await client.get(run_id))?.status !== 'waiting'; tries += 1) {
        if (tries > 200) throw new Error('the run never waited');
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      await client.submitToolResult(run_id, 'call_later', { output: 'came back' });
      expect((await client.wait(run_id, { timeout_ms: 20_000 })).status).toBe('completed');
    } finally {
      await client.close();
      await worker.close();
    }
    const points = (await arcflowPoints()).get('gen_ai.execute_tool.duration') ?? [];
    expect(points.filter((point) => point.attributes['gen_ai.tool.name'] === 'later_tool').map((point) => (point.value as Histogram).count)).toEqual([1]);
  });

  it("gets the gauges of every embedded worker's queues, and of the others' once one closes", async () => {
    // A reader of delta temporality: a series not observed at a collection is not reported again.
    const deltaReader = new AppReader(AggregationTemporality.DELTA);
    const deltaProvider = new MeterProvider({ readers: [deltaReader] });
    metrics.disable();
    metrics.setGlobalMeterProvider(deltaProvider);
    const gaugedQueues = async () => {
      const { resourceMetrics } = (await deltaReader.collect()) as { resourceMetrics: ResourceMetrics };
      const live = resourceMetrics.scopeMetrics.find((entry) => entry.scope.name === METER_NAME)?.metrics.find((metric) => metric.descriptor.name === 'arcflow.workers.live');
      return new Set((live?.dataPoints ?? []).map((point) => String(point.attributes['arcflow.queue'])));
    };
    const start = (name: string) =>
      startWorker({
        agents: [new Agent({ name, tools: [tool({ name: `${name}_tool`, description: 'x', input_schema: { type: 'object' }, handler: () => 'ok' })] })],
        provider: scriptedProvider([]),
        redis: TEST_REDIS_URL,
        prefix,
        logger: silentLogger,
      });
    const first = await start('first_embedded');
    const second = await start('second_embedded');
    try {
      expect(await gaugedQueues()).toEqual(new Set([...first.queues, ...second.queues]));
      await first.close();
      expect(await gaugedQueues()).toEqual(new Set(second.queues));
    } finally {
      await first.close();
      await second.close();
      metrics.disable();
      metrics.setGlobalMeterProvider(appProvider);
      await deltaProvider.shutdown();
    }
  });

  it('keeps the application’s provider when arcflow’s own metrics SDK starts and shuts down in the same process', async () => {
    const own = await startMetrics({ prometheus: true });
    expect(metrics.getMeterProvider()).toBe(appProvider);
    await own.shutdown();
    expect(metrics.getMeterProvider()).toBe(appProvider);
  });
});
