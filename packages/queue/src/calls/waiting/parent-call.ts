import { childCallSettled } from '@arcflow/core';
import { recordToolExecution } from '@arcflow/telemetry/metrics';
import { tracingEnabled } from '@arcflow/telemetry/ids';
import { QueueName } from '../../redis/keys.ts';
import type { ParentCall } from './child-store.ts';
import type { RunStore } from '../../runs/run-store.ts';
import { childCallTraceparent, emitChildCallSpan } from '../../tracing.ts';
import { joinJobData } from '../../jobs/jobs.ts';
import type { CallQueues } from '../../jobs/dispatcher.ts';

/** What settling a child's parent call came to: done (now or before, or the parent has ended), or nothing to go on. */
export type ParentSettlement = 'settled' | 'unreadable';

/** More attempts than any worker gives a provider job (attempts per model × 5 models) are not taken from a child's record. */
const MAX_JOIN_ATTEMPTS = 100;

/**
 * Settles the call of its parent that an ended child run was started by (SPEC §13): the child's
 * answer is the call's result, its failure `child_failed`; what the child spent counts toward the
 * parent's budget, in the same write. Once: a second delivery (the watchdog's, after a process died
 * between the child's end and this) finds the call recorded. The round's join follows as after
 * any tool job; a parent that has ended takes nothing.
 *
 * `endedHere`: this process ended the child, so it emits the call's `execute_tool` span even when
 * the call was closed another way (its parent was cancelled): the child's root span is under it.
 * `unreadable`: the child has not ended, or its record names no call this engine could settle.
 */
export async function settleParentCall(
  deps: { readonly store: RunStore; readonly queues: Pick<CallQueues, 'join'> },
  child_run_id: string,
  endedHere: boolean,
): Promise<ParentSettlement> {
  const child = await deps.store.children.ended(child_run_id);
  if (!child) return 'unreadable';
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
  if (recorded?.recordedNow) {
    recordToolExecution(job.tool_name, duration_ms / 1000, error_code);
    if (span) emitCallSpan(child.parent, child_run_id, error_code);
  } else if (span && endedHere) {
    emitCallSpan(child.parent, child_run_id, 'cancelled');
  }
  if (recorded?.openInRound === 0) {
    // The join goes to the parent's own queue, named from its record, not from what the child's record says.
    const agent = await deps.store.children.agentOf(job.run_id);
    if (agent) await deps.queues.join({ queue: QueueName.agent(agent), attempts: Math.min(job.join.attempts, MAX_JOIN_ATTEMPTS) }, joinJobData({ ...job, args: undefined }));
  }
  // The parent's call is settled (now or before): the ended child leaves the watchdog's scan (finish.lua kept it there until now).
  await deps.store.watchdog.forgetActive(child_run_id);
  return 'settled';
}

function emitCallSpan({ job, started_at }: ParentCall, child_run_id: string, error_code: string | undefined): void {
  emitChildCallSpan(job.trace.traceparent, {
    run_id: job.run_id,
    step_id: job.step_id,
    iteration: job.iteration,
    tool_call_id: job.tool_call_id,
    tool_name: job.tool_name,
    started_at,
    child_run_id,
    ...(error_code ? { error_code } : {}),
  });
}
