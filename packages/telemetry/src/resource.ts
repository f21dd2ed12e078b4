import { type Resource, defaultResource, detectResources, envDetector, hostDetector, processDetector, resourceFromAttributes } from '@opentelemetry/resources';

/**
 * The process as telemetry names it: the resource from the environment (`OTEL_RESOURCE_ATTRIBUTES`),
 * the host and the process, with `service.name` (`OTEL_SERVICE_NAME`, else `fallbackName`).
 */
export function processResource(serviceName: string | undefined, fallbackName: string): Resource {
  return defaultResource()
    .merge(detectResources({ detectors: [envDetector, hostDetector, processDetector] }))
    .merge(resourceFromAttributes({ 'service.name': serviceName ?? fallbackName }));
}
