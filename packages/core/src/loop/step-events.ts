import { byteSize } from '../canonical.ts';
import type { Agent } from '../definitions/agent.ts';
import type { StepSettings } from '../definitions/settings.ts';
import type { Tokens } from '../vocabulary/tokens.ts';
import type { EventDraft } from '../events/types.ts';
import type { ProviderFailure } from '../provider.ts';
import type { RunError } from '../run-record.ts';

/** `AgentInvoked`: a step begins. */
export function agentInvokedEvent(agent: Agent, settings: StepSettings, step_id: string): EventDraft {
  return { kind: 'AgentInvoked', step_id, agent_name: agent.name, mode: settings.mode, max_iterations: settings.max_iterations };
}

/** `AgentResponseReceived`: a step answered with text after `iterations` provider calls. */
export function agentRespondedEvent(step_id: string, output: string, iterations: number): EventDraft {
  return { kind: 'AgentResponseReceived', step_id, output_size_bytes: byteSize(output), iterations };
}

/** `StepExecutionFailed` for a failure. */
export function stepFailedEvent(step_id: string, error: RunError, iteration?: number): EventDraft {
  return { kind: 'StepExecutionFailed', step_id, ...(iteration !== undefined ? { iteration } : {}), error_code: error.error_code, message: error.message };
}

/** The run's terminal event. */
export function runFinishedEvent(step_id: string, usage: Tokens, error?: RunError, cancelled = false): EventDraft {
  if (cancelled) return { kind: 'RunCancelled', step_id, usage };
  return error ? { kind: 'RunFailed', step_id, usage, error_code: error.error_code } : { kind: 'RunCompleted', step_id, usage };
}

/** `ProviderRateLimited` or `ProviderError` for one failed try of `model_id` at `provider_id`. */
export function providerFailureEvent(
  place: { readonly step_id: string; readonly iteration: number },
  target: { readonly provider_id: string; readonly model_id: string },
  failure: ProviderFailure,
  attempt: number,
  retry_after_seconds: number,
): EventDraft {
  const { step_id, iteration } = place;
  const { provider_id, model_id } = target;
  if (failure.rateLimited) return { kind: 'ProviderRateLimited', step_id, iteration, provider_id, retry_after_seconds, attempt };
  return { kind: 'ProviderError', step_id, iteration, provider_id, model_id, error_code: failure.error_code, status: failure.status, retryable: failure.retryable, attempt };
}

/**
 * The run error for a provider call that failed for good, naming the cause in arcflow's words:
 * `the provider call to api.openai.com failed: OPENAI_API_KEY is not a valid HTTP header value (…)`, or, after
 * retries, `the provider calls to 127.0.0.1:8000 failed 5 times (last: could not reach the provider (ECONNREFUSED))`.
 */
export function providerRunError(failure: ProviderFailure, attempts: number): RunError {
  const host = failure.details.cause?.host;
  const at = host ? ` to ${host}` : '';
  return {
    code: 'ProviderError',
    error_code: 'provider_error',
    message:
      failure.retryable && attempts > 1 ? `the provider calls${at} failed ${attempts} times (last: ${failure.message})` : `the provider call${at} failed: ${failure.message}`,
  };
}

/** The run error for a step failure decided by the loop. */
export function stepRunError(error_code: string, message: string): RunError {
  return { code: 'StepExecutionFailed', error_code, message };
}
