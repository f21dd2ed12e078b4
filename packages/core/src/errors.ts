/**
 * Every stable error code arcflow emits, in one table. Event fields (`error_code`) and run
 * records (`error.error_code`) only ever carry values from here.
 */
export const ErrorCode = {
  InvalidArguments: 'invalid_arguments',
  UnknownTool: 'unknown_tool',
  ToolTimedOut: 'timeout',
  ToolError: 'tool_error',
  Cancelled: 'cancelled',
  MaxIterationsExceeded: 'max_iterations_exceeded',
  LoopDetected: 'loop_detected',
  ProviderError: 'provider_error',
  TestResponsesExhausted: 'test_responses_exhausted',
  /** A call whose worker kept dying under it (crash re-deliveries beyond the configured limit). */
  WorkerLost: 'worker_lost',
  /** A run that made no progress and that the watchdog could not move again. */
  Stalled: 'stalled',
  /** A response that would take the run over its budget (tokens or tool calls). */
  BudgetExceeded: 'budget_exceeded',
  /** The model's answers kept failing the step's output schema after its `output_retries` (SPEC §11). */
  InvalidOutput: 'invalid_output',
  /** A call's state changes would take the run's state over its `max_state_bytes` (SPEC §17). */
  StateTooLarge: 'state_too_large',
} as const;
export type ErrorCode = (typeof ErrorCode)[keyof typeof ErrorCode];

/** Tool-call failure codes that may appear on `ToolCallFailed`. */
export type ToolFailureCode =
  | 'invalid_arguments'
  | 'unknown_tool'
  | 'timeout'
  | 'tool_error'
  | 'cancelled'
  | 'worker_lost'
  | 'rejected'
  | 'approval_timeout'
  | 'result_timeout'
  | 'state_too_large'
  | 'child_failed';

/**
 * A definition or configuration that cannot work: thrown at once, before anything runs. Its
 * `code` is the one HTTP answers it with (`invalid_config`, 400), so a caller of the client and
 * one of the API check the same code (SPEC §8).
 */
export class ConfigError extends Error {
  override readonly name = 'ConfigError';
  readonly code = 'invalid_config';
}

/**
 * Thrown by a tool handler to tell the model that its arguments were wrong. The message is
 * shown to the model (it is the handler author's deliberate text), never put in traces.
 */
export class ToolArgumentError extends Error {
  override readonly name = 'ToolArgumentError';
}

/**
 * Thrown by a handler whose tool answered with a failure (an MCP result with `isError: true`): the
 * model reads `Error: <message>` and the call ends `ToolCallFailed` (`tool_error`) at once, without
 * retries, since asking again gets the same answer. The message is the tool's (untrusted) answer: it
 * goes to the model only, never into events, spans or logs.
 */
export class ToolAnswerError extends Error {
  override readonly name: string = 'ToolAnswerError';
}

/** A refused request to the runtime (unknown agent, oversize input, ...). */
export class RequestError extends Error {
  override readonly name = 'RequestError';
  constructor(
    readonly code: string,
    message: string,
    /** When asking again may succeed, in whole seconds (a rate limit: HTTP `Retry-After`). */
    readonly retry_after_seconds?: number,
  ) {
    super(message);
  }
}
