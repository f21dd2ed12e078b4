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
  const book = new SpanBook();
  let ended: RunEnd | undefined;
  for (const event of events) {
    if (ENDS.has(event.kind)) ended = { at: event.ts, cancelled: event.kind === 'RunCancelled' };
    foldStepEvent(book, event);
    foldProviderEvent(book, event);
    foldToolEvent(book, event);
  }
  const last = ended?.at ?? Math.max(now, events.at(-1)?.ts ?? now);
  book.closeOpen(last, ended);
  const from = events[0]?.ts ?? now;
  return { spans: book.spans.sort((a, b) => a.start - b.start), from, to: Math.max(last, from + 1) };
}

interface RunEnd {
  at: number;
  cancelled: boolean;
}

/** The spans drawn so far, and those still open by key (the pair of events that bounds them). */
class SpanBook {
  readonly spans: Span[] = [];
  private readonly open = new Map<string, Span>();

  begin(key: string, span: Omit<Span, 'end' | 'outcome' | 'note'>): void {
    const previous = this.open.get(key);
    // A new attempt while the last one is open: that one was retried.
    if (previous) this.close(key, span.start, 'retried', previous.note || 'tried again');
    const opened: Span = { ...span, end: span.start, outcome: span.kind === 'approval' ? 'waiting' : 'running', note: '' };
    this.spans.push(opened);
    this.open.set(key, opened);
  }

  close(key: string, at: number, outcome: SpanOutcome, note = ''): Span | undefined {
    const span = this.open.get(key);
    if (!span) return undefined;
    Object.assign(span, { end: Math.max(at, span.start), outcome, note });
    this.open.delete(key);
    return span;
  }

  /** Ends the spans still open at `last`; if the run has ended, they were cut short. */
  closeOpen(last: number, ended: RunEnd | undefined): void {
    for (const span of this.open.values()) {
      span.end = Math.max(last, span.start);
      // The run ended with the span open (a cancel, a failure elsewhere): it was cut short.
      if (ended && span.kind !== 'approval')
        Object.assign(span, ended.cancelled ? { outcome: 'cancelled', note: 'the run was cancelled' } : { outcome: 'failed', note: 'the run ended first' });
    }
  }
}

/** A workflow step's span, from `StepStarted` to its end (or an instant, when skipped). */
function foldStepEvent(book: SpanBook, event: Event): void {
  const base = { step_id: event.step_id, start: event.ts };
  switch (event.kind) {
    case 'StepStarted':
      book.begin(`step|${event.step_id}`, { ...base, id: `step:${event.step_id}`, kind: 'step', label: event.step_id });
      break;
    case 'StepCompleted':
      book.close(`step|${event.step_id}`, event.ts, 'completed');
      break;
    case 'StepExecutionFailed':
      // An agent run's only step fails with no StepStarted before it: only a workflow's steps have spans.
      book.close(`step|${event.step_id}`, event.ts, 'failed', String(event.error_code));
      break;
    case 'StepSkipped':
      book.spans.push({ ...base, id: `step:${event.step_id}`, kind: 'step', label: event.step_id, end: event.ts, outcome: 'skipped', note: String(event.reason) });
      break;
  }
}

/** A provider call's span, one per attempt, from its request to its response or error. */
function foldProviderEvent(book: SpanBook, event: Event): void {
  const place = `${event.step_id}#${event.iteration ?? 1}`;
  switch (event.kind) {
    case 'ProviderRequestSent': {
      const attempts = book.spans.filter((span) => span.kind === 'provider' && span.id.startsWith(`provider:${place}:`)).length;
      const label = `${labelOf(event)} · ${event.model_id}`;
      book.begin(`provider|${place}`, { step_id: event.step_id, start: event.ts, id: `provider:${place}:${attempts + 1}`, kind: 'provider', label });
      break;
    }
    case 'ProviderResponseReceived':
      book.close(`provider|${place}`, event.ts, 'completed', `${(event.tokens as { total?: number } | undefined)?.total ?? 0} tokens`);
      break;
    case 'ProviderRateLimited':
      book.close(`provider|${place}`, event.ts, 'retried', 'rate limited');
      break;
    case 'ProviderError':
      book.close(`provider|${place}`, event.ts, event.retryable === true ? 'retried' : 'failed', String(event.error_code));
      break;
  }
}

/** A tool call's span (a child run's call among them), one per attempt, and its approval wait. */
function foldToolEvent(book: SpanBook, event: Event): void {
  const call = `${event.step_id}|${String(event.tool_call_id)}`;
  const base = { step_id: event.step_id, start: event.ts };
  switch (event.kind) {
    case 'ToolCallStarted': {
      const child = typeof event.child_run_id === 'string';
      const attempt = Number(event.attempt ?? 1);
      const label = `${event.tool_name}${child ? ' (child run)' : ''}${attempt > 1 ? ` · attempt ${attempt}` : ''}`;
      book.begin(`tool|${call}`, { ...base, id: `tool:${event.step_id}:${String(event.tool_call_id)}:${attempt}`, kind: child ? 'child' : 'tool', label });
      break;
    }
    case 'ToolCallCompleted':
      book.close(`tool|${call}`, event.ts, 'completed');
      break;
    case 'ToolCallFailed':
      book.close(`tool|${call}`, event.ts, event.error_code === 'cancelled' ? 'cancelled' : 'failed', String(event.error_code));
      break;
    case 'ToolInputValidationFailed':
    case 'LoopDetected': {
      // A call refused before it ran has no start: an instant at the refusal.
      const note = event.kind === 'LoopDetected' ? 'loop detected' : 'invalid arguments';
      if (!book.close(`tool|${call}`, event.ts, 'failed', note)) {
        book.spans.push({
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
    }
    case 'ToolApprovalRequested':
      book.begin(`approval|${call}`, { ...base, id: `approval:${event.step_id}:${String(event.tool_call_id)}`, kind: 'approval', label: `approval of ${event.tool_name}` });
      break;
    case 'ToolApprovalResolved':
      book.close(`approval|${call}`, event.ts, 'waiting', event.approved === true ? 'approved' : 'rejected');
      break;
  }
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
