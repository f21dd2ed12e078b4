import { describe, expect, it } from 'vitest';
import type { Event } from '../console/api.ts';
import { timeline } from '../console/timeline.ts';

let seq = 0;
const event = (kind: string, ts: number, fields: Record<string, unknown> = {}): Event => ({ seq: ++seq, kind, step_id: 's1', ts, ...fields });
const outcomes = (events: Event[], now = 10_000) => timeline(events, now).spans.map((span) => [span.id, span.start, span.end, span.outcome, span.note]);

describe("the console's timeline of a run (folded from its events)", () => {
  it('gives each provider call and each tool call a span from its start event to its end, parallel calls side by side', () => {
    const events = [
      event('RunEnqueued', 0),
      event('ProviderRequestSent', 10, { iteration: 1, model_id: 'm' }),
      event('ProviderResponseReceived', 110, { iteration: 1, tokens: { total: 9 } }),
      ...[1, 2, 3].map((n) => event('ToolCallStarted', 120 + n, { iteration: 1, tool_name: 't', tool_call_id: `c${n}`, attempt: 1 })),
      event('ToolCallCompleted', 400, { iteration: 1, tool_name: 't', tool_call_id: 'c2' }),
      event('ToolCallFailed', 450, { iteration: 1, tool_name: 't', tool_call_id: 'c3', error_code: 'timeout' }),
      event('ToolCallCompleted', 500, { iteration: 1, tool_name: 't', tool_call_id: 'c1' }),
      event('RunCompleted', 600),
    ];
    expect(outcomes(events)).toEqual([
      ['provider:s1#1:1', 10, 110, 'completed', '9 tokens'],
      ['tool:s1:c1:1', 121, 500, 'completed', ''],
      ['tool:s1:c2:1', 122, 400, 'completed', ''],
      ['tool:s1:c3:1', 123, 450, 'failed', 'timeout'],
    ]);
    expect(timeline(events, 10_000)).toMatchObject({ from: 0, to: 600 });
    expect(timeline(events, 10_000).spans.map((span) => span.label)).toEqual(['iteration 1 · m', 't', 't', 't']);
  });

  it('marks retried attempts, waits for approval, child runs, refused calls, and what a run left open', () => {
    const events = [
      event('ProviderRequestSent', 0, { iteration: 1, model_id: 'm' }),
      event('ProviderError', 50, { iteration: 1, error_code: 'provider_error', retryable: true }),
      event('ProviderRequestSent', 60, { iteration: 1, model_id: 'm' }),
      event('ProviderResponseReceived', 90, { iteration: 1, tokens: { total: 3 } }),
      event('ToolCallStarted', 100, { iteration: 1, tool_name: 't', tool_call_id: 'a', attempt: 1 }),
      event('ToolCallStarted', 200, { iteration: 1, tool_name: 't', tool_call_id: 'a', attempt: 2 }),
      event('ToolCallCompleted', 260, { iteration: 1, tool_name: 't', tool_call_id: 'a' }),
      event('ToolApprovalRequested', 100, { iteration: 1, tool_name: 'refund', tool_call_id: 'r' }),
      event('ToolApprovalResolved', 300, { iteration: 1, tool_name: 'refund', tool_call_id: 'r', approved: false }),
      event('ToolInputValidationFailed', 101, { iteration: 1, tool_name: 'bad', tool_call_id: 'b' }),
      event('ToolCallStarted', 110, { iteration: 1, tool_name: 'helper', tool_call_id: 'k', attempt: 1, child_run_id: 'run_child' }),
      event('RunCancelled', 700),
    ];
    const { spans } = timeline(events, 10_000);
    expect(spans.map((span) => [span.id, span.kind, span.start, span.end, span.outcome, span.note])).toEqual([
      ['provider:s1#1:1', 'provider', 0, 50, 'retried', 'provider_error'],
      ['provider:s1#1:2', 'provider', 60, 90, 'completed', '3 tokens'],
      ['tool:s1:a:1', 'tool', 100, 200, 'retried', 'tried again'],
      ['approval:s1:r', 'approval', 100, 300, 'waiting', 'rejected'],
      ['tool:s1:b:0', 'tool', 101, 101, 'failed', 'invalid arguments'],
      ['tool:s1:k:1', 'child', 110, 700, 'cancelled', 'the run was cancelled'],
      ['tool:s1:a:2', 'tool', 200, 260, 'completed', ''],
    ]);
  });

  it('draws a running run up to now, and a workflow’s steps as spans of their own', () => {
    const events = [
      event('RunEnqueued', 0, { step_id: 'run' }),
      event('StepStarted', 5, { step_id: 'a' }),
      event('StepCompleted', 40, { step_id: 'a' }),
      event('StepStarted', 41, { step_id: 'b' }),
      event('StepExecutionFailed', 90, { step_id: 'b', error_code: 'tool_error' }),
      event('StepSkipped', 91, { step_id: 'c', reason: 'dependency_failed' }),
      event('StepStarted', 41, { step_id: 'd' }),
    ];
    expect(outcomes(events, 500)).toEqual([
      ['step:a', 5, 40, 'completed', ''],
      ['step:b', 41, 90, 'failed', 'tool_error'],
      ['step:d', 41, 500, 'running', ''],
      ['step:c', 91, 91, 'skipped', 'dependency_failed'],
    ]);
    expect(timeline(events, 500).to).toBe(500);
    const provider = timeline([event('ProviderRequestSent', 0, { step_id: 'write', iteration: 2, model_id: 'm' })], 10).spans[0]!;
    expect(provider.label).toBe('write #2 · m');
  });
});
