import type { MetricsOptions, ProcessMetrics, ScrapedMetrics } from './metrics-options.ts';
import type { Telemetry, TelemetryOptions } from './options.ts';
import type { Readings } from './record-metrics.ts';

export { AllowlistExporter, filterAttributes } from './allowlist-exporter.ts';
export { ALLOWED_ATTRIBUTES, Attr, SpanName } from './semconv.ts';
export { withForcedIds, tracingEnabled } from './ids.ts';
export type { Telemetry, TelemetryOptions } from './options.ts';

/**
 * Starts the OpenTelemetry SDK when an endpoint is given: traces only (no metrics or logs), as
 * OTLP/HTTP JSON, through the allowlist exporter, with the id generator that lets the run's root
 * span carry the ids minted at enqueue. Without an endpoint it does nothing and loads nothing:
 * the API stays no-op, and the SDK's modules are never imported.
 */
export async function startTelemetry(options: TelemetryOptions = {}): Promise<Telemetry> {
  if (!options.endpoint) return { enabled: false, shutdown: async () => undefined };
  const { startTracingSdk } = await import('./sdk.ts');
  return startTracingSdk(options.endpoint, options);
}

export { METER_NAME, Metric, MetricAttr, QUEUE_STATES, type QueueReading, type RunCountReading } from './metrics.ts';
export { observeQueues, type Readings } from './record-metrics.ts';
export type { MetricsHandler, MetricsOptions, ProcessMetrics, ScrapedMetrics } from './metrics-options.ts';

/**
 * Starts this process's metrics (SPEC §18) when they are asked for: a Prometheus endpoint, OTLP
 * export, or both. With neither it does nothing and loads nothing: the engine's recording
 * functions stay unbound, and the metrics SDK's modules are never imported.
 */
export async function startMetrics(options: MetricsOptions = {}): Promise<ProcessMetrics> {
  if (!options.prometheus && !options.otlp) return { enabled: false, shutdown: async () => undefined };
  const { startMetricsSdk } = await import('./metrics-sdk.ts');
  return startMetricsSdk(options);
}

/** `arcflow serve`'s metrics: the deployment's run counters and queue gauges, read by `read` at each scrape. */
export async function startDeploymentMetrics(read: () => Promise<Readings>, serviceName?: string): Promise<ScrapedMetrics> {
  const { startDeploymentMetricsSdk } = await import('./deployment-metrics-sdk.ts');
  return startDeploymentMetricsSdk(read, serviceName);
}
