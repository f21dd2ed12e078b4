import { Agent, type ModelProvider, ProviderFailure, Workflow, runLocal } from '@arcflow/core';
import { reply } from '@arcflow/testing';
import { describe, expect, it } from 'vitest';

// runLocal ends a step as the engine does when the run stops under it (SPEC §7: the same
// semantics and events): a cancelled or failed-fast run's running steps get no failure of their
// own, and a call that failed is not counted as an iteration.

/** Answers `fast` at once; holds a `slow` call until its signal aborts, then throws as an aborted request does. */
const provider: ModelProvider = {
  id: 'held',
  defaultModel: 'm',
  complete: (request, options) => {
    const asked = JSON.stringify(request.messages);
    if (asked.includes('fail now')) return Promise.reject(new ProviderFailure('bad_request', 'bad request', { retryable: false, status: 400 }));
    if (!asked.includes('slow')) return Promise.resolve(reply('fast'));
    return new Promise((_, reject) => options?.signal?.addEventListener('abort', () => reject(new ProviderFailure('connection_error', 'aborted', { retryable: true }))));
  },
};
const kinds = (events: readonly { kind: string; step_id?: string }[], step: string) => events.filter((event) => event.step_id === step).map((event) => event.kind);

describe('runLocal when the run stops under a step', () => {
  it('gives a step still calling its model no ProviderError or StepExecutionFailed when another step fails the run fast, or the run is cancelled', async () => {
    const flow = new Workflow({
      name: 'stops',
      on_step_failure: 'fail_fast',
      steps: [
        { id: 'S', agent: new Agent({ name: 'slow_one' }), input: () => 'slow' },
        { id: 'F', agent: new Agent({ name: 'failing_one' }), input: () => 'fail now' },
      ],
    });
    const failed = await runLocal(flow, 'go', { provider, logger: false });
    expect(failed.status).toBe('failed');
    expect(failed.steps?.S?.status).toBe('cancelled');
    expect(kinds(failed.events, 'S')).not.toContain('ProviderError');
    expect(kinds(failed.events, 'S')).not.toContain('StepExecutionFailed');
    expect(kinds(failed.events, 'F')).toContain('StepExecutionFailed');

    const controller = new AbortController();
    setTimeout(() => controller.abort(), 100);
    const cancelled = await runLocal(new Agent({ name: 'slow_alone' }), 'slow', { provider, logger: false, signal: controller.signal });
    expect(cancelled.status).toBe('cancelled');
    expect(cancelled.events.map((event) => event.kind)).not.toContain('ProviderError');
    expect(cancelled.events.map((event) => event.kind)).not.toContain('StepExecutionFailed');
  });

  it('counts no iteration for a call that failed: a run failing at its first call has 0, as the engine records', async () => {
    const run = await runLocal(new Agent({ name: 'fails_first' }), 'fail now', { provider, logger: false });
    expect(run).toMatchObject({ status: 'failed', iterations: 0, error: { error_code: 'provider_error' } });
  });
});
