// A run's timeline folded from its events: one span per provider call, tool call (a child run's
// call among them), approval wait and workflow step, each from its start event to its end event.
import type { Event } from './api.ts';

/** What a span stands for: the kind of work, and so which pair of events bounds it. */
export type SpanKind = 'provider' | 'tool' | 'child' | 'approval' | 'step';
/** How a span ended (`running`: it has not, yet). */
export type SpanOutcome = 'completed' | 'failed' | 'retried' | 'waiting' | 'running' | 'cancelled' | 'skipped';

export interface Span {
  /** Unique within the run: kind, step, and the call's id or iteration, and the attempt. */
  id: string;
  kind: SpanKind;
  label: string;
  step_id: string;
  start: number;
  /** Epoch ms; for a span still open, the time the timeline was drawn up to. */
  end: number;
  outcome: SpanOutcome;
  /** What the outcome was, in a few words (an error code, who approved). */
  note: string;
}

export interface Timeline {
  spans: Span[];
  /** The axis: the run's first event to its last (or now, while it runs). */
  from: number;
  to: number;
}

const ENDS = new Set(['RunCompleted', 'RunFailed', 'RunCancelled']);

/**
 * The spans of a run, in the order they started. `now` closes the spans still open (a run still
 * going); once the run has ended, an open span (a call cut short by a cancel) ends at the run's end.
 */
export function timeline(events: readonly Event[], now: number): Timeline {
  const spans: Span[] = [];
  const open = new Map<string, Span>();
  const begin = (key: string, span: Omit<Span, 'end' | 'outcome' | 'note'>) => {
    const previous = open.get(key);
    // A new attempt while the last one is open: that one was retried.
    if (previous) close(key, span.start, 'retried', previous.note || 'tried again');
    const opened: Span = { ...span, end: span.start, outcome: span.kind === 'approval' ? 'waiting' : 'running', note: '' };
    spans.push(opened);
    open.set(key, opened);
  };
  const close = (key: string, at: number, outcome: SpanOutcome, note = '') => {
    const span = open.get(key);
    if (!span) return undefined;
    Object.assign(span, { end: Math.max(at, span.start), outcome, note });
    open.delete(key);
    return span;
  };
  let ended: { at: number; cancelled: boolean } | undefined;
  for (const event of events) {
    const place = `${event.step_id}#${event.iteration ?? 1}`;
    const call = `${event.step_id}|${String(event.tool_call_id)}`;
    const base = { step_id: event.step_id, start: event.ts };
    switch (event.kind) {
      case 'StepStarted':
        begin(`step|${event.step_id}`, { ...base, id: `step:${event.step_id}`, kind: 'step', label: event.step_id });
        break;
      case 'StepCompleted':
        close(`step|${event.step_id}`, event.ts, 'completed');
        break;
      case 'StepExecutionFailed':
        // An agent run's only step fails with no StepStarted before it: only a workflow's steps have spans.
        close(`step|${event.step_id}`, event.ts, 'failed', String(event.error_code));
        break;
      case 'StepSkipped':
        spans.push({ ...base, id: `step:${event.step_id}`, kind: 'step', label: event.step_id, end: event.ts, outcome: 'skipped', note: String(event.reason) });
        break;
      case 'ProviderRequestSent': {
        const attempts = spans.filter((span) => span.kind === 'provider' && span.id.startsWith(`provider:${place}:`)).length;
        begin(`provider|${place}`, { ...base, id: `provider:${place}:${attempts + 1}`, kind: 'provider', label: `${labelOf(event)} · ${event.model_id}` });
        break;
      }
      case 'ProviderResponseReceived':
        close(`provider|${place}`, event.ts, 'completed', `${(event.tokens as { total?: number } | undefined)?.total ?? 0} tokens`);
        break;
      case 'ProviderRateLimited':
        close(`provider|${place}`, event.ts, 'retried', 'rate limited');
        break;
      case 'ProviderError':
        close(`provider|${place}`, event.ts, event.retryable === true ? 'retried' : 'failed', String(event.error_code));
        break;
      case 'ToolCallStarted': {
        const child = typeof event.child_run_id === 'string';
        const attempt = Number(event.attempt ?? 1);
        const label = `${event.tool_name}${child ? ' (child run)' : ''}${attempt > 1 ? ` · attempt ${attempt}` : ''}`;
        begin(`tool|${call}`, { ...base, id: `tool:${event.step_id}:${String(event.tool_call_id)}:${attempt}`, kind: child ? 'child' : 'tool', label });
        break;
      }
      case 'ToolCallCompleted':
        close(`tool|${call}`, event.ts, 'completed');
        break;
      case 'ToolCallFailed':
        close(`tool|${call}`, event.ts, event.error_code === 'cancelled' ? 'cancelled' : 'failed', String(event.error_code));
        break;
      case 'ToolInputValidationFailed':
      case 'LoopDetected':
        // A call refused before it ran has no start: an instant at the refusal.
        if (!close(`tool|${call}`, event.ts, 'failed', event.kind === 'LoopDetected' ? 'loop detected' : 'invalid arguments')) {
          const note = event.kind === 'LoopDetected' ? 'loop detected' : 'invalid arguments';
          spans.push({
            ...base,
            id: `tool:${event.step_id}:${String(event.tool_call_id)}:0`,
            kind: 'tool',
            label: String(event.tool_name),
            end: event.ts,
            outcome: 'failed',
            note,
          });
        }
        break;
      case 'ToolApprovalRequested':
        begin(`approval|${call}`, { ...base, id: `approval:${event.step_id}:${String(event.tool_call_id)}`, kind: 'approval', label: `approval of ${event.tool_name}` });
        break;
      case 'ToolApprovalResolved':
        close(`approval|${call}`, event.ts, 'waiting', event.approved === true ? 'approved' : 'rejected');
        break;
      default:
        if (ENDS.has(event.kind)) ended = { at: event.ts, cancelled: event.kind === 'RunCancelled' };
    }
  }
  const last = ended?.at ?? Math.max(now, events.at(-1)?.ts ?? now);
  for (const span of open.values()) {
    span.end = Math.max(last, span.start);
    // The run ended with the span open (a cancel, a failure elsewhere): it was cut short.
    if (ended && span.kind !== 'approval')
      Object.assign(span, ended.cancelled ? { outcome: 'cancelled', note: 'the run was cancelled' } : { outcome: 'failed', note: 'the run ended first' });
  }
  const from = events[0]?.ts ?? now;
  return { spans: spans.sort((a, b) => a.start - b.start), from, to: Math.max(last, from + 1) };
}

/** Where a provider call stands in the run: its iteration, and its step in a workflow run. */
function labelOf(event: Event): string {
  return event.step_id === 's1' ? `iteration ${event.iteration ?? 1}` : `${event.step_id} #${event.iteration ?? 1}`;
}

/** A span's length as people read it. */
export function spanLength(span: Span): string {
  const ms = span.end - span.start;
  return ms < 1_000 ? `${ms} ms` : `${(ms / 1_000).toFixed(ms < 10_000 ? 2 : 1)} s`;
}
