import { type Server, createServer } from 'node:http';
import { ConfigError } from '@arcflow/core';
import type { MetricsHandler } from '@arcflow/telemetry';

export interface MetricsServer {
  readonly port: number;
  close(): Promise<void>;
}

/**
 * The worker's Prometheus endpoint: `GET /metrics` on `port` (every interface, as exporters
 * listen, for a scraper on another host); anything else is a 404. A port in use is refused with
 * a sentence naming it.
 */
export async function serveMetrics(port: number, handler: MetricsHandler): Promise<MetricsServer> {
  const server: Server = createServer((request, response) => {
    const path = (request.url ?? '').split('?')[0];
    if (path === '/metrics' && (request.method === 'GET' || request.method === 'HEAD')) return handler(request, response);
    response.writeHead(404, { 'content-type': 'text/plain; charset=utf-8' }).end('not found: metrics are at GET /metrics\n');
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', (error: NodeJS.ErrnoException) =>
      reject(
        error.code === 'EADDRINUSE' || error.code === 'EACCES'
          ? new ConfigError(
              `metrics port ${port} (--metrics-port or ARCFLOW_METRICS_PORT): cannot listen, ${error.code === 'EADDRINUSE' ? 'the port is in use' : 'permission denied'}`,
            )
          : error,
      ),
    );
    server.listen(port, () => resolve());
  });
  server.unref();
  return {
    port,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
