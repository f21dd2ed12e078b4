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

/** The attributes whose keys are allowlisted: the same object when all are (arcflow's own spans), else a copy with those. */
export function filterAttributes(attributes: Attributes): Attributes {
  let allAllowed = true;
  for (const key in attributes) {
    if (!ALLOWED_ATTRIBUTES.has(key)) {
      allAllowed = false;
      break;
    }
  }
  if (allAllowed) return attributes;
  const kept: Attributes = {};
  for (const [key, value] of Object.entries(attributes)) if (ALLOWED_ATTRIBUTES.has(key)) kept[key] = value;
  return kept;
}

/**
 * The span as it may leave the process: the span itself when the policy changes nothing in it
 * (arcflow's own spans, as a rule), else a plain copy with what the policy allows.
 */
function sanitise(span: ReadableSpan): ReadableSpan {
  const attributes = filterAttributes(span.attributes);
  const linksAllowed = span.links.every((link) => !link.attributes || filterAttributes(link.attributes) === link.attributes);
  const statusAllowed = !span.status.message || span.status.message === attributes['error.type'];
  if (attributes === span.attributes && linksAllowed && statusAllowed && span.events.length === 0) return span;
  const links: Link[] = linksAllowed ? span.links : span.links.map((link) => ({ ...link, attributes: filterAttributes(link.attributes ?? {}) }));
  const status: SpanStatus = statusAllowed ? span.status : { code: span.status.code };
  const spanContext = span.spanContext();
  return {
    name: span.name,
    kind: span.kind,
    spanContext: () => spanContext,
    ...(span.parentSpanContext ? { parentSpanContext: span.parentSpanContext } : {}),
    startTime: span.startTime,
    endTime: span.endTime,
    status,
    attributes,
    links,
    events: [],
    duration: span.duration,
    ended: span.ended,
    resource: span.resource,
    instrumentationScope: span.instrumentationScope,
    droppedAttributesCount: span.droppedAttributesCount,
    droppedEventsCount: span.droppedEventsCount,
    droppedLinksCount: span.droppedLinksCount,
  };
}
