import { Agent, type ProviderRequest, silentLogger, tool } from '@arcflow/core';
import { createClient, openMetricsReader, startWorker } from '@arcflow/queue';
import { TEST_REDIS_URL, cleanupPrefix, parsePrometheusText, reply, sampleSum, scriptedProvider, testPrefix, toolCalls } from '@arcflow/testing';
import { metrics } from '@opentelemetry/api';
import { AggregationTemporality, type DataPoint, type Histogram, MeterProvider, MetricReader, type ResourceMetrics } from '@opentelemetry/sdk-metrics';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDeploymentMetrics } from '../src/index.ts';
import { METER_NAME } from '../src/metrics.ts';

// A run's tenant as a metric attribute (SPEC §18), bounded by §14's names: a tenant named in a
// worker's tenant options (any of them) as it is, `default` as it is, every other tenant `_OTHER`.

class AppReader extends MetricReader {
  constructor() {
    super({ aggregationTemporalitySelector: () => AggregationTemporality.CUMULATIVE });
  }
  protected async onShutdown(): Promise<void> {}
  protected async onForceFlush(): Promise<void> {}
}

const prefix = testPrefix('tenant-metrics');
const reader = new AppReader();
const appProvider = new MeterProvider({ readers: [reader] });
metrics.setGlobalMeterProvider(appProvider);

/** Each run's tenant (undefined: none given), and how many runs of it. */
const RUNS: readonly { readonly tenant: string | undefined; readonly count: number }[] = [
  { tenant: 'acme', count: 2 }, // named in tenant_weights
  { tenant: 'bravo', count: 1 }, // named in tenant_limits only
  { tenant: 'unnamed-one', count: 1 },
  { tenant: 'unnamed-two', count: 2 },
  { tenant: undefined, count: 1 },
];
const THREAD = `thread-canary-${Math.random().toString(36).slice(2, 8)}`;
const runIds: string[] = [];

async function arcflowPoints(): Promise<Map<string, DataPoint<number | Histogram>[]>> {
  const { resourceMetrics } = (await reader.collect()) as { resourceMetrics: ResourceMetrics };
  const scope = resourceMetrics.scopeMetrics.find((entry) => entry.scope.name === METER_NAME);
  return new Map((scope?.metrics ?? []).map((metric) => [metric.descriptor.name, metric.dataPoints as DataPoint<number | Histogram>[]]));
}

/** Per tenant label: a counter's values, or a histogram's counts (of the points matching `where`). */
function byTenant(points: DataPoint<number | Histogram>[] | undefined, where: Record<string, string> = {}): Record<string, number> {
  const totals: Record<string, number> = {};
  for (const point of points ?? []) {
    if (!Object.entries(where).every(([key, value]) => point.attributes[key] === value)) continue;
    const tenant = String(point.attributes['arcflow.tenant']);
    totals[tenant] = (totals[tenant] ?? 0) + (typeof point.value === 'number' ? point.value : point.value.count);
  }
  return totals;
}

const EXPECTED_RUNS = { acme: 2, bravo: 1, _OTHER: 3, default: 1 };

beforeAll(async () => {
  const lookup = tool({ name: 'lookup', description: 'Looks up', input_schema: { type: 'object' }, handler: () => 'found' });
  const agent = new Agent({ name: 'tenanted', tools: [lookup], model: 'named-model' });
  // Each run: one tool round, then the answer (two provider calls, one tool call).
  const turn = (request: ProviderRequest) =>
    request.messages.some((message) => message.role === 'tool')
      ? reply('done', { input: 5, output: 2, total: 7 })
      : toolCalls([{ name: 'lookup', args: {} }], { input: 3, output: 1, total: 4 });
  const model = scriptedProvider([turn], { repeat: true });
  const worker = await startWorker({
    agents: [agent],
    provider: model,
    redis: TEST_REDIS_URL,
    prefix,
    logger: silentLogger,
    tenant_weights: { acme: 2, '*': 1 },
    tenant_limits: { bravo: { max_active_runs: 5 }, '*': { runs_per_minute: 1000 } },
  });
  const client = createClient({ redis: TEST_REDIS_URL, prefix });
  try {
    for (const { tenant, count } of RUNS) {
      for (let n = 0; n < count; n += 1) {
        const { run_id } = await client.enqueue({ agent: 'tenanted', input: 'go', ...(tenant ? { tenant } : {}), ...(n === 0 ? { thread_id: `${THREAD}-${tenant}` } : {}) });
        runIds.push(run_id);
      }
    }
    for (const run_id of runIds) expect((await client.wait(run_id, { timeout_ms: 30_000 })).status).toBe('completed');
  } finally {
    await client.close();
    await worker.close();
  }
}, 60_000);

afterAll(async () => {
  metrics.disable();
  await appProvider.shutdown();
  await cleanupPrefix(prefix);
});

describe('a worker with tenant options', () => {
  it('records runs, run durations, job waits and tokens by tenant: named ones and default as they are, the rest _OTHER', async () => {
    const points = await arcflowPoints();
    expect(byTenant(points.get('arcflow.runs'))).toEqual(EXPECTED_RUNS);
    expect(byTenant(points.get('arcflow.run.duration'))).toEqual(EXPECTED_RUNS);
    // Two provider jobs and one tool job per run.
    expect(byTenant(points.get('arcflow.job.schedule_to_start'), { 'arcflow.job.kind': 'provider' })).toEqual({ acme: 4, bravo: 2, _OTHER: 6, default: 2 });
    expect(byTenant(points.get('arcflow.job.schedule_to_start'), { 'arcflow.job.kind': 'tool' })).toEqual(EXPECTED_RUNS);
    const tokens = (type: string) => {
      const sums: Record<string, number> = {};
      for (const point of points.get('gen_ai.client.token.usage') ?? []) {
        if (point.attributes['gen_ai.token.type'] !== type) continue;
        const tenant = String(point.attributes['arcflow.tenant']);
        sums[tenant] = (sums[tenant] ?? 0) + ((point.value as Histogram).sum ?? 0);
      }
      return sums;
    };
    expect(tokens('input')).toEqual({ acme: 16, bravo: 8, _OTHER: 24, default: 8 });
    expect(tokens('output')).toEqual({ acme: 6, bravo: 3, _OTHER: 9, default: 3 });
    // Provider latency and tool durations describe providers and tools: no tenant on them.
    for (const name of ['gen_ai.client.operation.duration', 'gen_ai.execute_tool.duration', 'gen_ai.invoke_agent.duration']) {
      expect((points.get(name) ?? []).length).toBeGreaterThan(0);
      for (const point of points.get(name) ?? []) expect(point.attributes['arcflow.tenant']).toBeUndefined();
    }
    const text = JSON.stringify([...points.values()]);
    expect(text).not.toContain('unnamed');
    expect(text).not.toContain(THREAD);
    for (const run_id of runIds) expect(text).not.toContain(run_id);
  });

  it("arcflow serve's deployment counter names the tenants the workers published, the rest _OTHER", async () => {
    const metricsReader = openMetricsReader({ redis: TEST_REDIS_URL, prefix, runs: true });
    const scraped = await startDeploymentMetrics(() => metricsReader.read());
    try {
      const text = await scraped.text();
      const samples = parsePrometheusText(text);
      for (const [tenant, count] of Object.entries(EXPECTED_RUNS)) {
        expect(sampleSum(samples, 'arcflow_runs_total', { arcflow_agent: 'tenanted', arcflow_status: 'completed', arcflow_tenant: tenant }), tenant).toBe(count);
      }
      expect(samples.filter((sample) => sample.name === 'arcflow_runs_total')).toHaveLength(4);
      expect(text).not.toContain('unnamed');
      expect(text).not.toContain(THREAD);
      for (const run_id of runIds) expect(text).not.toContain(run_id);
    } finally {
      await scraped.shutdown();
      await metricsReader.close();
    }
  });
});
