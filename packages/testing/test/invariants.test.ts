import type { TraceEvent } from '@arcflow/core';
import { describe, expect, it } from 'vitest';
import { assertEventInvariants } from '../src/invariants.ts';

const call = { run_id: 'run_1', step_id: 's1', iteration: 1, tool_name: 't', tool_call_id: 'c1' };
const started = (attempt: number) => ({ kind: 'ToolCallStarted', ...call, input_schema_hash: 'h', input_size_bytes: 2, attempt });
const completed = { kind: 'ToolCallCompleted', ...call, duration_ms: 1, output_size_bytes: 2 };
const log = (...events: object[]) => events.map((event, index) => ({ ...event, seq: index + 1, ts: 0 })) as unknown as TraceEvent[];

describe('assertEventInvariants', () => {
  it('accepts a call restarted with a higher attempt and ended once', () => {
    expect(() => assertEventInvariants(log(started(1), started(2), completed))).not.toThrow();
  });

  it('refuses a start that repeats an attempt, or goes back to an earlier one', () => {
    expect(() => assertEventInvariants(log(started(1), started(1), completed))).toThrow('tool call s1/1/c1 started attempt 1 after attempt 1');
    expect(() => assertEventInvariants(log(started(2), started(1), completed))).toThrow('started attempt 1 after attempt 2');
  });

  it('refuses a call with no terminal event or two, and a gap in seq', () => {
    expect(() => assertEventInvariants(log(started(1)))).toThrow('has 0 terminal events');
    expect(() => assertEventInvariants(log(started(1), completed, completed))).toThrow('has 2 terminal events');
    const gap = log(started(1), completed);
    expect(() => assertEventInvariants([gap[0]!, { ...gap[1]!, seq: 3 }])).toThrow('event 1 has seq 3, expected 2');
  });

  it('refuses a call event after the call ended, and any event after the run ended', () => {
    expect(() => assertEventInvariants(log(completed, started(1)))).toThrow('tool call s1/1/c1 has ToolCallStarted after its terminal event');
    const runCancelled = { kind: 'RunCancelled', run_id: 'run_1', step_id: 's1', usage: { input: 0, output: 0, total: 0 } };
    expect(() => assertEventInvariants(log(runCancelled, started(1), completed))).toThrow('ToolCallStarted was written after RunCancelled');
    expect(() => assertEventInvariants(log(started(1), completed, runCancelled))).not.toThrow();
  });
});
