import type { IncomingMessage, ServerResponse } from 'node:http';
import { metrics } from '@opentelemetry/api';
import { PrometheusExporter, PrometheusSerializer } from '@opentelemetry/exporter-prometheus';
import { AggregationTemporality, type IMetricReader, MeterProvider, PeriodicExportingMetricReader } from '@opentelemetry/sdk-metrics';
import { METER_NAME } from './metrics.ts';
import type { MetricsOptions, ProcessMetrics, ScrapedMetrics } from './metrics-options.ts';
import { type Readings, bindRecording, createRecordedMetrics, observeReadings } from './record-metrics.ts';
import { RecordedMetricsProducer } from './recorded-producer.ts';
import { processResource } from './resource.ts';

/**
 * The metrics SDK, imported only when metrics are asked for (`startMetrics` with a Prometheus
 * port or an OTLP endpoint): a Prometheus reader (its text served by the caller's HTTP server)
 * and a periodic OTLP/HTTP reader, as asked, each given what the engine's recording functions
 * (record-metrics.ts) aggregate in process through a producer of its own; and a meter provider,
 * made the global one unless the process has one, whose `arcflow` meter observes the queue gauges
 * at each collection. The
 * OTLP exporter's modules load only when OTLP is asked for.
 */
export async function startMetricsSdk(options: MetricsOptions): Promise<ProcessMetrics> {
  const recorded = createRecordedMetrics();
  const readers: IMetricReader[] = [];
  // Prometheus reads cumulative counts (its exporter's only temporality).
  const prometheus = options.prometheus
    ? new PrometheusExporter({ preventServerStart: true, metricProducers: [new RecordedMetricsProducer(recorded, () => AggregationTemporality.CUMULATIVE)] })
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

/**
 * `arcflow serve`'s metrics: the deployment's run counters and queue gauges, read from Redis at
 * each scrape by `read`. A meter provider of its own, not the global one: the server runs no jobs,
 * and a cancel it makes must not count as a run ended in this process beside the deployment's count.
 */
export function startDeploymentMetricsSdk(read: () => Promise<Readings>, serviceName: string | undefined): ScrapedMetrics {
  const prometheus = new PrometheusExporter({ preventServerStart: true });
  const provider = new MeterProvider({ resource: processResource(serviceName, 'arcflow-server'), readers: [prometheus] });
  observeReadings(provider.getMeter(METER_NAME), read, { runs: true });
  // The exporter's own serializer settings (its defaults), so both endpoints name metrics alike.
  const serializer = new PrometheusSerializer();
  return {
    text: async () => serializer.serialize((await prometheus.collect()).resourceMetrics),
    shutdown: () => provider.shutdown(),
  };
}
