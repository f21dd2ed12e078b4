// The CPU of recording one run's metrics in process: arcflow's series against the SDK's own
// instruments (what it recorded into before), in this process, alternating blocks.
import { METER_NAME } from '@arcflow/telemetry';
import {
  bindRecording,
  createRecordedMetrics,
  recordJobStart,
  recordProviderCall,
  recordRunEnd,
  recordStep,
  recordTimeToFirstChunk,
  recordToolExecution,
} from '@arcflow/telemetry/metrics';
import type { Attributes } from '@opentelemetry/api';
import { PrometheusExporter } from '@opentelemetry/exporter-prometheus';
import { AggregationTemporality, MeterProvider } from '@opentelemetry/sdk-metrics';
import { RecordedMetricsProducer } from '../packages/telemetry/src/recorded-producer.ts';
import { sdkInstruments } from '../packages/telemetry/test/sdk-instruments.ts';
import { percentile } from './lib.ts';

/** Runs per timed block, and blocks per arm (the arms alternate block by block). */
const RUNS_PER_BLOCK = 20_000;
const BLOCKS = 9;
/** Values that land in different buckets from run to run. */
const SECONDS = [0.0004, 0.003, 0.02, 0.3, 1.7, 12];

export interface RecordingCost {
  /** CPU µs to record one run's 14 values: into arcflow's series, and into the SDK's instruments. */
  readonly series: number;
  readonly sdk: number;
  readonly values: number;
}

/**
 * A run of the metrics bench's shape (two provider calls with usage, the answer streamed, one tool
 * execution, three job starts, the run's end and its step): 14 values, recorded through the
 * engine's recording functions, or into the SDK's instruments with attribute sets built once (as
 * arcflow did before), each read by a Prometheus reader.
 */
export function recordingCost(): RecordingCost {
  const recorded = createRecordedMetrics();
  const sdk = new MeterProvider({ readers: [new PrometheusExporter({ preventServerStart: true })] });
  new MeterProvider({
    readers: [new PrometheusExporter({ preventServerStart: true, metricProducers: [new RecordedMetricsProducer(recorded, () => AggregationTemporality.CUMULATIVE)] })],
  });
  bindRecording({ recorded, meter: sdk.getMeter(METER_NAME) });
  const record = sdkInstruments(sdk.getMeter(METER_NAME), recorded);
  const call = { provider: 'openai', model: 'bench-model' };
  const usage = { input: 12, output: 4 };
  const chat = { 'gen_ai.operation.name': 'chat', 'gen_ai.provider.name': 'openai', 'gen_ai.request.model': 'bench-model' };
  const sets: Record<string, Attributes> = {
    chat,
    input: { ...chat, 'gen_ai.token.type': 'input' },
    output: { ...chat, 'gen_ai.token.type': 'output' },
    provider: { 'arcflow.queue': 'agent-bench_noop', 'arcflow.job.kind': 'provider' },
    tool: { 'arcflow.queue': 'tool-noop', 'arcflow.job.kind': 'tool' },
    noop: { 'gen_ai.tool.name': 'noop' },
    run: { 'arcflow.agent': 'bench_noop', 'arcflow.status': 'completed' },
    step: { 'gen_ai.agent.name': 'bench_noop' },
  };
  const seriesRun = (seconds: number) => {
    recordJobStart('agent-bench_noop', 'provider', seconds);
    recordProviderCall(call, seconds, usage);
    recordJobStart('tool-noop', 'tool', seconds);
    recordToolExecution('noop', seconds);
    recordJobStart('agent-bench_noop', 'provider', seconds);
    recordTimeToFirstChunk(call, seconds);
    recordProviderCall(call, seconds, usage);
    recordRunEnd({ agent: 'bench_noop', status: 'completed' }, seconds);
    recordStep('bench_noop', seconds);
  };
  const sdkRun = (seconds: number) => {
    record.scheduleToStart(seconds, sets.provider!);
    record.operationDuration(seconds, sets.chat!);
    record.tokenUsage(usage.input, sets.input!);
    record.tokenUsage(usage.output, sets.output!);
    record.scheduleToStart(seconds, sets.tool!);
    record.toolDuration(seconds, sets.noop!);
    record.scheduleToStart(seconds, sets.provider!);
    record.timeToFirstChunk(seconds, sets.chat!);
    record.operationDuration(seconds, sets.chat!);
    record.tokenUsage(usage.input, sets.input!);
    record.tokenUsage(usage.output, sets.output!);
    record.runs(1, sets.run!);
    record.runDuration(seconds, sets.run!);
    record.stepDuration(seconds, sets.step!);
  };
  const block = (run: (seconds: number) => void) => {
    const before = process.cpuUsage();
    for (let n = 0; n < RUNS_PER_BLOCK; n += 1) run(SECONDS[n % SECONDS.length]!);
    const used = process.cpuUsage(before);
    return (used.user + used.system) / RUNS_PER_BLOCK;
  };
  try {
    block(seriesRun);
    block(sdkRun);
    const series: number[] = [];
    const sdkTimes: number[] = [];
    for (let n = 0; n < BLOCKS; n += 1) {
      series.push(block(seriesRun));
      sdkTimes.push(block(sdkRun));
    }
    return { series: percentile(series, 50), sdk: percentile(sdkTimes, 50), values: 14 };
  } finally {
    bindRecording(undefined);
  }
}
