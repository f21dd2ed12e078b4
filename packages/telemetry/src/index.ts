import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { NodeSDK } from '@opentelemetry/sdk-node';
import { BatchSpanProcessor, RandomIdGenerator } from '@opentelemetry/sdk-trace-base';
import { AllowlistExporter } from './allowlist-exporter.ts';
import { setTracingEnabled, takeForcedSpanId, takeForcedTraceId } from './ids.ts';

export { AllowlistExporter, filterAttributes } from './allowlist-exporter.ts';
export { ALLOWED_ATTRIBUTES, Attr, SpanName } from './semconv.ts';
export { withForcedIds, tracingEnabled } from './ids.ts';

export interface TelemetryOptions {
  /** OTLP/HTTP base URL (`OTEL_EXPORTER_OTLP_ENDPOINT`); `/v1/traces` is appended. Unset: tracing off. */
  endpoint?: string;
  /** `OTEL_SERVICE_NAME` (default `arcflow-worker`). */
  serviceName?: string;
  /** Batch delay before export, in ms (default: `OTEL_BSP_SCHEDULE_DELAY`, else 5000). */
  scheduledDelayMs?: number;
}

export interface Telemetry {
  readonly enabled: boolean;
  /** Flushes every pending span and stops the exporter. Call after the worker has drained. */
  shutdown(): Promise<void>;
}

/**
 * Starts the OpenTelemetry SDK when an endpoint is given: traces only (no metrics or logs), as
 * OTLP/HTTP JSON, through the allowlist exporter, with the id generator that lets the run's root
 * span carry the ids minted at enqueue. Without an endpoint it does nothing: the API stays no-op.
 */
export function startTelemetry(options: TelemetryOptions = {}): Telemetry {
  if (!options.endpoint) return { enabled: false, shutdown: async () => undefined };
  const random = new RandomIdGenerator();
  const exporter = new OTLPTraceExporter({ url: `${options.endpoint.replace(/\/$/, '')}/v1/traces` });
  const sdk = new NodeSDK({
    serviceName: options.serviceName ?? 'arcflow-worker',
    idGenerator: {
      generateTraceId: () => takeForcedTraceId() ?? random.generateTraceId(),
      generateSpanId: () => takeForcedSpanId() ?? random.generateSpanId(),
    },
    spanProcessors: [new BatchSpanProcessor(new AllowlistExporter(exporter), options.scheduledDelayMs === undefined ? {} : { scheduledDelayMillis: options.scheduledDelayMs })],
    metricReaders: [],
    logRecordProcessors: [],
    instrumentations: [],
  });
  sdk.start();
  setTracingEnabled(true);
  return {
    enabled: true,
    shutdown: async () => {
      setTracingEnabled(false);
      await sdk.shutdown();
    },
  };
}
