import { context, propagation, trace } from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { BatchSpanProcessor, RandomIdGenerator } from '@opentelemetry/sdk-trace-base';
import { NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import { AllowlistExporter } from './allowlist-exporter.ts';
import { setTracingEnabled, takeForcedSpanId, takeForcedTraceId } from './ids.ts';
import type { Telemetry, TelemetryOptions } from './options.ts';
import { processResource } from './resource.ts';

/**
 * The tracing SDK, imported only when tracing is on (`startTelemetry` with an endpoint): a Node
 * tracer provider (async-context propagation in the process, W3C trace context across it), the
 * resource from the environment (`OTEL_RESOURCE_ATTRIBUTES`), the host and the process, and the
 * OTLP/HTTP exporter behind the allowlist. Not `NodeSDK`: it loads the metrics, logs and
 * instrumentation packages too, which cost a worker about a second and a half of its start.
 */
export function startTracingSdk(endpoint: string, options: TelemetryOptions): Telemetry {
  const random = new RandomIdGenerator();
  const exporter = new OTLPTraceExporter({ url: `${endpoint.replace(/\/$/, '')}/v1/traces` });
  const resource = processResource(options.serviceName, 'arcflow-worker');
  const provider = new NodeTracerProvider({
    resource,
    idGenerator: {
      generateTraceId: () => takeForcedTraceId() ?? random.generateTraceId(),
      generateSpanId: () => takeForcedSpanId() ?? random.generateSpanId(),
    },
    spanProcessors: [new BatchSpanProcessor(new AllowlistExporter(exporter), options.scheduledDelayMs === undefined ? {} : { scheduledDelayMillis: options.scheduledDelayMs })],
  });
  provider.register();
  setTracingEnabled(true);
  return {
    enabled: true,
    shutdown: async () => {
      setTracingEnabled(false);
      await provider.shutdown();
      // Unregistered, as `register` registered them: a later start in this process registers anew.
      trace.disable();
      propagation.disable();
      context.disable();
    },
  };
}
