import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { NodeSDK } from '@opentelemetry/sdk-node';
import { BatchSpanProcessor, RandomIdGenerator } from '@opentelemetry/sdk-trace-base';
import { AllowlistExporter } from './allowlist-exporter.ts';
import { setTracingEnabled, takeForcedSpanId, takeForcedTraceId } from './ids.ts';
import type { Telemetry, TelemetryOptions } from './options.ts';

/** The SDK itself, imported only when tracing is on (`startTelemetry` with an endpoint). */
export function startTracingSdk(endpoint: string, options: TelemetryOptions): Telemetry {
  const random = new RandomIdGenerator();
  const exporter = new OTLPTraceExporter({ url: `${endpoint.replace(/\/$/, '')}/v1/traces` });
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
