import type { ExportResult } from '@opentelemetry/core';
import type { ReadableSpan, SpanExporter } from '@opentelemetry/sdk-trace-base';
import type { Attributes, Link, SpanStatus } from '@opentelemetry/api';
import { ALLOWED_ATTRIBUTES } from './semconv.ts';

/**
 * Enforces the trace data policy at export, whoever created the span (a third-party
 * instrumentation included): only allowlisted attribute keys pass, span events are dropped (they
 * carry exception messages and payloads), and a status message survives only if it equals the
 * span's `error.type`.
 */
export class AllowlistExporter implements SpanExporter {
  constructor(private readonly inner: SpanExporter) {}

  export(spans: ReadableSpan[], resultCallback: (result: ExportResult) => void): void {
    this.inner.export(spans.map(sanitise), resultCallback);
  }

  shutdown(): Promise<void> {
    return this.inner.shutdown();
  }

  forceFlush(): Promise<void> {
    return this.inner.forceFlush?.() ?? Promise.resolve();
  }
}

export function filterAttributes(attributes: Attributes): Attributes {
  const kept: Attributes = {};
  for (const [key, value] of Object.entries(attributes)) if (ALLOWED_ATTRIBUTES.has(key)) kept[key] = value;
  return kept;
}

function sanitise(span: ReadableSpan): ReadableSpan {
  const attributes = filterAttributes(span.attributes);
  const links: Link[] = span.links.map((link) => ({ ...link, attributes: filterAttributes(link.attributes ?? {}) }));
  const status: SpanStatus = span.status.message && span.status.message !== attributes['error.type'] ? { code: span.status.code } : span.status;
  const overrides: Record<PropertyKey, unknown> = { attributes, links, events: [], status };
  return new Proxy(span, {
    get(target, property) {
      if (property in overrides) return overrides[property as string];
      const value = Reflect.get(target, property, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}
