import type { ToolFailureCode } from '../errors.ts';
import type { Tokens } from '../vocabulary/tokens.ts';

interface Base {
  readonly run_id: string;
  readonly step_id: string;
  /** 1, 2, 3 … per run, no gaps, no repeats. */
  readonly seq: number;
  /** Epoch milliseconds. */
  readonly ts: number;
  readonly iteration?: number;
}

interface InIteration extends Base {
  readonly iteration: number;
}

export interface RunEnqueued extends Base {
  readonly kind: 'RunEnqueued';
  readonly agent?: string;
  readonly workflow?: string;
  /** A workflow run's number of steps. */
  readonly steps_count?: number;
}
/** A workflow step's dependencies have all completed; its own events follow. */
export interface StepStarted extends Base {
  readonly kind: 'StepStarted';
  readonly step_type: 'agent' | 'tool';
  readonly depends_on: readonly string[];
}
export interface StepCompleted extends Base {
  readonly kind: 'StepCompleted';
  readonly output_size_bytes: number;
  readonly duration_ms: number;
}
/** A workflow step that will not run. */
export interface StepSkipped extends Base {
  readonly kind: 'StepSkipped';
  readonly reason: 'dependency_failed' | 'run_failed' | 'cancelled';
  readonly failed_dependency?: string;
}
export interface AgentInvoked extends Base {
  readonly kind: 'AgentInvoked';
  readonly agent_name: string;
  readonly mode: 'llm_select' | 'legacy_eager';
  readonly max_iterations: number;
}
export interface ProviderRequestSent extends InIteration {
  readonly kind: 'ProviderRequestSent';
  readonly provider_id: string;
  readonly model_id: string;
  readonly prompt_size_bytes: number;
  readonly tools_count: number;
}
export interface ProviderResponseReceived extends InIteration {
  readonly kind: 'ProviderResponseReceived';
  readonly provider_id: string;
  readonly model_id: string;
  readonly tokens: Tokens;
  readonly latency_ms: number;
  readonly finish_reason: string;
  readonly tool_calls_count: number;
}
export interface TokensConsumed extends InIteration {
  readonly kind: 'TokensConsumed';
  readonly tokens: Tokens;
  readonly cumulative: Tokens;
  /** This call's cost in USD, when the model that answered is priced (SPEC §14). */
  readonly cost_usd?: number;
  /** The run's cost in USD with this call's, its child runs' included, when the model is priced. */
  readonly cumulative_cost_usd?: number;
}
export interface ProviderRateLimited extends InIteration {
  readonly kind: 'ProviderRateLimited';
  readonly provider_id: string;
  readonly retry_after_seconds: number;
  readonly attempt: number;
}
export interface ProviderError extends InIteration {
  readonly kind: 'ProviderError';
  readonly provider_id: string;
  /** The model the failed try asked for. */
  readonly model_id: string;
  readonly error_code: string;
  readonly status?: number;
  readonly retryable: boolean;
  readonly attempt: number;
}
export interface ToolCallStarted extends InIteration {
  readonly kind: 'ToolCallStarted';
  readonly tool_name: string;
  readonly tool_call_id: string;
  readonly input_schema_hash: string;
  readonly input_size_bytes: number;
  readonly attempt: number;
  /** The child run an agent tool's call started (SPEC §13). */
  readonly child_run_id?: string;
}
export interface ToolInputValidationFailed extends InIteration {
  readonly kind: 'ToolInputValidationFailed';
  readonly tool_name: string;
  readonly tool_call_id: string;
  readonly input_schema_hash: string;
  readonly violation_description: string;
}
export interface ToolCallCompleted extends InIteration {
  readonly kind: 'ToolCallCompleted';
  readonly tool_name: string;
  readonly tool_call_id: string;
  readonly duration_ms: number;
  readonly output_size_bytes: number;
}
export interface ToolCallFailed extends InIteration {
  readonly kind: 'ToolCallFailed';
  readonly tool_name: string;
  readonly tool_call_id: string;
  readonly duration_ms: number;
  readonly error_code: ToolFailureCode;
}
export interface LoopDetected extends InIteration {
  readonly kind: 'LoopDetected';
  readonly tool_name: string;
  readonly tool_call_id: string;
  readonly repeats: number;
  readonly window: number;
  readonly action: 'inject' | 'terminate';
}
/** A valid call of a tool that needs approval waits for a person. */
export interface ToolApprovalRequested extends InIteration {
  readonly kind: 'ToolApprovalRequested';
  readonly tool_name: string;
  readonly tool_call_id: string;
  readonly input_schema_hash: string;
  readonly input_size_bytes: number;
}
/** A person approved or rejected a waiting call (a timeout adds none). */
export interface ToolApprovalResolved extends InIteration {
  readonly kind: 'ToolApprovalResolved';
  readonly tool_name: string;
  readonly tool_call_id: string;
  readonly approved: boolean;
  readonly by?: string;
}
/** A call waits for its result from outside (SPEC §20): an external tool's call, or a handler that deferred. */
export interface ToolResultRequested extends InIteration {
  readonly kind: 'ToolResultRequested';
  readonly tool_name: string;
  readonly tool_call_id: string;
  readonly input_schema_hash: string;
  readonly input_size_bytes: number;
  /** When the call fails `result_timeout` if no result came (epoch ms). */
  readonly expires_at: number;
}
/** An answer that failed the step's output schema (SPEC §11); the model is asked again, or the step fails. */
export interface OutputValidationFailed extends Base {
  readonly kind: 'OutputValidationFailed';
  /** Path and expectation only, never the value: `title: expected string`, `output is not valid JSON`. */
  readonly violation_description: string;
}
/**
 * Messages steered into the run (SPEC §11, `on_busy: steer`): a later run of its thread gave its
 * input, which enters the conversation before call `iteration`. Sizes only, never the messages.
 */
export interface MessagesInjected extends InIteration {
  readonly kind: 'MessagesInjected';
  readonly count: number;
  readonly input_size_bytes: number;
}
/** A round's calls changed the run's state (SPEC §17), applied at its join: the keys changed (sorted) and the state's size; never a value. */
export interface StateUpdated extends InIteration {
  readonly kind: 'StateUpdated';
  readonly keys: readonly string[];
  readonly state_size_bytes: number;
}
export interface AgentResponseReceived extends Base {
  readonly kind: 'AgentResponseReceived';
  readonly output_size_bytes: number;
  readonly iterations: number;
}
export interface StepExecutionFailed extends Base {
  readonly kind: 'StepExecutionFailed';
  readonly error_code: string;
  readonly message: string;
}
export interface RunCompleted extends Base {
  readonly kind: 'RunCompleted';
  readonly usage: Tokens;
}
export interface RunFailed extends Base {
  readonly kind: 'RunFailed';
  readonly usage: Tokens;
  readonly error_code: string;
}
export interface RunCancelled extends Base {
  readonly kind: 'RunCancelled';
  readonly usage: Tokens;
}
/** The worker that continued the run has another definition of its agent than the one it was enqueued with. */
export interface DefinitionChanged extends Base {
  readonly kind: 'DefinitionChanged';
  readonly previous_hash: string;
  readonly current_hash: string;
}

/** Every trace event, as one discriminated union on `kind`. */
export type TraceEvent =
  | RunEnqueued
  | AgentInvoked
  | ProviderRequestSent
  | ProviderResponseReceived
  | TokensConsumed
  | ProviderRateLimited
  | ProviderError
  | ToolCallStarted
  | ToolInputValidationFailed
  | ToolCallCompleted
  | ToolCallFailed
  | LoopDetected
  | ToolApprovalRequested
  | ToolApprovalResolved
  | ToolResultRequested
  | OutputValidationFailed
  | MessagesInjected
  | StateUpdated
  | AgentResponseReceived
  | StepExecutionFailed
  | StepStarted
  | StepCompleted
  | StepSkipped
  | RunCompleted
  | RunFailed
  | RunCancelled
  | DefinitionChanged;

export type EventKind = TraceEvent['kind'];

type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;

/** An event before the log gives it `run_id`, `seq` and `ts`. */
export type EventDraft = DistributiveOmit<TraceEvent, 'run_id' | 'seq' | 'ts'>;

/** Events that end a tool call; each call gets exactly one. */
export const TOOL_TERMINAL_KINDS: ReadonlySet<EventKind> = new Set(['ToolCallCompleted', 'ToolCallFailed', 'ToolInputValidationFailed', 'LoopDetected']);

export const RUN_TERMINAL_KINDS: ReadonlySet<EventKind> = new Set(['RunCompleted', 'RunFailed', 'RunCancelled']);
