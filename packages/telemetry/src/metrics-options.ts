import type { IncomingMessage, ServerResponse } from 'node:http';

/** What starting a process's metrics takes (the SDK itself is in metrics-sdk.ts, loaded only when metrics are on). */
export interface MetricsOptions {
  /** Serve the Prometheus text format (the caller's HTTP server calls `serve`). */
  readonly prometheus?: boolean;
  /** Export over OTLP/HTTP (JSON) to `url` every `intervalMs` (`OTEL_METRIC_EXPORT_INTERVAL`). */
  readonly otlp?: { readonly url: string; readonly intervalMs: number } | undefined;
  /** `OTEL_SERVICE_NAME` (default `arcflow-worker`). */
  readonly serviceName?: string | undefined;
}

/** Answers a request with the current metrics in the Prometheus text format. */
export type MetricsHandler = (request: IncomingMessage, response: ServerResponse) => void;

export interface ProcessMetrics {
  readonly enabled: boolean;
  /** Set when Prometheus was asked for. */
  readonly serve?: MetricsHandler;
  /** Exports what is left (OTLP) and stops recording. Call after the worker has drained. */
  shutdown(): Promise<void>;
}

/** Metrics read at each scrape (`arcflow serve`'s). */
export interface ScrapedMetrics {
  /** Collects now, and gives the Prometheus text format. */
  text(): Promise<string>;
  shutdown(): Promise<void>;
}
