import { openMetricsReader } from '@arcflow/queue';
import { type ScrapedMetrics, startDeploymentMetrics } from '@arcflow/telemetry';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@fastify/type-provider-typebox';
import { problems } from '../schemas.ts';

export interface MetricsRoutesOptions {
  readonly redis: string;
  /** `ARCFLOW_PREFIX` (not `prefix`, which Fastify takes as the routes' path prefix). */
  readonly key_prefix: string;
}

/** The Prometheus text format's media type. */
const PROMETHEUS_TEXT = 'text/plain; version=0.0.4; charset=utf-8';

/**
 * `GET /metrics` (SPEC §18): the deployment's run counters and queue gauges, read from Redis at
 * each scrape (docs/decisions/0013-metrics.md). The metrics SDK and the reader's connection are
 * started by the first scrape: a server nobody scrapes loads neither.
 */
export const metricsRoutes: FastifyPluginAsyncTypebox<MetricsRoutesOptions> = async (app, options) => {
  let started: Promise<{ metrics: ScrapedMetrics; close: () => Promise<void> }> | undefined;
  const start = async () => {
    const reader = openMetricsReader({ redis: options.redis, prefix: options.key_prefix, runs: true });
    const metrics = await startDeploymentMetrics(() => reader.read());
    return { metrics, close: async () => void (await Promise.all([metrics.shutdown(), reader.close()])) };
  };
  app.addHook('onClose', async () => {
    if (started) await (await started).close();
  });
  app.get(
    '/metrics',
    {
      config: { scope: 'read' },
      schema: {
        summary: "The deployment's run counters and queue gauges, in the Prometheus text format",
        response: { 200: Type.String({ description: 'Prometheus text format 0.0.4' }), ...problems(401, 403, 429) },
      },
    },
    async (_request, reply) => {
      started ??= start();
      const { metrics } = await started;
      return reply.type(PROMETHEUS_TEXT).send(await metrics.text());
    },
  );
};
