import type { Attributes } from '@opentelemetry/api';
import { PrometheusSerializer } from '@opentelemetry/exporter-prometheus';
import { AggregationTemporality, MeterProvider, type MetricData, type MetricProducer, MetricReader, type ResourceMetrics } from '@opentelemetry/sdk-metrics';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { METER_NAME } from '../src/metrics.ts';
import { type RecordedMetrics, createRecordedMetrics } from '../src/record-metrics.ts';
import { RecordedMetricsProducer } from '../src/recorded-producer.ts';
import { sdkInstruments } from './sdk-instruments.ts';

/** A reader collected by hand, at one temporality. */
class ManualReader extends MetricReader {
  constructor(temporality: AggregationTemporality, metricProducers: MetricProducer[] = []) {
    super({ aggregationTemporalitySelector: () => temporality, metricProducers });
  }
  protected async onShutdown(): Promise<void> {}
  protected async onForceFlush(): Promise<void> {}
}

type Name = keyof RecordedMetrics;
/** One record: the metric, its attribute values as the recording functions key them, its attributes, the value. */
type Recording = readonly [Name, readonly [string, string, string, string], Attributes, number];

const call = { 'gen_ai.operation.name': 'chat', 'gen_ai.provider.name': 'openai', 'gen_ai.request.model': 'm' };
const failed = { ...call, 'error.type': 'bad_request' };
const keys = (...values: string[]) => [values[0] ?? '', values[1] ?? '', values[2] ?? '', values[3] ?? ''] as const;

/** Rounds of records, with a collection after each: values on and between bucket boundaries, past the last, zero, NaN, negative. */
const ROUNDS: readonly (readonly Recording[])[] = [
  [
    ['operationDuration', keys('openai', 'm'), call, 0.01],
    ['operationDuration', keys('openai', 'm'), call, 0.015],
    ['operationDuration', keys('openai', 'm', 'bad_request'), failed, 100],
    ['tokenUsage', keys('openai', 'm', '', 'input'), { ...call, 'gen_ai.token.type': 'input' }, 12],
    ['tokenUsage', keys('openai', 'm', '', 'output'), { ...call, 'gen_ai.token.type': 'output' }, Number.NaN],
    ['toolDuration', keys('lookup'), { 'gen_ai.tool.name': 'lookup' }, 0],
    ['runs', keys('agent', 'a', 'completed'), { 'arcflow.agent': 'a', 'arcflow.status': 'completed' }, 1],
    ['runDuration', keys('agent', 'a', 'completed'), { 'arcflow.agent': 'a', 'arcflow.status': 'completed' }, 3600],
    ['scheduleToStart', keys('agent-a', 'provider'), { 'arcflow.queue': 'agent-a', 'arcflow.job.kind': 'provider' }, -1],
  ],
  [
    ['operationDuration', keys('openai', 'm'), call, 81.92],
    ['runs', keys('workflow', 'w', 'failed'), { 'arcflow.workflow': 'w', 'arcflow.status': 'failed' }, 1],
    ['runs', keys('agent', 'a', 'completed'), { 'arcflow.agent': 'a', 'arcflow.status': 'completed' }, 1],
    ['stepDuration', keys('a', 'provider_error'), { 'gen_ai.agent.name': 'a', 'error.type': 'provider_error' }, 0.3],
  ],
  [],
  [
    ['tokenUsage', keys('openai', 'm', '', 'output'), { ...call, 'gen_ai.token.type': 'output' }, 4],
    ['timeToFirstChunk', keys('openai', 'm'), call, 0.0005],
    ['scheduleToStart', keys('agent-a', 'provider'), { 'arcflow.queue': 'agent-a', 'arcflow.job.kind': 'provider' }, 0.002],
  ],
];

/**
 * What an exporter reads of a collection. The SDK's descriptors also carry the instrument's type
 * and advice, which no exporter reads; a delta collection lists its points in the order of their
 * first record in the interval (ours in the order of their first record ever), so points are compared by attributes.
 */
function exported(metrics: ResourceMetrics) {
  const byAttributes = (point: { attributes: Attributes }) => JSON.stringify(Object.entries(point.attributes).sort());
  return metrics.scopeMetrics.map((scope) => ({
    scope: scope.scope,
    metrics: scope.metrics.map((data: MetricData) => ({
      ...data,
      descriptor: { name: data.descriptor.name, description: data.descriptor.description, unit: data.descriptor.unit, valueType: data.descriptor.valueType },
      dataPoints: [...data.dataPoints].sort((a, b) => byAttributes(a).localeCompare(byAttributes(b))),
    })),
  }));
}

beforeEach(() => {
  vi.useFakeTimers({ toFake: ['Date'] });
  vi.setSystemTime(1_800_000_000_000);
});

afterEach(() => {
  vi.useRealTimers();
});

describe('the recorded metrics, collected through their producer', () => {
  for (const temporality of [AggregationTemporality.CUMULATIVE, AggregationTemporality.DELTA]) {
    it(`export what the SDK's own instruments export, ${temporality === AggregationTemporality.DELTA ? 'delta' : 'cumulative'}`, async () => {
      const recorded = createRecordedMetrics();
      const ours = new ManualReader(temporality, [new RecordedMetricsProducer(recorded, () => temporality)]);
      const theirs = new ManualReader(temporality);
      const sdk = new MeterProvider({ readers: [theirs] });
      new MeterProvider({ readers: [ours] });
      const record = sdkInstruments(sdk.getMeter(METER_NAME), recorded);
      const serializer = new PrometheusSerializer();
      for (const round of ROUNDS) {
        for (const [name, [a, b, c, d], attributes, value] of round) {
          vi.advanceTimersByTime(250);
          record[name](value, attributes);
          const table = recorded[name];
          const series = table.find(a, b, c, d) ?? table.add(a, b, c, d, { ...attributes });
          if (table.metric.kind === 'counter') series.add(value);
          else series.record(value);
        }
        vi.advanceTimersByTime(1000);
        const [mine, sdks] = [(await ours.collect()).resourceMetrics, (await theirs.collect()).resourceMetrics];
        expect(exported(mine)).toEqual(exported(sdks));
        if (temporality === AggregationTemporality.CUMULATIVE) expect(serializer.serialize(mine)).toBe(serializer.serialize(sdks));
      }
    });
  }

  it('keeps a cumulative and a delta reader apart', async () => {
    const recorded = createRecordedMetrics();
    const cumulative = new ManualReader(AggregationTemporality.CUMULATIVE, [new RecordedMetricsProducer(recorded, () => AggregationTemporality.CUMULATIVE)]);
    const delta = new ManualReader(AggregationTemporality.DELTA, [new RecordedMetricsProducer(recorded, () => AggregationTemporality.DELTA)]);
    new MeterProvider({ readers: [cumulative, delta] });
    const runs = recorded.runs;
    const series = runs.find('agent', 'a', 'completed', '') ?? runs.add('agent', 'a', 'completed', '', { 'arcflow.agent': 'a', 'arcflow.status': 'completed' });
    const total = async (reader: ManualReader) => (await reader.collect()).resourceMetrics.scopeMetrics[0]?.metrics[0]?.dataPoints[0]?.value;
    series.add(1);
    expect(await total(delta)).toBe(1);
    series.add(1);
    expect([await total(cumulative), await total(delta)]).toEqual([2, 1]);
    expect([await total(cumulative), await total(delta)]).toEqual([2, undefined]);
  });

  it('gives attribute sets past the cardinality limit one overflow series', () => {
    const table = createRecordedMetrics().toolDuration;
    for (let n = 0; n < 2100; n += 1) table.find(`tool_${n}`, '', '', '') ?? table.add(`tool_${n}`, '', '', '', { 'gen_ai.tool.name': `tool_${n}` });
    expect(table.all).toHaveLength(2000);
    expect(table.all.at(-1)?.attributes).toEqual({ 'otel.metric.overflow': true });
  });
});
