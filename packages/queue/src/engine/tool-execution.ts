import {
  type CallPlace,
  type ExecuteCall,
  type PlannedCall,
  type ToolDefinition,
  type ToolLogger,
  runHandler,
  settleExecution,
  shouldRetryTool,
  toolStartedEvent,
} from '@arcflow/core';
import { context, trace } from '@opentelemetry/api';
import { Attr, SpanName } from '@arcflow/telemetry/semconv';
import type { OpenCall, RunStore } from '../store/run-store.ts';
import { SpanKind, failSpan, recordedTraceparent, startChildSpan } from '../tracing.ts';
import type { CancellationListener } from './cancellation.ts';
import type { ToolJobData } from './jobs.ts';

export interface ToolRuntime {
  readonly store: RunStore;
  readonly cancellation: CancellationListener;
  readonly logger: ToolLogger;
}

/** The store's handle on a planned call of a round. */
export function openCall(planned: PlannedCall, place: CallPlace): OpenCall {
  return { step_id: place.step_id, iteration: place.iteration, tool_call_id: planned.call.id, tool_name: planned.call.function.name };
}

/** The planned call a tool job stands for, rebuilt from its job data. */
export function callFromJob(data: ToolJobData, tool: ToolDefinition): ExecuteCall {
  return {
    action: 'execute',
    index: data.index,
    call: { id: data.tool_call_id, type: 'function', function: { name: data.tool_name, arguments: '' } },
    signature: '',
    tool,
    args: data.args,
    input_size_bytes: data.input_size_bytes,
  };
}

/** Which attempt at a call this is. */
export interface Attempt {
  readonly number: number;
  /** No attempt follows this one, whatever its outcome. */
  readonly last: boolean;
  /**
   * Every delivery of the work gets its own number (a tool job's, counted by BullMQ), so its
   * `ToolCallStarted` cannot be written twice and needs no dedupe id. An inline call re-run by a
   * re-delivered provider job counts from 1 again, and does.
   */
  readonly numberedPerDelivery: boolean;
}

/** What an attempt at a call leaves to do: another attempt, or the join when its round is settled. */
export interface AttemptOutcome {
  readonly retry: boolean;
  /** No call of the round is open any more (this one's result is recorded, by now or before). */
  readonly roundSettled: boolean;
}

/**
 * One attempt at a call, shared by tool jobs and `legacy_eager`: skipped if a result is already
 * recorded; else `ToolCallStarted`, the handler, and (unless another attempt follows) the result
 * with its terminal event, recorded once.
 */
export async function attemptToolCall(
  runtime: ToolRuntime,
  run_id: string,
  planned: ExecuteCall,
  place: CallPlace,
  { number: attempt, last: lastAttempt, numberedPerDelivery }: Attempt,
): Promise<AttemptOutcome> {
  const { store, cancellation, logger } = runtime;
  const call = openCall(planned, place);
  const once = numberedPerDelivery ? '' : `start|${place.step_id}|${place.iteration}|${planned.call.id}|${attempt}`;
  // Already recorded (a re-delivery: its round may still need its join) or the run has ended: nothing to run.
  const start = await store.startToolCall(run_id, call, toolStartedEvent(planned, place, attempt), once);
  if (start.status === 'recorded') return { retry: false, roundSettled: start.openInRound === 0 };
  if (start.status === 'ended') return { retry: false, roundSettled: false };
  const startedAt = performance.now();
  const cancel = cancellation.watch(run_id);
  const span = startChildSpan(SpanName.executeTool(planned.tool.name), SpanKind.INTERNAL, {
    [Attr.operationName]: 'execute_tool',
    [Attr.toolName]: planned.tool.name,
    [Attr.toolCallId]: planned.call.id,
    [Attr.toolType]: 'function',
    [Attr.toolSchemaHash]: planned.tool.input_schema_hash,
    [Attr.toolInputBytes]: planned.input_size_bytes,
    [Attr.runId]: run_id,
    [Attr.stepId]: place.step_id,
    [Attr.iteration]: place.iteration,
  });
  try {
    // The handler runs inside the span, so spans it starts nest under `execute_tool`.
    const outcome = await context.with(trace.setSpan(context.active(), span), () =>
      runHandler(planned.tool, { run_id, ...place, tool_call_id: planned.call.id, attempt, args: planned.args, cancel, log: logger }),
    );
    if (outcome.status === 'error') {
      logger.error('tool handler failed', { tool: planned.tool.name, run_id, tool_call_id: planned.call.id, attempt, error: outcome.error });
    }
    if (!lastAttempt && shouldRetryTool(outcome, attempt, planned.tool.retries)) {
      failSpan(span, 'tool_error');
      return { retry: true, roundSettled: false };
    }
    const settled = settleExecution(planned, place, outcome, Math.round(performance.now() - startedAt));
    if (settled.terminal.kind === 'ToolCallFailed') failSpan(span, settled.terminal.error_code);
    else if (settled.terminal.kind === 'ToolCallCompleted') span.setAttribute(Attr.toolOutputBytes, settled.terminal.output_size_bytes);
    const spanTraceparent = recordedTraceparent(span);
    span.end();
    const recorded = await store.recordToolResult(run_id, call, settled.content, settled.terminal, spanTraceparent);
    return { retry: false, roundSettled: recorded?.openInRound === 0 };
  } finally {
    if (span.isRecording()) span.end();
    cancel.release();
  }
}
