import { childCallSettled } from '@arcflow/core';
import { recordToolExecution } from '@arcflow/telemetry/metrics';
import { tracingEnabled } from '@arcflow/telemetry/ids';
import type { RunStore } from '../store/run-store.ts';
import { childCallTraceparent, emitChildCallSpan } from '../tracing.ts';
import { joinJobData } from './jobs.ts';
import { type QueuePool, enqueueJoin } from './join.ts';

/**
 * Settles the call of its parent that an ended child run was started by (SPEC §13): the child's
 * answer is the call's result, its failure `child_failed`; what the child spent counts toward the
 * parent's budget, in the same write. Once: a second delivery (the watchdog's, after a process died
 * between the child's end and this) finds the call recorded. The round's join follows as after
 * any tool job; a parent that has ended takes nothing.
 */
export async function settleParentCall(deps: { readonly store: RunStore; readonly queues: QueuePool }, child_run_id: string): Promise<void> {
  const child = await deps.store.children.ended(child_run_id);
  if (!child) return;
  const { job, started_at, max_result_bytes } = child.parent;
  const place = { step_id: job.step_id, iteration: job.iteration };
  const duration_ms = Math.max(0, child.finished_at - started_at);
  const settled = childCallSettled({ tool_name: job.tool_name, tool_call_id: job.tool_call_id, max_result_bytes }, place, child.ending, duration_ms);
  const error_code = settled.terminal.kind === 'ToolCallFailed' ? settled.terminal.error_code : undefined;
  const span = tracingEnabled() ? childCallTraceparent(job.trace.traceparent, { ...place, tool_call_id: job.tool_call_id }) : undefined;
  const recorded = await deps.store.recordToolResult(
    job.run_id,
    { ...place, tool_call_id: job.tool_call_id, tool_name: job.tool_name, fanned_out: true, round_waits: job.waits === true },
    { content: settled.content, terminal: settled.terminal, spend: child.spend, ...(span ? { spanTraceparent: span } : {}) },
  );
  if (!recorded) return;
  if (recorded.recordedNow) {
    recordToolExecution(job.tool_name, duration_ms / 1000, error_code);
    if (span) {
      emitChildCallSpan(job.trace.traceparent, {
        run_id: job.run_id,
        ...place,
        tool_call_id: job.tool_call_id,
        tool_name: job.tool_name,
        started_at,
        child_run_id,
        ...(error_code ? { error_code } : {}),
      });
    }
  }
  if (recorded.openInRound === 0) await enqueueJoin(deps.queues, job.join, joinJobData({ ...job, args: undefined }));
}
