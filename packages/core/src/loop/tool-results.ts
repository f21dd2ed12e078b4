import { byteSize } from '../canonical.ts';
import type { EventDraft } from '../events/types.ts';
import type { StateChange } from '../state/run-state.ts';
import { ToolResultText, serialiseResult, truncateResult } from '../tools/result-text.ts';
import type { ExecuteCall } from './plan.ts';
import { type CallPlace, type SettledCall, completedCall, failedCall } from './tool-events.ts';

/** What whoever answers a call from outside is shown (SPEC §20), and `runLocal`'s `toolResult` is given. */
export interface ToolResultRequest {
  readonly step_id: string;
  readonly iteration: number;
  readonly tool_call_id: string;
  readonly tool_name: string;
  readonly arguments: unknown;
}

/** A result from outside: the call's output (any JSON value; a string is the text itself), or its failure. */
export type ToolResultInput = { readonly output: unknown } | { readonly error: string };

/** The most bytes an answered `error` may take (SPEC §20). */
export const MAX_RESULT_ERROR_BYTES = 4 * 1024;

/** Checks a result from outside (a client, an HTTP body, `runLocal`'s `toolResult`); returns why it is not one, if it is not. */
export function toolResultProblem(answer: unknown): string | undefined {
  const value = answer as Record<string, unknown> | null;
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return 'the result must be an object { output } or { error }';
  const hasOutput = Object.hasOwn(value, 'output');
  const hasError = Object.hasOwn(value, 'error');
  if (hasOutput === hasError) return 'the result must have exactly one of output and error';
  const extra = Object.keys(value).find((key) => key !== 'output' && key !== 'error');
  if (extra !== undefined) return `unknown field '${extra}': the result is { output } or { error }`;
  if (hasError) {
    if (typeof value.error !== 'string') return 'error must be a string';
    if (byteSize(value.error) > MAX_RESULT_ERROR_BYTES) return `error must be at most ${MAX_RESULT_ERROR_BYTES} bytes`;
    return undefined;
  }
  if (value.output === undefined) return 'output must be a JSON value';
  try {
    serialiseResult(value.output);
  } catch {
    return 'output must be a JSON value';
  }
  return undefined;
}

/** What `ToolResultRequested` says of its call. */
export interface RequestedCallFacts {
  readonly tool_name: string;
  readonly tool_call_id: string;
  readonly input_schema_hash: string;
  readonly input_size_bytes: number;
}

/** A planned call's facts for `ToolResultRequested`. */
export function requestedCallFacts(planned: ExecuteCall): RequestedCallFacts {
  return { tool_name: planned.tool.name, tool_call_id: planned.call.id, input_schema_hash: planned.tool.input_schema_hash, input_size_bytes: planned.input_size_bytes };
}

/** `ToolResultRequested`: the call waits for its result until `expires_at` (no argument in it). */
export function resultRequestedEvent(call: RequestedCallFacts, place: CallPlace, expires_at: number): EventDraft {
  return {
    kind: 'ToolResultRequested',
    step_id: place.step_id,
    iteration: place.iteration,
    tool_name: call.tool_name,
    tool_call_id: call.tool_call_id,
    input_schema_hash: call.input_schema_hash,
    input_size_bytes: call.input_size_bytes,
    expires_at,
  };
}

/** The request shown to whoever answers. */
export function toolResultRequest(planned: ExecuteCall, place: CallPlace): ToolResultRequest {
  return { step_id: place.step_id, iteration: place.iteration, tool_call_id: planned.call.id, tool_name: planned.tool.name, arguments: planned.args };
}

/**
 * An answered call: an output completes it (cut to `max_result_bytes`), with the state changes its
 * deferred handler made; an error fails it (`Error: <error>`, `tool_error`).
 */
export function answeredCall(
  call: { readonly tool_name: string; readonly tool_call_id: string; readonly max_result_bytes: number },
  place: CallPlace,
  answer: ToolResultInput,
  duration_ms: number,
  changes?: readonly StateChange[],
): SettledCall {
  if ('error' in answer) return failedCall(call, place, truncateResult(ToolResultText.answeredError(answer.error), call.max_result_bytes), 'tool_error', duration_ms);
  const completed = completedCall(call, place, truncateResult(serialiseResult(answer.output), call.max_result_bytes), duration_ms);
  return changes && changes.length > 0 ? { ...completed, changes } : completed;
}

/** A call no result came for in time: `Error: no result came in time`, `ToolCallFailed (result_timeout)`. */
export function resultTimedOutCall(call: { readonly tool_name: string; readonly tool_call_id: string }, place: CallPlace, duration_ms = 0): SettledCall {
  return failedCall(call, place, ToolResultText.resultTimedOut(), 'result_timeout', duration_ms);
}
