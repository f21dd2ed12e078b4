import { byteSize } from '../canonical.ts';
import type { Agent } from '../definitions/agent.ts';
import type { StepSettings } from '../definitions/settings.ts';
import type { EventDraft, Tokens } from '../events/types.ts';
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
export function stepFailedEvent(step_id: string, error: RunError): EventDraft {
  return { kind: 'StepExecutionFailed', step_id, error_code: error.error_code, message: error.message };
}

/** The run's terminal event. */
export function runFinishedEvent(step_id: string, usage: Tokens, error?: RunError, cancelled = false): EventDraft {
  if (cancelled) return { kind: 'RunCancelled', step_id, usage };
  return error ? { kind: 'RunFailed', step_id, usage, error_code: error.error_code } : { kind: 'RunCompleted', step_id, usage };
}

/** `ProviderRateLimited` or `ProviderError` for one failed attempt. */
export function providerFailureEvent(step_id: string, iteration: number, provider_id: string, failure: ProviderFailure, attempt: number, retry_after_seconds: number): EventDraft {
  if (failure.rateLimited) return { kind: 'ProviderRateLimited', step_id, iteration, provider_id, retry_after_seconds, attempt };
  return {
    kind: 'ProviderError',
    step_id,
    iteration,
    provider_id,
    error_code: failure.error_code,
    status: failure.status,
    retryable: failure.retryable,
    attempt,
  };
}

/** The run error for a provider that kept failing. */
export function providerRunError(failure: ProviderFailure, attempts: number): RunError {
  return {
    code: 'ProviderError',
    error_code: 'provider_error',
    message: failure.retryable
      ? `the provider failed ${attempts} times (last: ${failure.error_code}); giving up`
      : `the provider refused the request (${failure.error_code}${failure.status ? `, HTTP ${failure.status}` : ''})`,
  };
}

/** The run error for a step failure decided by the loop. */
export function stepRunError(error_code: string, message: string): RunError {
  return { code: 'StepExecutionFailed', error_code, message };
}
