import type { Attributes, Counter, Histogram, Meter } from '@opentelemetry/api';
import { Metric, type MetricDefinition, MetricAttr, QUEUE_STATES, type QueueReading, type RunCountReading } from './metrics.ts';

/**
 * Where the engine records metrics (SPEC §18), one function per recording point. With metrics
 * off nothing is bound and each function returns at its first line: no meter is asked for, no
 * attributes are built. `startMetrics` binds the instruments to the `arcflow` meter once the
 * metrics SDK is the global meter provider (the API hands out no-op instruments before that, and
 * keeps them no-op). Held under a global symbol, so two copies of this module share one binding.
 */
interface Instruments {
  readonly operationDuration: Histogram;
  readonly tokenUsage: Histogram;
  readonly timeToFirstChunk: Histogram;
  readonly toolDuration: Histogram;
  readonly stepDuration: Histogram;
  readonly runs: Counter;
  readonly runDuration: Histogram;
  readonly scheduleToStart: Histogram;
}

interface Slot {
  instruments?: Instruments;
  meter?: Meter;
}

const KEY = Symbol.for('arcflow.telemetry.metrics');
const slots = globalThis as Record<symbol, Slot>;
slots[KEY] ??= {};
const slot: Slot = slots[KEY];

/** Whether this process records metrics. */
export function metricsEnabled(): boolean {
  return slot.instruments !== undefined;
}

const histogram = (meter: Meter, metric: MetricDefinition) =>
  meter.createHistogram(metric.name, {
    unit: metric.unit,
    description: metric.description,
    ...(metric.buckets ? { advice: { explicitBucketBoundaries: [...metric.buckets] } } : {}),
  });

/** Binds the instruments to `meter` (the `arcflow` meter of the SDK just started); `undefined` unbinds them. */
export function bindInstruments(meter: Meter | undefined): void {
  attributeSets.clear();
  if (!meter) {
    slot.instruments = undefined;
    slot.meter = undefined;
    return;
  }
  slot.meter = meter;
  slot.instruments = {
    operationDuration: histogram(meter, Metric.operationDuration),
    tokenUsage: histogram(meter, Metric.tokenUsage),
    timeToFirstChunk: histogram(meter, Metric.timeToFirstChunk),
    toolDuration: histogram(meter, Metric.toolDuration),
    stepDuration: histogram(meter, Metric.stepDuration),
    runs: meter.createCounter(Metric.runs.name, { unit: Metric.runs.unit, description: Metric.runs.description }),
    runDuration: histogram(meter, Metric.runDuration),
    scheduleToStart: histogram(meter, Metric.scheduleToStart),
  };
}

/** A provider call as its metrics name it: the provider, the model asked for, and the failure's code if it failed. */
export interface ProviderCallAttributes {
  readonly provider: string;
  readonly model: string;
  readonly error_type?: string | undefined;
}

/**
 * Attribute sets, built once per distinct set and reused: their values are bounded by the
 * definitions (agents, tools, models, queues, error codes), so a record then allocates nothing,
 * not even a key: the sets sit in nested maps keyed by the values themselves. Cleared when the
 * instruments are rebound.
 */
type AttributeTree = Map<string, AttributeTree | Attributes>;
const attributeSets: AttributeTree = new Map();

function branch(node: AttributeTree, part: string): AttributeTree {
  let next = node.get(part) as AttributeTree | undefined;
  if (!next) {
    next = new Map();
    node.set(part, next);
  }
  return next;
}

/** The set stored under these values, if one is (looked up with no allocation). */
function knownSet(kind: string, a: string, b: string, c: string, d: string): Attributes | undefined {
  return branch(branch(branch(branch(attributeSets, kind), a), b), c).get(d) as Attributes | undefined;
}

/** Stores `attributes` under these values (built by the caller only when {@link knownSet} had none). */
function rememberSet(kind: string, a: string, b: string, c: string, d: string, attributes: Attributes): Attributes {
  const frozen = Object.freeze(attributes);
  branch(branch(branch(branch(attributeSets, kind), a), b), c).set(d, frozen);
  return frozen;
}

function callAttributes(call: ProviderCallAttributes, tokenType = ''): Attributes {
  const error = call.error_type ?? '';
  return (
    knownSet('call', call.provider, call.model, error, tokenType) ??
    rememberSet('call', call.provider, call.model, error, tokenType, {
      [MetricAttr.operationName]: 'chat',
      [MetricAttr.providerName]: call.provider,
      [MetricAttr.requestModel]: call.model,
      ...(call.error_type !== undefined ? { [MetricAttr.errorType]: call.error_type } : {}),
      ...(tokenType !== '' ? { [MetricAttr.tokenType]: tokenType } : {}),
    })
  );
}

/** One provider call: its duration, and its tokens by type when the provider reported usage. */
export function recordProviderCall(call: ProviderCallAttributes, seconds: number, usage?: { readonly input: number; readonly output: number }): void {
  const instruments = slot.instruments;
  if (!instruments) return;
  instruments.operationDuration.record(seconds, callAttributes(call));
  if (!usage) return;
  instruments.tokenUsage.record(usage.input, callAttributes(call, 'input'));
  instruments.tokenUsage.record(usage.output, callAttributes(call, 'output'));
}

/** A streamed provider call's time to its first chunk (SPEC §12), with the attributes of its duration. */
export function recordTimeToFirstChunk(call: ProviderCallAttributes, seconds: number): void {
  slot.instruments?.timeToFirstChunk.record(seconds, callAttributes(call));
}

/** One tool execution; `error_type` is its `error_code` when it failed. */
export function recordToolExecution(tool: string, seconds: number, error_type?: string): void {
  slot.instruments?.toolDuration.record(
    seconds,
    knownSet('tool', tool, error_type ?? '', '', '') ??
      rememberSet('tool', tool, error_type ?? '', '', '', { [MetricAttr.toolName]: tool, ...(error_type !== undefined ? { [MetricAttr.errorType]: error_type } : {}) }),
  );
}

/** One agent step, from its start to its end; `error_type` is the step's `error_code` when it failed. */
export function recordStep(agent: string, seconds: number, error_type?: string): void {
  slot.instruments?.stepDuration.record(
    seconds,
    knownSet('step', agent, error_type ?? '', '', '') ??
      rememberSet('step', agent, error_type ?? '', '', '', { [MetricAttr.agentName]: agent, ...(error_type !== undefined ? { [MetricAttr.errorType]: error_type } : {}) }),
  );
}

/** A run that ended (recorded once, by the process whose write ended it), and its time from enqueue to end. */
export function recordRunEnd(run: { readonly agent: string; readonly workflow?: string | undefined; readonly status: string }, seconds: number): void {
  const instruments = slot.instruments;
  if (!instruments) return;
  const kind = run.workflow === undefined ? 'agent' : 'workflow';
  const name = run.workflow ?? run.agent;
  const attributes =
    knownSet('run', kind, name, run.status, '') ??
    rememberSet('run', kind, name, run.status, '', { [kind === 'workflow' ? MetricAttr.workflow : MetricAttr.agent]: name, [MetricAttr.status]: run.status });
  instruments.runs.add(1, attributes);
  instruments.runDuration.record(seconds, attributes);
}

/** A provider or tool job a worker took: how long it waited from when it could run to its start. */
export function recordJobStart(queue: string, kind: 'provider' | 'tool', seconds: number): void {
  slot.instruments?.scheduleToStart.record(
    seconds,
    knownSet('job', queue, kind, '', '') ?? rememberSet('job', queue, kind, '', '', { [MetricAttr.queue]: queue, [MetricAttr.jobKind]: kind }),
  );
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
 * failed read reports nothing for that collection rather than failing the scrape.
 */
export function observeReadings(meter: Meter, read: () => Promise<Readings>, options: { readonly runs?: boolean } = {}): void {
  const depth = meter.createObservableGauge(Metric.queueDepth.name, { unit: Metric.queueDepth.unit, description: Metric.queueDepth.description });
  const workers = meter.createObservableGauge(Metric.liveWorkers.name, { unit: Metric.liveWorkers.unit, description: Metric.liveWorkers.description });
  const runs = options.runs ? meter.createObservableCounter(Metric.runs.name, { unit: Metric.runs.unit, description: Metric.runs.description }) : undefined;
  meter.addBatchObservableCallback(
    async (result) => {
      const readings = await read().catch(() => undefined);
      if (!readings) return;
      for (const reading of readings.queues) {
        for (const state of QUEUE_STATES) result.observe(depth, reading[state], { [MetricAttr.queue]: reading.queue, [MetricAttr.jobState]: state });
        result.observe(workers, reading.workers, { [MetricAttr.queue]: reading.queue });
      }
      if (!runs) return;
      for (const count of readings.runs ?? []) {
        result.observe(runs, count.count, { [count.kind === 'workflow' ? MetricAttr.workflow : MetricAttr.agent]: count.name, [MetricAttr.status]: count.status });
      }
    },
    runs ? [depth, workers, runs] : [depth, workers],
  );
}
