/** What starting telemetry takes and gives (the SDK itself is in sdk.ts, loaded only when tracing is on). */
export interface TelemetryOptions {
  /** OTLP/HTTP base URL (`OTEL_EXPORTER_OTLP_ENDPOINT`); `/v1/traces` is appended. Unset: tracing off. */
  endpoint?: string;
  /** `OTEL_SERVICE_NAME` (default `arcflow-worker`). */
  serviceName?: string;
  /** Batch delay before export, in ms (default: `OTEL_BSP_SCHEDULE_DELAY`, else 5000). */
  scheduledDelayMs?: number;
}

export interface Telemetry {
  readonly enabled: boolean;
  /** Flushes every pending span and stops the exporter. Call after the worker has drained. */
  shutdown(): Promise<void>;
}
