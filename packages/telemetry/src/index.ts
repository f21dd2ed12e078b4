import type { Telemetry, TelemetryOptions } from './options.ts';

export { AllowlistExporter, filterAttributes } from './allowlist-exporter.ts';
export { ALLOWED_ATTRIBUTES, Attr, SpanName } from './semconv.ts';
export { withForcedIds, tracingEnabled } from './ids.ts';
export type { Telemetry, TelemetryOptions } from './options.ts';

/**
 * Starts the OpenTelemetry SDK when an endpoint is given: traces only (no metrics or logs), as
 * OTLP/HTTP JSON, through the allowlist exporter, with the id generator that lets the run's root
 * span carry the ids minted at enqueue. Without an endpoint it does nothing and loads nothing:
 * the API stays no-op, and the SDK's modules are never imported.
 */
export async function startTelemetry(options: TelemetryOptions = {}): Promise<Telemetry> {
  if (!options.endpoint) return { enabled: false, shutdown: async () => undefined };
  const { startTracingSdk } = await import('./sdk.ts');
  return startTracingSdk(options.endpoint, options);
}
