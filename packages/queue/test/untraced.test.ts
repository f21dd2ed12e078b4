import {
  type Context,
  type ContextManager,
  ROOT_CONTEXT,
  SpanKind as OtelSpanKind,
  type Span,
  SpanStatusCode,
  TraceFlags,
  context,
  isSpanContextValid,
  trace,
} from '@opentelemetry/api';
import { openTelemetryRegistered } from '@arcflow/telemetry/ids';
import { describe, expect, it } from 'vitest';
import { SpanKind, failSpan, formatTraceparent, mintRunTrace, parseTraceparent, recordedTraceparent, startChildSpan, withActiveSpan } from '../src/tracing.ts';

// The engine's tracing reaches for the OpenTelemetry API only when it makes a span; these are what it
// uses without the API, which must say what the API says.
describe('tracing without the OpenTelemetry API loaded', () => {
  it('numbers span kinds, the error status and the sampled flag as the API does', () => {
    expect(SpanKind).toEqual({ INTERNAL: OtelSpanKind.INTERNAL, CLIENT: OtelSpanKind.CLIENT, CONSUMER: OtelSpanKind.CONSUMER });
    const statuses: unknown[] = [];
    failSpan({ setAttribute: () => undefined, setStatus: (status: unknown) => statuses.push(status) } as unknown as Span, 'tool_error');
    expect(statuses).toEqual([{ code: SpanStatusCode.ERROR, message: 'tool_error' }]);
    const sampled = { traceId: 'a'.repeat(32), spanId: 'b'.repeat(16), traceFlags: TraceFlags.SAMPLED | 0x02 };
    expect(formatTraceparent(sampled)).toBe(`00-${'a'.repeat(32)}-${'b'.repeat(16)}-01`);
  });

  it('takes a traceparent as valid exactly when the API takes its span context as valid', () => {
    const ids = ['0'.repeat(32), 'a'.repeat(32), `${'0'.repeat(31)}1`];
    const spans = ['0'.repeat(16), 'b'.repeat(16), `${'0'.repeat(15)}1`];
    for (const traceId of ids) {
      for (const spanId of spans) {
        const parsed = parseTraceparent(`00-${traceId}-${spanId}-01`);
        expect(parsed !== undefined, `${traceId}-${spanId}`).toBe(isSpanContextValid({ traceId, spanId, traceFlags: 1 }));
      }
    }
  });

  it('gives work an untraced span that records nothing and runs it as it is', () => {
    const span = startChildSpan(SpanKind.INTERNAL, () => {
      throw new Error('not built when untraced');
    });
    expect(span.isRecording()).toBe(false);
    expect(span.spanContext()).toEqual({ traceId: '0'.repeat(32), spanId: '0'.repeat(16), traceFlags: 0 });
    expect(span.setAttribute('a', 1).addLinks([]).setStatus({ code: SpanStatusCode.ERROR })).toBe(span);
    expect(recordedTraceparent(span)).toBeUndefined();
    expect(withActiveSpan(span, () => 42)).toBe(42);
  });

  it("links a run to the caller's active span when the process registered OpenTelemetry of its own", () => {
    expect(openTelemetryRegistered()).toBe(false);
    expect(mintRunTrace().request).toBeUndefined();
    // An application's own context manager (synchronous, enough here) and its request span.
    let active: Context = ROOT_CONTEXT;
    const manager: ContextManager = {
      active: () => active,
      with: (next, fn, thisArg, ...args) => {
        const before = active;
        active = next;
        try {
          return fn.call(thisArg, ...args);
        } finally {
          active = before;
        }
      },
      bind: (_context, target) => target,
      enable: () => manager,
      disable: () => manager,
    };
    context.setGlobalContextManager(manager);
    try {
      expect(openTelemetryRegistered()).toBe(true);
      const request = { traceId: 'c'.repeat(32), spanId: 'd'.repeat(16), traceFlags: TraceFlags.SAMPLED };
      const minted = context.with(trace.setSpan(ROOT_CONTEXT, trace.wrapSpanContext(request)), () => mintRunTrace());
      expect(minted.request).toBe(formatTraceparent(request));
    } finally {
      context.disable();
    }
  });
});
