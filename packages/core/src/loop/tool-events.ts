import type { StateChange } from '../state/run-state.ts';
import { byteSize } from '../canonical.ts';
import type { ToolFailureCode } from '../errors.ts';
import type { EventDraft } from '../events/types.ts';
import type { HandlerOutcome } from '../tools/run-handler.ts';
import { ToolResultText, truncateResult } from '../tools/result-text.ts';
import type { ExecuteCall, PlannedCall } from './plan.ts';

/** Where a call happens: the step and the 1-based iteration. */
export interface CallPlace {
  readonly step_id: string;
  readonly iteration: number;
}

/** A settled call: what the model sees and the call's one terminal event. */
export interface SettledCall {
  readonly content: string;
  readonly terminal: EventDraft;
  /** The run-state changes of a completed call (SPEC §17), recorded with its result. */
  readonly changes?: readonly StateChange[];
}

// Object literals here start with a property, never with a spread: in V8 (Node 20), properties
// written after a leading spread (`{ ...place, tool_name }`) take a slow path, about 0.7 µs each,
// which shows on a tool call's path.

/** Events a planned call produces at planning time (rejections and repeats end here). */
export function plannedCallEvents(planned: PlannedCall, place: CallPlace): EventDraft[] {
  const ids = { step_id: place.step_id, iteration: place.iteration, tool_name: planned.call.function.name, tool_call_id: planned.call.id };
  if (planned.action === 'repeat') {
    return [{ kind: 'LoopDetected', ...ids, repeats: planned.repeats, window: planned.window, action: 'inject' }];
  }
  if (planned.action === 'execute') return [];
  if (planned.reason.type === 'unknown_tool') {
    return [{ kind: 'ToolCallFailed', ...ids, duration_ms: 0, error_code: 'unknown_tool' }];
  }
  const { tool, violation, input_size_bytes } = planned.reason;
  const input_schema_hash = tool.input_schema_hash;
  return [
    { kind: 'ToolCallStarted', ...ids, input_schema_hash, input_size_bytes, attempt: 1 },
    { kind: 'ToolInputValidationFailed', ...ids, input_schema_hash, violation_description: violation },
  ];
}

/** `ToolCallStarted` for one attempt of a valid call. */
export function toolStartedEvent(planned: ExecuteCall, place: CallPlace, attempt: number, child_run_id?: string): EventDraft {
  const event: EventDraft = {
    kind: 'ToolCallStarted',
    step_id: place.step_id,
    iteration: place.iteration,
    tool_name: planned.tool.name,
    tool_call_id: planned.call.id,
    input_schema_hash: planned.tool.input_schema_hash,
    input_size_bytes: planned.input_size_bytes,
    attempt,
  };
  return child_run_id === undefined ? event : { ...event, child_run_id };
}

/** Whether a failed attempt gets another try under the tool's `retries`. */
export function shouldRetryTool(outcome: HandlerOutcome, attempt: number, retries: number): boolean {
  return outcome.status === 'error' && attempt <= retries;
}

/** The model-facing result and terminal event of a call's final attempt. */
export function settleExecution(planned: ExecuteCall, place: CallPlace, outcome: HandlerOutcome, duration_ms: number): SettledCall {
  const ids = { step_id: place.step_id, iteration: place.iteration, tool_name: planned.tool.name, tool_call_id: planned.call.id, duration_ms };
  switch (outcome.status) {
    case 'ok': {
      const content = truncateResult(outcome.text, planned.tool.max_result_bytes);
      return { content, terminal: { kind: 'ToolCallCompleted', ...ids, output_size_bytes: byteSize(content) }, ...(outcome.changes ? { changes: outcome.changes } : {}) };
    }
    case 'state_too_large':
      return { content: ToolResultText.stateFull(), terminal: { kind: 'ToolCallFailed', ...ids, error_code: 'state_too_large' } };
    case 'invalid_arguments':
      return { content: ToolResultText.invalidArguments(outcome.message), terminal: { kind: 'ToolCallFailed', ...ids, error_code: 'invalid_arguments' } };
    case 'answered_error': {
      const content = truncateResult(ToolResultText.answeredError(outcome.message), planned.tool.max_result_bytes);
      return { content, terminal: { kind: 'ToolCallFailed', ...ids, error_code: 'tool_error' } };
    }
    case 'timeout':
      return { content: ToolResultText.timedOut(), terminal: { kind: 'ToolCallFailed', ...ids, error_code: 'timeout' } };
    case 'cancelled':
      return cancelledCall(planned, place, duration_ms);
    case 'error':
    // A deferral where none can wait (a call run inline under legacy_eager on the queue engine): the worker logs why.
    case 'deferred':
      return { content: ToolResultText.unavailable(), terminal: { kind: 'ToolCallFailed', ...ids, error_code: 'tool_error' } };
  }
}

/** A call that ends without a result of its handler: `content` for the model and its `ToolCallFailed`. */
export function failedCall(
  call: { readonly tool_name: string; readonly tool_call_id: string },
  place: CallPlace,
  content: string,
  error_code: ToolFailureCode,
  duration_ms = 0,
): SettledCall {
  return {
    content,
    terminal: { kind: 'ToolCallFailed', step_id: place.step_id, iteration: place.iteration, tool_name: call.tool_name, tool_call_id: call.tool_call_id, duration_ms, error_code },
  };
}

/** A planned call's name and id, as `failedCall` takes them. */
function idsOf(planned: PlannedCall): { tool_name: string; tool_call_id: string } {
  return { tool_name: planned.call.function.name, tool_call_id: planned.call.id };
}

/** A call that never ran to an end because its run was cancelled. */
export function cancelledCall(planned: PlannedCall, place: CallPlace, duration_ms = 0): SettledCall {
  return failedCall(idsOf(planned), place, ToolResultText.cancelled(), 'cancelled', duration_ms);
}

/**
 * A call whose jobs were all spent without a recorded result: `worker_lost` when its worker kept
 * dying under it (the stall limit), else `tool_error`.
 */
export function lostCall(planned: PlannedCall, place: CallPlace, error_code: 'tool_error' | 'worker_lost' = 'tool_error'): SettledCall {
  return failedCall(idsOf(planned), place, ToolResultText.unavailable(), error_code);
}

/** What a worker logs when it refuses a call whose child would be deeper than its tool's `max_depth` (SPEC §13). */
export const TOO_DEEP_MESSAGE = 'agent tool call refused: its child would be deeper than max_depth';

/** A call of an agent tool whose child would be too deep: a tool error, with SPEC §3's text for one (the log says why). */
export function tooDeepCall(planned: PlannedCall, place: CallPlace): SettledCall {
  return failedCall(idsOf(planned), place, ToolResultText.unavailable(), 'tool_error');
}

/** How a child run ended, as its parent's call sees it (SPEC §13). */
export interface ChildEnding {
  readonly status: 'completed' | 'failed' | 'cancelled';
  readonly output?: string;
  readonly error_code?: string;
}

/**
 * The result of a call that started a child run, once the child has ended: its answer (cut to
 * the tool's `max_result_bytes`), or `Error: sub-agent failed — <error_code>` and `child_failed`.
 */
export function childCallSettled(
  call: { readonly tool_name: string; readonly tool_call_id: string; readonly max_result_bytes: number },
  place: CallPlace,
  child: ChildEnding,
  duration_ms: number,
): SettledCall {
  if (child.status !== 'completed') {
    return failedCall(call, place, ToolResultText.childFailed(child.error_code ?? child.status), 'child_failed', duration_ms);
  }
  return completedCall(call, place, truncateResult(child.output ?? '', call.max_result_bytes), duration_ms);
}

/** A call that completed with `content` (already cut to its tool's limit): `ToolCallCompleted`. */
export function completedCall(call: { readonly tool_name: string; readonly tool_call_id: string }, place: CallPlace, content: string, duration_ms: number): SettledCall {
  return {
    content,
    terminal: {
      kind: 'ToolCallCompleted',
      step_id: place.step_id,
      iteration: place.iteration,
      tool_name: call.tool_name,
      tool_call_id: call.tool_call_id,
      duration_ms,
      output_size_bytes: byteSize(content),
    },
  };
}
