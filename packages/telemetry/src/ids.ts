/**
 * The one-shot id slot behind the run's deferred root span. The run's trace id and root span id
 * are minted at enqueue; the process that ends the run emits `invoke_agent` with exactly those
 * ids by filling this slot around a synchronous `startSpan`. No SDK import here, so the engine
 * can use it while only this package loads the SDK.
 */
interface Slot {
  traceId?: string;
  spanId?: string;
  /** Set by `startTelemetry`: whether spans are being exported from this process. */
  enabled: boolean;
}

const KEY = Symbol.for('arcflow.telemetry.slot');
const slots = globalThis as Record<symbol, Slot>;
slots[KEY] ??= { enabled: false };
const slot: Slot = slots[KEY];

export function withForcedIds<T>(traceId: string, spanId: string, start: () => T): T {
  slot.traceId = traceId;
  slot.spanId = spanId;
  try {
    return start();
  } finally {
    slot.traceId = undefined;
    slot.spanId = undefined;
  }
}

export function takeForcedTraceId(): string | undefined {
  const value = slot.traceId;
  slot.traceId = undefined;
  return value;
}

export function takeForcedSpanId(): string | undefined {
  const value = slot.spanId;
  slot.spanId = undefined;
  return value;
}

export function tracingEnabled(): boolean {
  return slot.enabled;
}

export function setTracingEnabled(enabled: boolean): void {
  slot.enabled = enabled;
}

/**
 * Where every copy of the OpenTelemetry API (1.x) keeps what was registered with it: a context
 * manager, a tracer or meter provider, a propagator.
 */
const OPENTELEMETRY_GLOBALS = Symbol.for('opentelemetry.js.api.1');

/**
 * Whether anything in this process registered OpenTelemetry globals. When nothing did, no span is
 * active and no meter provider is there, so the API need not be loaded to find out.
 */
export function openTelemetryRegistered(): boolean {
  return OPENTELEMETRY_GLOBALS in globalThis;
}
