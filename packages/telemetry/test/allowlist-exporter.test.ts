import { SpanStatusCode, trace } from '@opentelemetry/api';
import { BasicTracerProvider, InMemorySpanExporter, type ReadableSpan, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { afterEach, describe, expect, it } from 'vitest';
import { AllowlistExporter } from '../src/allowlist-exporter.ts';

/** Spans ended under a provider whose only processor exports through the allowlist to memory. */
function exporting() {
  const memory = new InMemorySpanExporter();
  let seen: ReadableSpan[] = [];
  const inner = {
    export: (spans: ReadableSpan[], done: Parameters<InMemorySpanExporter['export']>[1]) => {
      seen = spans;
      memory.export(spans, done);
    },
    shutdown: () => memory.shutdown(),
  };
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(new AllowlistExporter(inner))] });
  return { tracer: provider.getTracer('test'), exported: () => seen, provider };
}

describe('AllowlistExporter', () => {
  let close: (() => Promise<void>) | undefined;
  afterEach(async () => close?.());

  it('passes a span the policy changes nothing in as it is, not a copy', () => {
    const { tracer, exported, provider } = exporting();
    close = () => provider.shutdown();
    const span = tracer.startSpan('execute_tool lookup', { attributes: { 'gen_ai.operation.name': 'execute_tool', 'gen_ai.tool.name': 'lookup' } });
    span.setStatus({ code: SpanStatusCode.ERROR, message: 'tool_error' });
    span.setAttribute('error.type', 'tool_error');
    span.end();
    const [out] = exported();
    expect(out).toBe(span);
    expect(out!.status.message).toBe('tool_error');
  });

  it('copies a span with what the policy removes: unknown attributes, events, a free status message, unknown link attributes', () => {
    const { tracer, exported, provider } = exporting();
    close = () => provider.shutdown();
    const linked = trace.wrapSpanContext({ traceId: 'a'.repeat(32), spanId: 'b'.repeat(16), traceFlags: 1 });
    const span = tracer.startSpan('third party', {
      attributes: { 'gen_ai.tool.name': 'lookup', 'gen_ai.tool.call.arguments': '{"secret":1}' },
      links: [{ context: linked.spanContext(), attributes: { 'http.request.body': 'secret' } }, { context: linked.spanContext() }],
    });
    span.recordException(new Error('secret in a message'));
    span.setStatus({ code: SpanStatusCode.ERROR, message: 'secret status' });
    span.end();
    const [out] = exported();
    expect(out).not.toBe(span);
    expect(out!.attributes).toEqual({ 'gen_ai.tool.name': 'lookup' });
    expect(out!.events).toEqual([]);
    expect(out!.status).toEqual({ code: SpanStatusCode.ERROR });
    expect(out!.links.map((link) => link.attributes)).toEqual([{}, {}]);
    expect(out!.spanContext()).toEqual(span.spanContext());
    expect(JSON.stringify({ ...out, spanContext: out!.spanContext() })).not.toContain('secret');
  });
});
