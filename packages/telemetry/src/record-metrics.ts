import type { BatchObservableCallback, Meter } from '@opentelemetry/api';
import { METER_NAME, Metric, MetricAttr, QUEUE_STATES, type QueueReading, type RunCountReading } from './metrics.ts';
import { type RecordSink, type Series, SeriesTable } from './series.ts';
import { openTelemetryRegistered } from './ids.ts';

/*
 * Where the engine records metrics (SPEC §18), one function per recording point. With metrics
 * off nothing is bound and each function returns at its first line: no attributes are built.
 * With metrics on, a record goes into its series, aggregated in this process (series.ts), which
 * the metrics SDK's readers collect through a producer each (recorded-producer.ts): a record does
 * none of the SDK's per-record work (hashing the attributes to find their accumulation). The
 * binding is held under a global symbol, so two copies of this module share it.
 */

/** The metrics recorded as the work happens (the gauges are observed at collection instead). */
const RECORDED = ['operationDuration', 'tokenUsage', 'timeToFirstChunk', 'toolDuration', 'stepDuration', 'runs', 'runDuration', 'scheduleToStart'] as const;

/** The recorded metrics, each with its series. */
export type RecordedMetrics = { readonly [Name in (typeof RECORDED)[number]]: SeriesTable };

/** Empty tables for every recorded metric, for {@link bindRecording} and the readers' producers. */
export function createRecordedMetrics(): RecordedMetrics {
  return Object.fromEntries(RECORDED.map((name) => [name, new SeriesTable(Metric[name])])) as unknown as RecordedMetrics;
}

interface Slot {
  recorded?: RecordedMetrics;
  meter?: Meter;
  /** Set while arcflow records through an application's provider: its meter, and how many embedded workers use it. */
  app?: { readonly meter: Meter; readonly recorded: RecordedMetrics; workers: number };
  /** The model names the definitions and providers of this process name; others are recorded as `_OTHER`. */
  models?: Set<string>;
  /** The tenants this process's options name (SPEC §14), `default` always among them; others are recorded as `_OTHER`. */
  tenants?: Set<string>;
}

/** What a provider call's model is recorded as when no definition or provider names it (a model given per run). */
export const OTHER_MODEL = '_OTHER';
/** What a run's tenant is recorded as when no tenant option of the process names it. */
export const OTHER_TENANT = '_OTHER';
/** The tenant of a run that names none (SPEC §14), always recorded by its name. */
const DEFAULT_TENANT = 'default';

const KEY = Symbol.for('arcflow.telemetry.metrics');
const slots = globalThis as Record<symbol, Slot>;
slots[KEY] ??= {};
const slot: Slot = slots[KEY];

/**
 * In a process that records no metrics of its own (no `startMetrics`) but has registered its own
 * global `MeterProvider` (an application that embeds a worker), records arcflow's metrics through
 * that provider's `arcflow` meter: each record goes to an instrument of it, which its readers
 * collect. Returns the function that stops it (for this worker), or undefined when there is nothing
 * to do (arcflow's own metrics SDK records, or no provider is registered). Never registers, replaces or shuts down a provider.
 * The OpenTelemetry API is loaded here, not with this module, and only when something registered
 * OpenTelemetry globals: a client that only reads runs, or a worker of a process that uses no
 * OpenTelemetry, never loads it.
 */
export async function recordThroughGlobalProvider(gauges?: () => GaugeSource): Promise<(() => Promise<void>) | undefined> {
  if (!openTelemetryRegistered() || (slot.recorded && !slot.app)) return undefined;
  if (!slot.app) {
    const { createNoopMeter, metrics } = await import('@opentelemetry/api');
    if (slot.recorded && !slot.app) return undefined;
    const meter = metrics.getMeter(METER_NAME);
    if (meter === createNoopMeter()) return undefined;
    if (!slot.app) {
      const recorded = Object.fromEntries(RECORDED.map((name) => [name, new SeriesTable(Metric[name], sinkOn(meter, Metric[name]))])) as unknown as RecordedMetrics;
      slot.recorded = recorded;
      slot.app = { meter, recorded, workers: 0 };
    }
  }
  // Each embedded worker adds the gauges of its own queues, read from Redis at each of the provider's
  // collections; the recording ends with the last of them.
  const app = slot.app;
  app.workers += 1;
  const source = gauges?.();
  const unobserve = source ? observeReadings(app.meter, () => source.read()) : undefined;
  let stopped = false;
  return async () => {
    if (stopped) return;
    stopped = true;
    unobserve?.();
    await source?.close();
    app.workers -= 1;
    if (app.workers > 0 || slot.app !== app) return;
    slot.app = undefined;
    if (slot.recorded === app.recorded) bindRecording(undefined);
  };
}

/** Where the queue gauges are read from at each collection: one round trip to Redis, on a connection closed with it. */
export interface GaugeSource {
  read(): Promise<Readings>;
  close(): Promise<void>;
}

/** An instrument of `meter` for one of arcflow's recorded metrics, with its buckets as advice. */
function sinkOn(meter: Meter, metric: (typeof Metric)[(typeof RECORDED)[number]]): RecordSink {
  if (metric.kind === 'counter') {
    const counter = meter.createCounter(metric.name, { unit: metric.unit, description: metric.description });
    return { record: (value, attributes) => counter.add(value, attributes) };
  }
  const histogram = meter.createHistogram(metric.name, {
    unit: metric.unit,
    description: metric.description,
    advice: { explicitBucketBoundaries: [...metric.buckets] },
  });
  return { record: (value, attributes) => histogram.record(value, attributes) };
}

/** Whether this process records metrics. */
export function metricsEnabled(): boolean {
  return slot.recorded !== undefined;
}

/**
 * Records into `recorded` from now on, and observes the queue gauges on `meter` (the `arcflow`
 * meter of the SDK just started); with neither, records nothing more. What was recorded stays
 * with the producers that read it, for their last collection.
 */
export function bindRecording(binding?: { readonly recorded: RecordedMetrics; readonly meter: Meter }): void {
  slot.recorded = binding?.recorded;
  slot.meter = binding?.meter;
}

/** A provider call as its metrics name it: the provider, the model asked for, and the failure's code if it failed. */
export interface ProviderCallAttributes {
  readonly provider: string;
  readonly model: string;
  readonly error_type?: string | undefined;
}

/**
 * Adds model names the process's definitions and providers name (its agents' models and fallbacks,
 * its providers' and its own default models): a provider call's model is recorded as it is when
 * named, else as `_OTHER`, so a model given per run by any caller adds no series. Until a process
 * names any, models are recorded as they are.
 */
export function nameModels(models: Iterable<string>): void {
  slot.models ??= new Set();
  for (const model of models) slot.models.add(model);
}

/**
 * Adds tenant names the process's options name (SPEC §14): a run's tenant is recorded as it is
 * when named (or `default`), else as `_OTHER`, so the tenants callers give add no series beyond
 * those an operator named.
 */
export function nameTenants(tenants: Iterable<string>): void {
  slot.tenants ??= new Set();
  for (const tenant of tenants) slot.tenants.add(tenant);
}

/** A run's tenant as metrics record it: `default` (no tenant), a named tenant, or `_OTHER`. */
export function tenantLabel(tenant: string | undefined): string {
  if (tenant === undefined || tenant === DEFAULT_TENANT) return DEFAULT_TENANT;
  return slot.tenants?.has(tenant) ? tenant : OTHER_TENANT;
}

/** A provider call's model as its metrics name it: as it is when named (or before any is named), else `_OTHER`. */
function modelLabel(model: string): string {
  return slot.models === undefined || slot.models.has(model) ? model : OTHER_MODEL;
}

/** The series of a provider call, built the first time these values are seen. */
function callSeries(table: SeriesTable, call: ProviderCallAttributes): Series {
  const error = call.error_type ?? '';
  const model = modelLabel(call.model);
  return (
    table.find(call.provider, model, error, '') ??
    table.add(call.provider, model, error, '', {
      [MetricAttr.operationName]: 'chat',
      [MetricAttr.providerName]: call.provider,
      [MetricAttr.requestModel]: model,
      ...(call.error_type !== undefined ? { [MetricAttr.errorType]: call.error_type } : {}),
    })
  );
}

/** The series of a call's tokens of one type for one tenant (usage is reported by calls that answered: no `error.type`). */
function tokenSeries(table: SeriesTable, call: ProviderCallAttributes, tokenType: 'input' | 'output', tenant: string): Series {
  const model = modelLabel(call.model);
  return (
    table.find(call.provider, model, tokenType, tenant) ??
    table.add(call.provider, model, tokenType, tenant, {
      [MetricAttr.operationName]: 'chat',
      [MetricAttr.providerName]: call.provider,
      [MetricAttr.requestModel]: model,
      [MetricAttr.tokenType]: tokenType,
      [MetricAttr.tenant]: tenant,
    })
  );
}

/** The series of a name and, when it failed, its error code (a tool's executions, an agent's steps). */
function namedSeries(table: SeriesTable, key: string, name: string, error_type: string | undefined): Series {
  return (
    table.find(name, error_type ?? '', '', '') ??
    table.add(name, error_type ?? '', '', '', { [key]: name, ...(error_type !== undefined ? { [MetricAttr.errorType]: error_type } : {}) })
  );
}

/** One provider call: its duration, and its tokens by type (and the run's tenant) when the provider reported usage. */
export function recordProviderCall(call: ProviderCallAttributes, seconds: number, usage?: { readonly input: number; readonly output: number }, tenant?: string): void {
  const recorded = slot.recorded;
  if (!recorded) return;
  callSeries(recorded.operationDuration, call).record(seconds);
  if (!usage) return;
  const label = tenantLabel(tenant);
  tokenSeries(recorded.tokenUsage, call, 'input', label).record(usage.input);
  tokenSeries(recorded.tokenUsage, call, 'output', label).record(usage.output);
}

/** A streamed provider call's time to its first chunk (SPEC §12), with the attributes of its duration. */
export function recordTimeToFirstChunk(call: ProviderCallAttributes, seconds: number): void {
  const recorded = slot.recorded;
  if (recorded) callSeries(recorded.timeToFirstChunk, call).record(seconds);
}

/** One tool execution; `error_type` is its `error_code` when it failed. */
export function recordToolExecution(tool: string, seconds: number, error_type?: string): void {
  const recorded = slot.recorded;
  if (recorded) namedSeries(recorded.toolDuration, MetricAttr.toolName, tool, error_type).record(seconds);
}

/** One agent step, from its start to its end; `error_type` is the step's `error_code` when it failed. */
export function recordStep(agent: string, seconds: number, error_type?: string): void {
  const recorded = slot.recorded;
  if (recorded) namedSeries(recorded.stepDuration, MetricAttr.agentName, agent, error_type).record(seconds);
}

/** The series of a run's end: its agent (or workflow), status and tenant. */
function runSeries(table: SeriesTable, kind: 'agent' | 'workflow', name: string, status: string, tenant: string): Series {
  return (
    table.find(kind, name, status, tenant) ??
    table.add(kind, name, status, tenant, { [kind === 'workflow' ? MetricAttr.workflow : MetricAttr.agent]: name, [MetricAttr.status]: status, [MetricAttr.tenant]: tenant })
  );
}

/** A run that ended (recorded once, by the process whose write ended it), and its time from enqueue to end. */
export function recordRunEnd(
  run: { readonly agent: string; readonly workflow?: string | undefined; readonly status: string; readonly tenant?: string | undefined },
  seconds: number,
): void {
  const recorded = slot.recorded;
  if (!recorded) return;
  const kind = run.workflow === undefined ? 'agent' : 'workflow';
  const name = run.workflow ?? run.agent;
  const tenant = tenantLabel(run.tenant);
  runSeries(recorded.runs, kind, name, run.status, tenant).add(1);
  runSeries(recorded.runDuration, kind, name, run.status, tenant).record(seconds);
}

/** A provider or tool job a worker took: how long it waited from when it could run to its start, for its run's tenant. */
export function recordJobStart(queue: string, kind: 'provider' | 'tool', seconds: number, tenant?: string): void {
  const recorded = slot.recorded;
  if (!recorded) return;
  const table = recorded.scheduleToStart;
  const label = tenantLabel(tenant);
  (table.find(queue, kind, label, '') ?? table.add(queue, kind, label, '', { [MetricAttr.queue]: queue, [MetricAttr.jobKind]: kind, [MetricAttr.tenant]: label })).record(seconds);
}

/** What one collection reads from Redis: the queues, and (for `arcflow serve`) the runs ended in the deployment. */
export interface Readings {
  readonly queues: readonly QueueReading[];
  readonly runs?: readonly RunCountReading[];
}

/**
 * Reports `arcflow.queue.depth` and `arcflow.workers.live` at each collection of this process's
 * metrics, from one call of `read` (one Redis round trip, whatever the number of queues).
 */
export function observeQueues(read: () => Promise<Readings>): void {
  if (slot.meter) observeReadings(slot.meter, read);
}

/**
 * Reports what `read` returns at each collection on `meter`: the queue gauges, and with `runs`,
 * `arcflow.runs` as an observable counter (the deployment's, as `arcflow serve` reports it). A
 * failed read observes nothing rather than failing the scrape; a cumulative reader (Prometheus's)
 * then reports the values last read again, as the SDK does for a series it has seen.
 */
export function observeReadings(meter: Meter, read: () => Promise<Readings>, options: { readonly runs?: boolean } = {}): () => void {
  const depth = meter.createObservableGauge(Metric.queueDepth.name, { unit: Metric.queueDepth.unit, description: Metric.queueDepth.description });
  const workers = meter.createObservableGauge(Metric.liveWorkers.name, { unit: Metric.liveWorkers.unit, description: Metric.liveWorkers.description });
  const runs = options.runs ? meter.createObservableCounter(Metric.runs.name, { unit: Metric.runs.unit, description: Metric.runs.description }) : undefined;
  const observables = runs ? [depth, workers, runs] : [depth, workers];
  const callback: BatchObservableCallback = async (result) => {
    const readings = await read().catch(() => undefined);
    if (!readings) return;
    for (const reading of readings.queues) {
      for (const state of QUEUE_STATES) result.observe(depth, reading[state], { [MetricAttr.queue]: reading.queue, [MetricAttr.jobState]: state });
      result.observe(workers, reading.workers, { [MetricAttr.queue]: reading.queue });
    }
    if (!runs) return;
    for (const count of readings.runs ?? []) {
      result.observe(runs, count.count, {
        [count.kind === 'workflow' ? MetricAttr.workflow : MetricAttr.agent]: count.name,
        [MetricAttr.status]: count.status,
        [MetricAttr.tenant]: count.tenant,
      });
    }
  };
  meter.addBatchObservableCallback(callback, observables);
  return () => meter.removeBatchObservableCallback(callback, observables);
}
