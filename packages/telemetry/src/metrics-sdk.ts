import type { IncomingMessage, ServerResponse } from 'node:http';
import { metrics } from '@opentelemetry/api';
import { AggregationTemporality, type IMetricReader, MeterProvider, PeriodicExportingMetricReader } from '@opentelemetry/sdk-metrics';
import { METER_NAME } from './metrics.ts';
import type { MetricsOptions, ProcessMetrics } from './metrics-options.ts';
import { bindRecording, createRecordedMetrics } from './record-metrics.ts';
import { RecordedMetricsProducer } from './recorded-producer.ts';
import { processResource } from './resource.ts';

/**
 * The metrics SDK, imported only when metrics are asked for (`startMetrics` with a Prometheus
 * port or an OTLP endpoint): a Prometheus reader (its text served by the caller's HTTP server)
 * and a periodic OTLP/HTTP reader, as asked, each given what the engine's recording functions
 * (record-metrics.ts) aggregate in process through a producer of its own; and a meter provider,
 * made the global one unless the process has one, whose `arcflow` meter observes the queue gauges
 * at each collection. Each exporter's modules load only when it is asked for (a worker that exports
 * OTLP loads no Prometheus exporter, about a hundred modules).
 */
export async function startMetricsSdk(options: MetricsOptions): Promise<ProcessMetrics> {
  const recorded = createRecordedMetrics();
  const readers: IMetricReader[] = [];
  // Prometheus reads cumulative counts (its exporter's only temporality).
  const prometheus = options.prometheus
    ? new (await import('@opentelemetry/exporter-prometheus')).PrometheusExporter({
        preventServerStart: true,
        metricProducers: [new RecordedMetricsProducer(recorded, () => AggregationTemporality.CUMULATIVE)],
      })
    : undefined;
  if (prometheus) readers.push(prometheus);
  if (options.otlp) {
    const { OTLPMetricExporter } = await import('@opentelemetry/exporter-metrics-otlp-http');
    const exporter = new OTLPMetricExporter({ url: options.otlp.url });
    readers.push(
      new PeriodicExportingMetricReader({
        exporter,
        metricProducers: [new RecordedMetricsProducer(recorded, (type) => exporter.selectAggregationTemporality(type))],
        exportIntervalMillis: options.otlp.intervalMs,
        exportTimeoutMillis: Math.min(options.otlp.intervalMs, 30_000),
      }),
    );
  }
  const provider = new MeterProvider({ resource: processResource(options.serviceName, 'arcflow-worker'), readers });
  // The global one only when the process has none (then the user's own metrics go out with arcflow's); a provider it did not make stays.
  const madeGlobal = metrics.setGlobalMeterProvider(provider);
  bindRecording({ recorded, meter: provider.getMeter(METER_NAME) });
  return {
    enabled: true,
    ...(prometheus ? { serve: (request: IncomingMessage, response: ServerResponse) => prometheus.getMetricsRequestHandler(request, response) } : {}),
    shutdown: async () => {
      bindRecording(undefined);
      // The last OTLP export goes out here, so what was recorded while draining is not lost.
      await provider.shutdown();
      if (madeGlobal) metrics.disable();
    },
  };
}
