import { createHash, randomBytes } from 'node:crypto';
import { createRequire } from 'node:module';
import type { Context, Link, Span, SpanContext, SpanKind as OtelSpanKind, SpanStatusCode } from '@opentelemetry/api';
import { openTelemetryRegistered, tracingEnabled, withForcedIds } from '@arcflow/telemetry/ids';
import { Attr, SpanName } from '@arcflow/telemetry/semconv';
import type { TraceCarrier } from './jobs/jobs.ts';

// The OpenTelemetry API is loaded when a span is made, not with the engine: a process that does not
// trace never loads it (one that does has loaded it already, with the SDK), nor does one where
// nothing registered OpenTelemetry globals (so no span can be active). CommonJS is what Node
// resolves the package to, for `import` as for `require`, so this is the same module either way.
const load = createRequire(import.meta.url);
let api: typeof import('@opentelemetry/api') | undefined;
const otel = () => (api ??= load('@opentelemetry/api') as typeof import('@opentelemetry/api'));

/**
 * The engine's spans, on `@opentelemetry/api` only (no-ops unless the telemetry package started
 * the SDK). One trace per run: ids minted at enqueue travel in job data; every job span is a
 * child of the run's root and links to the span that enqueued it.
 */
const tracer = () => otel().trace.getTracer('arcflow');

/** The span kinds the engine's spans use, as the API numbers them. */
export const SpanKind = { INTERNAL: 0 as OtelSpanKind.INTERNAL, CLIENT: 2 as OtelSpanKind.CLIENT, CONSUMER: 4 as OtelSpanKind.CONSUMER } as const;
const STATUS_ERROR = 2 as SpanStatusCode.ERROR;
/** The W3C trace flag that says the trace is sampled. */
const SAMPLED = 1;
const INVALID_TRACE_ID = '0'.repeat(32);
const INVALID_SPAN_ID = '0'.repeat(16);

/**
 * What the run record keeps: the run's root (`traceparent`) and the span enqueue was called in, if
 * any; a child run's root is in its parent's trace, a child of the span of the call that started it (`parent`).
 */
export interface RunTrace {
  readonly traceparent: string;
  readonly request?: string;
  readonly parent?: string;
}

export function formatTraceparent(spanContext: SpanContext): string {
  return `00-${spanContext.traceId}-${spanContext.spanId}-0${spanContext.traceFlags & SAMPLED}`;
}

/** A span context with a trace id and a span id that are not all zeros (the API's `isSpanContextValid`). */
function isSpanContextValid(spanContext: SpanContext): boolean {
  return (
    /^[0-9a-f]{32}$/i.test(spanContext.traceId) && spanContext.traceId !== INVALID_TRACE_ID && /^[0-9a-f]{16}$/i.test(spanContext.spanId) && spanContext.spanId !== INVALID_SPAN_ID
  );
}

export function parseTraceparent(value: string | undefined): SpanContext | undefined {
  const match = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/.exec(value ?? '');
  if (!match) return undefined;
  // The pattern has checked the ids' form: what is left of validity is that neither is all zeros.
  if (match[1] === INVALID_TRACE_ID || match[2] === INVALID_SPAN_ID) return undefined;
  return { traceId: match[1]!, spanId: match[2]!, traceFlags: Number.parseInt(match[3]!, 16), isRemote: true };
}

/** Mints the run's trace at enqueue; links to the caller's active span (a backend's request). */
export function mintRunTrace(): RunTrace {
  const active = openTelemetryRegistered() ? otel().trace.getActiveSpan()?.spanContext() : undefined;
  // Trace id (16 bytes) and root span id (8 bytes) from one draw.
  const ids = randomBytes(24).toString('hex');
  const traceparent = `00-${ids.slice(0, 32)}-${ids.slice(32)}-01`;
  return active && isSpanContextValid(active) ? { traceparent, request: formatTraceparent(active) } : { traceparent };
}

/**
 * A child run's trace (SPEC §13): its parent run's trace id, a root span id of its own, and the
 * span of the parent's call as its root's parent. Without a parent trace, a trace of its own.
 */
export function mintChildTrace(parentRunTraceparent: string | undefined, callTraceparent: string | undefined): RunTrace {
  const parent = parseTraceparent(parentRunTraceparent);
  if (!parent || !callTraceparent) return mintRunTrace();
  const spanId = randomBytes(8).toString('hex');
  return { traceparent: `00-${parent.traceId}-${spanId}-0${parent.traceFlags & SAMPLED}`, parent: callTraceparent };
}

/** The first job's carrier: the run's root, created by the caller's request span if there was one. */
export function firstJobCarrier(runTrace: RunTrace): TraceCarrier {
  return runTrace.request ? { traceparent: runTrace.traceparent, from: runTrace.request } : { traceparent: runTrace.traceparent };
}

/** The carrier for a job enqueued from inside `span`: the run's root, and `span` as its creator. */
export function childCarrier(carrier: TraceCarrier, span: Span): TraceCarrier {
  const from = span.spanContext();
  return isSpanContextValid(from) ? { traceparent: carrier.traceparent!, from: formatTraceparent(from) } : { traceparent: carrier.traceparent! };
}

function runContext(carrier: TraceCarrier): Context {
  const { ROOT_CONTEXT, trace } = otel();
  const root = parseTraceparent(carrier.traceparent);
  return root ? trace.setSpanContext(ROOT_CONTEXT, root) : ROOT_CONTEXT;
}

const linkTo = (traceparent: string | undefined): Link[] => {
  const spanContext = parseTraceparent(traceparent);
  return spanContext ? [{ context: spanContext }] : [];
};

/** The job a span stands for: its queue, id and deliveries so far, and the span that enqueued it. */
export interface JobOrigin {
  readonly queue: string;
  readonly id?: string | undefined;
  readonly attemptsStarted: number;
  readonly from?: string | undefined;
}

/** The messaging attributes of a span that stands for a job. */
function jobAttributes(origin: JobOrigin): Record<string, string | number> {
  return {
    [Attr.messagingSystem]: 'bullmq',
    [Attr.messagingOperationName]: 'process',
    [Attr.messagingOperationType]: 'process',
    [Attr.messagingDestination]: origin.queue,
    ...(origin.id ? { [Attr.messagingMessageId]: origin.id } : {}),
    [Attr.jobAttempt]: Math.max(1, origin.attemptsStarted),
  };
}

/** Runs `work` inside a `process {queue}` CONSUMER span, child of the run's root: a provider job's span. */
export async function inJobSpan<T>(
  queue: string,
  job: { id?: string; attemptsStarted: number; data: { run_id: string; step_id: string; iteration: number; trace: TraceCarrier } },
  work: (span: Span) => Promise<T>,
): Promise<T> {
  // Spans are made only when arcflow's telemetry runs in this process (it alone can emit the run's
  // root): otherwise every job would pay for spans that go nowhere.
  if (!tracingEnabled()) return work(UNTRACED);
  const { run_id, step_id, iteration, trace: carrier } = job.data;
  const parent = runContext(carrier);
  const span = tracer().startSpan(
    SpanName.process(queue),
    {
      kind: SpanKind.CONSUMER,
      links: linkTo(carrier.from),
      attributes: {
        ...jobAttributes({ queue, id: job.id, attemptsStarted: job.attemptsStarted }),
        [Attr.runId]: run_id,
        [Attr.stepId]: step_id,
        [Attr.iteration]: iteration,
      },
    },
    parent,
  );
  const { context, trace } = otel();
  try {
    return await context.with(trace.setSpan(parent, span), () => work(span));
  } catch (error) {
    failSpan(span, (error as { name?: string })?.name === 'RateLimitError' ? 'rate_limited' : 'job_error');
    throw error;
  } finally {
    span.end();
  }
}

/**
 * Runs `work` in the run's trace with no span of its own: a tool job, whose call's `execute_tool`
 * span stands for the job (see {@link startChildSpan}'s `job`). A `process` span of its own would
 * have that one child, and double the spans of a run of tool calls.
 */
export function inRunTrace<T>(carrier: TraceCarrier | undefined, work: () => Promise<T>): Promise<T> {
  if (!tracingEnabled()) return work();
  return otel().context.with(runContext(carrier ?? {}), work);
}

/**
 * A child span of the active span (a job's, or the run's root). Its name and attributes are built
 * only when this process traces: a tool call that is not traced should not pay for them. Given a
 * `job`, the span stands for that job too: it carries the job's messaging attributes and links to
 * the span that enqueued it.
 */
export function startChildSpan(kind: OtelSpanKind, describe: () => { name: string; attributes: Record<string, string | number> }, job?: JobOrigin): Span {
  if (!tracingEnabled()) return UNTRACED;
  const { name, attributes } = describe();
  if (!job) return tracer().startSpan(name, { kind, attributes });
  return tracer().startSpan(name, { kind, attributes: { ...attributes, ...jobAttributes(job) }, links: linkTo(job.from) });
}

/** Runs `work` with `span` as the active span (spans it starts nest under it); untraced, just runs it. */
export function withActiveSpan<T>(span: Span, work: () => T): T {
  if (span === UNTRACED) return work();
  const { context, trace } = otel();
  return context.with(trace.setSpan(context.active(), span), work);
}

const INVALID_SPAN_CONTEXT: SpanContext = { traceId: INVALID_TRACE_ID, spanId: INVALID_SPAN_ID, traceFlags: 0 };

/** The span work gets when this process does not trace: records nothing, links nothing (the API's non-recording span, without loading the API). */
const UNTRACED: Span = {
  spanContext: () => INVALID_SPAN_CONTEXT,
  setAttribute: () => UNTRACED,
  setAttributes: () => UNTRACED,
  addEvent: () => UNTRACED,
  addLink: () => UNTRACED,
  addLinks: () => UNTRACED,
  setStatus: () => UNTRACED,
  updateName: () => UNTRACED,
  end: () => undefined,
  isRecording: () => false,
  recordException: () => undefined,
};

export function failSpan(span: Span, errorType: string): void {
  span.setAttribute(Attr.errorType, errorType);
  span.setStatus({ code: STATUS_ERROR, message: errorType });
}

/** The span's W3C traceparent, when it is recording (so links can point at it). */
export function recordedTraceparent(span: Span): string | undefined {
  return span.isRecording() ? formatTraceparent(span.spanContext()) : undefined;
}

export function linkSpans(span: Span, traceparents: Iterable<string>): void {
  const links = [...traceparents].flatMap(linkTo);
  if (links.length > 0) span.addLinks(links);
}

/**
 * Emits the run's root span with the ids minted at enqueue, from its creation to now:
 * `invoke_agent {agent}`, or `invoke_workflow {workflow}` for a workflow run. Called once, by the
 * process whose write ended the run.
 */
export function emitRunSpan(
  runTrace: RunTrace,
  run: { run_id: string; agent: string; workflow?: string; created_at: number; status: string; usage: { input: number; output: number }; error_code?: string },
): void {
  if (!tracingEnabled()) return;
  const root = parseTraceparent(runTrace.traceparent);
  if (!root) return;
  const operation = run.workflow ? 'invoke_workflow' : 'invoke_agent';
  // A child run's root is a child of its parent's call span (SPEC §13); any other run's starts its trace.
  const parent = parseTraceparent(runTrace.parent);
  const { ROOT_CONTEXT, trace } = otel();
  const span = withForcedIds(root.traceId, root.spanId, () =>
    tracer().startSpan(
      run.workflow ? SpanName.invokeWorkflow(run.workflow) : SpanName.invokeAgent(run.agent),
      {
        root: parent === undefined,
        kind: SpanKind.INTERNAL,
        startTime: run.created_at,
        links: linkTo(runTrace.request),
        attributes: {
          [Attr.operationName]: operation,
          ...(run.workflow ? { [Attr.workflowName]: run.workflow } : { [Attr.agentName]: run.agent }),
          [Attr.runId]: run.run_id,
          [Attr.runStatus]: run.status,
          [Attr.inputTokens]: run.usage.input,
          [Attr.outputTokens]: run.usage.output,
        },
      },
      parent ? trace.setSpanContext(ROOT_CONTEXT, parent) : ROOT_CONTEXT,
    ),
  );
  if (run.error_code) failSpan(span, run.error_code);
  else if (run.status === 'cancelled') failSpan(span, 'cancelled');
  span.end();
}

/**
 * A workflow agent step's span id, derived from the run's root and the step id: every process
 * names the same span without storing it, so the step's jobs nest under it before it is emitted.
 */
export function stepTraceparent(runTraceparent: string | undefined, step_id: string): string | undefined {
  return derivedTraceparent(runTraceparent, step_id);
}

/**
 * The `execute_tool` span id of a call that started a child run (SPEC §13), derived like a step's:
 * the child's root span names it as parent before it is emitted, when the child ends.
 */
export function childCallTraceparent(runTraceparent: string | undefined, call: { step_id: string; iteration: number; tool_call_id: string }): string | undefined {
  return derivedTraceparent(runTraceparent, `call/${call.step_id}/${call.iteration}/${call.tool_call_id}`);
}

function derivedTraceparent(runTraceparent: string | undefined, key: string): string | undefined {
  const root = parseTraceparent(runTraceparent);
  if (!root) return undefined;
  const spanId = createHash('sha256').update(`${root.spanId}/${key}`).digest('hex').slice(0, 16);
  return `00-${root.traceId}-${spanId}-0${root.traceFlags & SAMPLED}`;
}

/** Emits the `execute_tool {tool}` span of a call whose child run has ended (ids from {@link childCallTraceparent}), child of the run's root. */
export function emitChildCallSpan(
  runTraceparent: string | undefined,
  call: { run_id: string; step_id: string; iteration: number; tool_call_id: string; tool_name: string; started_at: number; child_run_id: string; error_code?: string },
): void {
  emitDerivedSpan(runTraceparent, childCallTraceparent(runTraceparent, call), SpanName.executeTool(call.tool_name), call.started_at, call.error_code, () => ({
    [Attr.operationName]: 'execute_tool',
    [Attr.toolName]: call.tool_name,
    [Attr.toolCallId]: call.tool_call_id,
    [Attr.toolType]: 'function',
    [Attr.runId]: call.run_id,
    [Attr.stepId]: call.step_id,
    [Attr.iteration]: call.iteration,
    [Attr.childRunId]: call.child_run_id,
  }));
}

/** Emits a workflow agent step's `invoke_agent {agent}` span (ids from {@link stepTraceparent}), child of the run's root. */
export function emitStepSpan(runTraceparent: string | undefined, step: { run_id: string; step_id: string; agent: string; started_at: number; error_code?: string }): void {
  emitDerivedSpan(runTraceparent, stepTraceparent(runTraceparent, step.step_id), SpanName.invokeAgent(step.agent), step.started_at, step.error_code, () => ({
    [Attr.operationName]: 'invoke_agent',
    [Attr.agentName]: step.agent,
    [Attr.runId]: step.run_id,
    [Attr.stepId]: step.step_id,
  }));
}

/** Emits, from `startTime` to now, a span whose ids were derived from the run's root (`own`), as a child of that root; failed with `error_code` if given. */
function emitDerivedSpan(
  runTraceparent: string | undefined,
  ownTraceparent: string | undefined,
  name: string,
  startTime: number,
  error_code: string | undefined,
  attributes: () => Record<string, string | number>,
): void {
  if (!tracingEnabled()) return;
  const own = parseTraceparent(ownTraceparent);
  const root = parseTraceparent(runTraceparent);
  if (!own || !root) return;
  const { ROOT_CONTEXT, trace } = otel();
  const span = withForcedIds(own.traceId, own.spanId, () =>
    tracer().startSpan(name, { kind: SpanKind.INTERNAL, startTime, attributes: attributes() }, trace.setSpanContext(ROOT_CONTEXT, root)),
  );
  if (error_code) failSpan(span, error_code);
  span.end();
}
