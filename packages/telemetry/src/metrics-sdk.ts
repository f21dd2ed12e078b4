import type { IncomingMessage, ServerResponse } from 'node:http';
import { metrics } from '@opentelemetry/api';
import { OTLPMetricExporter } from '@opentelemetry/exporter-metrics-otlp-http';
import { PrometheusExporter, PrometheusSerializer } from '@opentelemetry/exporter-prometheus';
import { type IMetricReader, MeterProvider, PeriodicExportingMetricReader } from '@opentelemetry/sdk-metrics';
import { METER_NAME } from './metrics.ts';
import type { MetricsOptions, ProcessMetrics, ScrapedMetrics } from './metrics-options.ts';
import { type Readings, bindInstruments, observeReadings } from './record-metrics.ts';
import { processResource } from './resource.ts';

/**
 * The metrics SDK, imported only when metrics are asked for (`startMetrics` with a Prometheus
 * port or an OTLP endpoint): a meter provider made the global one, so the engine's recording
 * functions (record-metrics.ts) record into it, with a Prometheus reader (its text served by the
 * caller's HTTP server) and a periodic OTLP/HTTP reader, as asked.
 */
export function startMetricsSdk(options: MetricsOptions): ProcessMetrics {
  const readers: IMetricReader[] = [];
  const prometheus = options.prometheus ? new PrometheusExporter({ preventServerStart: true }) : undefined;
  if (prometheus) readers.push(prometheus);
  if (options.otlp) {
    readers.push(
      new PeriodicExportingMetricReader({
        exporter: new OTLPMetricExporter({ url: options.otlp.url }),
        exportIntervalMillis: options.otlp.intervalMs,
        exportTimeoutMillis: Math.min(options.otlp.intervalMs, 30_000),
      }),
    );
  }
  const provider = new MeterProvider({ resource: processResource(options.serviceName, 'arcflow-worker'), readers });
  metrics.setGlobalMeterProvider(provider);
  bindInstruments(metrics.getMeter(METER_NAME));
  return {
    enabled: true,
    ...(prometheus ? { serve: (request: IncomingMessage, response: ServerResponse) => prometheus.getMetricsRequestHandler(request, response) } : {}),
    shutdown: async () => {
      bindInstruments(undefined);
      // The last OTLP export goes out here, so what was recorded while draining is not lost.
      await provider.shutdown();
      metrics.disable();
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
