import { RUN_TERMINAL_KINDS, TOOL_TERMINAL_KINDS, type TraceEvent } from '@arcflow/core';

/**
 * Checks the log's invariants and throws on the first breach: `seq` is 1..n with no gaps or
 * repeats, nothing follows the run's terminal event, every tool call that appears ends in exactly
 * one terminal event with nothing of that call after it, and a call's `ToolCallStarted` repeats
 * only with a higher `attempt`.
 */
export function assertEventInvariants(events: readonly TraceEvent[]): void {
  events.forEach((event, index) => {
    if (event.seq !== index + 1) throw new Error(`event ${index} has seq ${event.seq}, expected ${index + 1}`);
  });
  const terminals = new Map<string, number>();
  const seen = new Set<string>();
  const lastAttempt = new Map<string, number>();
  const runEnd = events.findIndex((event) => RUN_TERMINAL_KINDS.has(event.kind));
  if (runEnd !== -1 && runEnd !== events.length - 1) throw new Error(`${events[runEnd + 1]!.kind} was written after ${events[runEnd]!.kind}`);
  for (const event of events) {
    if (!('tool_call_id' in event)) continue;
    const key = `${event.step_id}/${event.iteration}/${event.tool_call_id}`;
    if (terminals.has(key) && !TOOL_TERMINAL_KINDS.has(event.kind)) throw new Error(`tool call ${key} has ${event.kind} after its terminal event`);
    seen.add(key);
    if (event.kind === 'ToolCallStarted') {
      const before = lastAttempt.get(key) ?? 0;
      if (event.attempt <= before) throw new Error(`tool call ${key} started attempt ${event.attempt} after attempt ${before}`);
      lastAttempt.set(key, event.attempt);
    }
    if (TOOL_TERMINAL_KINDS.has(event.kind)) terminals.set(key, (terminals.get(key) ?? 0) + 1);
  }
  for (const key of seen) {
    const count = terminals.get(key) ?? 0;
    if (count !== 1) throw new Error(`tool call ${key} has ${count} terminal events, expected exactly 1`);
  }
}

const STEP_ENDS: ReadonlySet<string> = new Set(['StepCompleted', 'StepExecutionFailed']);

/**
 * A workflow run's log, besides {@link assertEventInvariants}: `RunEnqueued` first and the
 * terminal event last, both with `step_id: "run"`; every step starts at most once, and all of a
 * step's events come after its `StepStarted` and none after its `StepCompleted` /
 * `StepExecutionFailed`; a skipped step has no other event.
 */
export function assertWorkflowInvariants(events: readonly TraceEvent[]): void {
  assertEventInvariants(events);
  const first = events[0];
  if (first?.kind !== 'RunEnqueued' || first.step_id !== 'run') throw new Error(`the log starts with ${first?.kind} (${first?.step_id}), not RunEnqueued of step 'run'`);
  const last = events.at(-1);
  if (last && RUN_TERMINAL_KINDS.has(last.kind) && last.step_id !== 'run') throw new Error(`${last.kind} has step_id '${last.step_id}', expected 'run'`);
  const started = new Set<string>();
  const ended = new Set<string>();
  const skipped = new Set<string>();
  for (const event of events.slice(1)) {
    const step = event.step_id;
    if (RUN_TERMINAL_KINDS.has(event.kind)) continue;
    if (event.kind === 'StepSkipped') {
      if (started.has(step) || skipped.has(step)) throw new Error(`step '${step}' was skipped after it started or was skipped`);
      skipped.add(step);
      continue;
    }
    if (event.kind === 'StepStarted') {
      if (started.has(step) || skipped.has(step)) throw new Error(`step '${step}' started twice, or after it was skipped`);
      started.add(step);
      continue;
    }
    if (!started.has(step)) throw new Error(`${event.kind} of step '${step}' came before its StepStarted`);
    if (ended.has(step)) throw new Error(`${event.kind} of step '${step}' came after the step ended`);
    if (STEP_ENDS.has(event.kind)) ended.add(step);
  }
}
