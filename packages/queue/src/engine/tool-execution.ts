import {
  type CallPlace,
  type ExecuteCall,
  type ToolDefinition,
  type ToolLogger,
  runHandler,
  settleExecution,
  shouldRetryTool,
  toolStartedEvent,
} from '@arcflow/core';
import type { RunStore } from '../store/run-store.ts';
import type { CancellationListener } from './cancellation.ts';
import type { ToolJobData } from './jobs.ts';

export interface ToolRuntime {
  readonly store: RunStore;
  readonly cancellation: CancellationListener;
  readonly logger: ToolLogger;
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

/**
 * One attempt at a call, shared by tool jobs and `legacy_eager`: skipped if a result is already
 * recorded; else `ToolCallStarted`, the handler, and (unless another attempt follows) the result
 * with its terminal event, recorded once. Returns whether another attempt should follow.
 */
export async function attemptToolCall(
  runtime: ToolRuntime,
  run_id: string,
  planned: ExecuteCall,
  place: CallPlace,
  attempt: number,
  lastAttempt: boolean,
): Promise<{ retry: boolean }> {
  const { store, cancellation, logger } = runtime;
  const call = { step_id: place.step_id, iteration: place.iteration, tool_call_id: planned.call.id, tool_name: planned.tool.name };
  const once = `start|${place.step_id}|${place.iteration}|${planned.call.id}|${attempt}`;
  // Already recorded (a re-delivery) or the run has ended (cancelled): nothing to do.
  if ((await store.startToolCall(run_id, call, toolStartedEvent(planned, place, attempt), once)) !== 'run') return { retry: false };
  const startedAt = performance.now();
  const { signal, release } = cancellation.signalFor(run_id);
  try {
    const outcome = await runHandler(planned.tool, { run_id, ...place, tool_call_id: planned.call.id, attempt, args: planned.args, cancelSignal: signal, log: logger });
    if (outcome.status === 'error') {
      logger.error('tool handler failed', { tool: planned.tool.name, run_id, tool_call_id: planned.call.id, attempt, error: outcome.error });
    }
    if (!lastAttempt && shouldRetryTool(outcome, attempt, planned.tool.retries)) return { retry: true };
    const settled = settleExecution(planned, place, outcome, Math.round(performance.now() - startedAt));
    await store.recordToolResult(run_id, call, settled.content, settled.terminal);
    return { retry: false };
  } finally {
    release();
  }
}
