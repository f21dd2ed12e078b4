import type { EventDraft, EventKind } from './types.ts';

const COMMON = ['kind', 'run_id', 'step_id', 'seq', 'ts', 'iteration'] as const;
const TOOL = ['tool_name', 'tool_call_id'] as const;

/**
 * The trace data policy as an allowlist: the only fields each event kind may carry. Names, ids,
 * hashes, sizes, codes, timings and token counts; never arguments, results, prompts or error text.
 */
export const EVENT_FIELDS: Readonly<Record<EventKind, readonly string[]>> = Object.freeze({
  RunEnqueued: ['agent', 'workflow', 'steps_count'],
  AgentInvoked: ['agent_name', 'mode', 'max_iterations'],
  ProviderRequestSent: ['provider_id', 'model_id', 'prompt_size_bytes', 'tools_count'],
  ProviderResponseReceived: ['provider_id', 'model_id', 'tokens', 'latency_ms', 'finish_reason', 'tool_calls_count'],
  TokensConsumed: ['tokens', 'cumulative', 'cost_usd', 'cumulative_cost_usd'],
  ProviderRateLimited: ['provider_id', 'retry_after_seconds', 'attempt'],
  ProviderError: ['provider_id', 'model_id', 'error_code', 'status', 'retryable', 'attempt'],
  ToolCallStarted: [...TOOL, 'input_schema_hash', 'input_size_bytes', 'attempt', 'child_run_id'],
  ToolInputValidationFailed: [...TOOL, 'input_schema_hash', 'violation_description'],
  ToolCallCompleted: [...TOOL, 'duration_ms', 'output_size_bytes'],
  ToolCallFailed: [...TOOL, 'duration_ms', 'error_code'],
  LoopDetected: [...TOOL, 'repeats', 'window', 'action'],
  ToolApprovalRequested: [...TOOL, 'input_schema_hash', 'input_size_bytes'],
  ToolApprovalResolved: [...TOOL, 'approved', 'by'],
  ToolResultRequested: [...TOOL, 'input_schema_hash', 'input_size_bytes', 'expires_at'],
  OutputValidationFailed: ['violation_description'],
  MessagesInjected: ['count', 'input_size_bytes'],
  StateUpdated: ['keys', 'state_size_bytes'],
  AgentResponseReceived: ['output_size_bytes', 'iterations'],
  StepExecutionFailed: ['error_code', 'message'],
  StepStarted: ['step_type', 'depends_on'],
  StepCompleted: ['output_size_bytes', 'duration_ms'],
  StepSkipped: ['reason', 'failed_dependency'],
  RunCompleted: ['usage'],
  RunFailed: ['usage', 'error_code'],
  RunCancelled: ['usage'],
  DefinitionChanged: ['previous_hash', 'current_hash'],
});

/** Every field each kind may carry: the common ones, then its own (built once). */
const KEPT_FIELDS: ReadonlyMap<string, readonly string[]> = new Map(Object.entries(EVENT_FIELDS).map(([kind, fields]) => [kind, [...COMMON, ...fields]]));

/**
 * Keeps only the fields the policy allows for the event's kind, so nothing a caller slipped in
 * (a prompt, a result) can reach the log. Undefined fields are dropped.
 */
export function applyTracePolicy<T extends EventDraft>(event: T): T {
  const allowed = KEPT_FIELDS.get(event.kind);
  if (!allowed) throw new Error(`unknown event kind '${String(event.kind)}'`);
  const kept: Record<string, unknown> = {};
  for (const key of allowed) {
    const value = (event as Record<string, unknown>)[key];
    if (value !== undefined) kept[key] = value;
  }
  return kept as T;
}
