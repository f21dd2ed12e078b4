import { PrometheusExporter, PrometheusSerializer } from '@opentelemetry/exporter-prometheus';
import { MeterProvider } from '@opentelemetry/sdk-metrics';
import { METER_NAME } from './metrics.ts';
import type { ScrapedMetrics } from './metrics-options.ts';
import { type Readings, observeReadings } from './record-metrics.ts';
import { processResource } from './resource.ts';

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
