import { openMetricsReader, resolveConnection } from '@arcflow/queue';
import { observeQueues, startMetrics } from '@arcflow/telemetry';
import type { WorkerMetricsEnv } from './env.ts';
import type { MetricsServer } from './metrics-server.ts';

export interface WorkerMetrics {
  /** Reports the queue gauges of the worker's own queues, read from Redis at each collection. */
  observe(where: { readonly redis: string | undefined; readonly prefix: string | undefined; readonly queues: readonly string[] }): void;
  /** For the ready line: `off`, or where they go. */
  describe(): string;
  /** The last OTLP export, then the endpoint and the gauges' connection close. Call after the worker has drained. */
  shutdown(): Promise<void>;
}

/**
 * The worker's metrics (SPEC §18), when asked for: a Prometheus port, an OTLP endpoint, or both.
 * Started before the user's module and the engine, so everything they record is kept; with
 * neither asked for, the metrics SDK is never imported.
 */
export async function startWorkerMetrics(settings: WorkerMetricsEnv, serviceName: string | undefined): Promise<WorkerMetrics> {
  const metrics = await startMetrics({
    prometheus: settings.port !== undefined,
    otlp: settings.otlpUrl ? { url: settings.otlpUrl, intervalMs: settings.exportIntervalMs } : undefined,
    serviceName,
  });
  if (!metrics.enabled) return { observe: () => undefined, describe: () => 'off', shutdown: async () => undefined };
  let server: MetricsServer | undefined;
  try {
    // node:http only for a worker that serves its metrics.
    server = metrics.serve && settings.port !== undefined ? await (await import('./metrics-server.ts')).serveMetrics(settings.port, metrics.serve) : undefined;
  } catch (error) {
    await metrics.shutdown();
    throw error;
  }
  let closeReader: (() => Promise<void>) | undefined;
  return {
    observe(where) {
      const connection = resolveConnection({ ...(where.redis ? { redis: where.redis } : {}), ...(where.prefix ? { prefix: where.prefix } : {}) });
      const reader = openMetricsReader({ redis: connection.redis, prefix: connection.prefix, queues: where.queues });
      closeReader = () => reader.close();
      observeQueues(() => reader.read());
    },
    describe: () => [server ? `:${server.port}/metrics` : undefined, settings.otlpUrl ? 'otlp' : undefined].filter(Boolean).join(','),
    async shutdown() {
      await metrics.shutdown();
      await Promise.all([server?.close(), closeReader?.()]);
    },
  };
}
