import { ConfigError } from '@arcflow/core';
import { MAX_PARTITIONS, isPartitionCount } from '@arcflow/queue';
import { heapGrowingPercent } from './heap.ts';

/** Everything the worker reads from the environment, read once, here. */
export interface WorkerEnv {
  readonly redis: string | undefined;
  readonly prefix: string | undefined;
  readonly openai: { readonly api_key?: string; readonly base_url?: string } | undefined;
  readonly model: string | undefined;
  readonly otel: { readonly endpoint: string | undefined; readonly serviceName: string | undefined };
  /** How far the heap may grow past what survived the last full GC (see heap.ts). */
  readonly heapGrowingPercent: number;
  /** `ARCFLOW_WATCHDOG_MS`: how long a run may make no progress before the watchdog acts. */
  readonly watchdogMs: number | undefined;
  /**
   * `ARCFLOW_MAX_STALLED_COUNT`: how often a job may lose its worker before it fails (default 2). A tool call counts only
   * the losses after its handler ran past its first second; quicker ones count only toward this plus 5.
   */
  readonly maxStalledCount: number | undefined;
  /** `ARCFLOW_PARTITIONS`: partitions runs spread over (default 1 on one Redis, 16 on a cluster). */
  readonly partitions: number | undefined;
  /** `ARCFLOW_SERVE_PARTITIONS`: the partitions this process serves, e.g. `0-7` or `0,2,4-5` (default all). */
  readonly servePartitions: number[] | undefined;
  /** Metrics (SPEC §18): the Prometheus port, and where and how often OTLP export goes. */
  readonly metrics: WorkerMetricsEnv;
  /** Started through a package runner (`npx`, `npm run`, yarn, pnpm: `npm_execpath` is set), which may exit and leave it behind. */
  readonly startedByPackageRunner: boolean;
}

export interface WorkerMetricsEnv {
  /** `ARCFLOW_METRICS_PORT`: serve `GET /metrics` on this port (`--metrics-port` wins). */
  readonly port: number | undefined;
  /** `OTEL_EXPORTER_OTLP_METRICS_ENDPOINT` as it is, else `OTEL_EXPORTER_OTLP_ENDPOINT` with `/v1/metrics`; unset: no OTLP export. */
  readonly otlpUrl: string | undefined;
  /** `OTEL_METRIC_EXPORT_INTERVAL` (ms, default 60000). */
  readonly exportIntervalMs: number;
}

/** The OpenTelemetry default for `OTEL_METRIC_EXPORT_INTERVAL`. */
const DEFAULT_METRIC_EXPORT_INTERVAL_MS = 60_000;

/** The metrics settings of the environment; a bad port or interval is refused with the variable's name. */
export function readMetricsEnv(env: NodeJS.ProcessEnv = process.env): WorkerMetricsEnv {
  const base = env.OTEL_EXPORTER_OTLP_ENDPOINT || undefined;
  return {
    port: metricsPort('ARCFLOW_METRICS_PORT', env.ARCFLOW_METRICS_PORT || undefined),
    otlpUrl: env.OTEL_EXPORTER_OTLP_METRICS_ENDPOINT || (base ? `${base.replace(/\/$/, '')}/v1/metrics` : undefined),
    exportIntervalMs: positiveIntegerEnv('OTEL_METRIC_EXPORT_INTERVAL', env.OTEL_METRIC_EXPORT_INTERVAL, ' of milliseconds') ?? DEFAULT_METRIC_EXPORT_INTERVAL_MS,
  };
}

/** A TCP port for the metrics endpoint (1–65535); anything else is refused, naming where it came from. */
export function metricsPort(source: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const port = Number(value);
  if (!/^\d+$/.test(value) || port < 1 || port > 65_535) throw new ConfigError(`${source} must be a port number from 1 to 65535, got ${JSON.stringify(value)}`);
  return port;
}

export function readWorkerEnv(env: NodeJS.ProcessEnv = process.env): WorkerEnv {
  const api_key = env.OPENAI_API_KEY || undefined;
  const base_url = env.OPENAI_BASE_URL || undefined;
  return {
    redis: env.REDIS_URL || undefined,
    prefix: env.ARCFLOW_PREFIX || undefined,
    openai: api_key || base_url ? { api_key, base_url } : undefined,
    model: env.ARCFLOW_MODEL || undefined,
    otel: { endpoint: env.OTEL_EXPORTER_OTLP_ENDPOINT || undefined, serviceName: env.OTEL_SERVICE_NAME || undefined },
    heapGrowingPercent: heapGrowingPercent(env.ARCFLOW_HEAP_GROWING_PERCENT),
    watchdogMs: positiveIntegerEnv('ARCFLOW_WATCHDOG_MS', env.ARCFLOW_WATCHDOG_MS, ' of milliseconds'),
    maxStalledCount: positiveIntegerEnv('ARCFLOW_MAX_STALLED_COUNT', env.ARCFLOW_MAX_STALLED_COUNT),
    partitions: partitionCountEnv('ARCFLOW_PARTITIONS', env.ARCFLOW_PARTITIONS),
    servePartitions: partitionListEnv('ARCFLOW_SERVE_PARTITIONS', env.ARCFLOW_SERVE_PARTITIONS),
    metrics: readMetricsEnv(env),
    startedByPackageRunner: Boolean(env.npm_execpath),
  };
}

/** A partition count: a power of two from 1 to MAX_PARTITIONS. */
function partitionCountEnv(name: string, value: string | undefined): number | undefined {
  const count = positiveIntegerEnv(name, value);
  if (count !== undefined && !isPartitionCount(count)) {
    throw new ConfigError(`${name} must be a power of two from 1 to ${MAX_PARTITIONS} (1, 2, 4, … ${MAX_PARTITIONS}), got ${JSON.stringify(value)}`);
  }
  return count;
}

/** A list of partition numbers and ranges (`0-7`, `0,2,4-5`); anything else is refused with the variable's name. */
function partitionListEnv(name: string, value: string | undefined): number[] | undefined {
  if (value === undefined || value.trim() === '') return undefined;
  const partitions: number[] = [];
  for (const item of value.split(',').map((part) => part.trim())) {
    const range = /^(\d+)(?:-(\d+))?$/.exec(item);
    const from = Number(range?.[1]);
    const to = range?.[2] === undefined ? from : Number(range[2]);
    if (!range || to < from || to >= MAX_PARTITIONS) {
      throw new ConfigError(`${name} must list partition numbers or ranges from 0 to ${MAX_PARTITIONS - 1}, like 0-7 or 0,2,4-5; got ${JSON.stringify(value)}`);
    }
    for (let partition = from; partition <= to; partition += 1) partitions.push(partition);
  }
  return partitions;
}

/** An optional positive integer setting; anything else is refused with the variable's name. */
function positiveIntegerEnv(name: string, value: string | undefined, unit = ''): number | undefined {
  if (value === undefined || value === '') return undefined;
  const parsed = Number(value);
  if (!/^\d+$/.test(value) || !Number.isSafeInteger(parsed) || parsed < 1) {
    throw new ConfigError(`${name} must be a whole number${unit} >= 1, got ${JSON.stringify(value)}`);
  }
  return parsed;
}
