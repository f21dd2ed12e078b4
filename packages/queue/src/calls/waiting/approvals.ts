import {
  type ApprovalAnswer,
  type ApprovalResolution,
  type CallPlace,
  type ExecuteCall,
  approvalRequestedEvent,
  approvalResolvedEvent,
  approvalTimedOutCall,
  lostCall,
  rejectedCall,
  type ToolLogger,
} from '@arcflow/core';
import { JobId } from '../../redis/keys.ts';
import type { ApprovalDecision, ResolveOutcome, StoredApproval } from './approval-store.ts';
import type { RunStore } from '../../runs/run-store.ts';
import { type ApprovalTimeoutData, type ToolJobData, joinJobData, toolJobOptions } from '../../jobs/jobs.ts';
import type { Dispatcher } from '../../jobs/dispatcher.ts';
import { roundCall } from '../tool-execution.ts';

/** A waiting call's timeout, set for the call at this place. */
export interface ApprovalTimeout {
  readonly timeout: CallPlace;
}

interface ApprovalDeps {
  readonly store: RunStore;
  readonly queues: Dispatcher;
}

/**
 * A call that needs approval waits: its request (with the tool job that runs it if approved) is
 * kept in Redis, and a delayed job on the run's provider queue times it out at `expires_at`,
 * whichever worker is alive then. Nothing waits in a worker. A re-delivered request changes
 * nothing; one approved already (whose tool job may have been lost with the process that
 * approved it) gets its tool job again (the id dedupes).
 */
export async function requestApproval(
  deps: ApprovalDeps & { tool_backoff_ms: number; logger: ToolLogger },
  planned: ExecuteCall,
  place: CallPlace,
  job: ToolJobData,
): Promise<void> {
  const now = Date.now();
  const request: StoredApproval = {
    step_id: place.step_id,
    iteration: place.iteration,
    tool_call_id: planned.call.id,
    tool_name: planned.tool.name,
    arguments: planned.args,
    requested_at: now,
    expires_at: now + planned.tool.approval_timeout_ms,
    tool_job: job,
    tool_job_options: toolJobOptions(job, planned.tool, deps.tool_backoff_ms),
    tool_capped: planned.tool.concurrency !== undefined,
  };
  const requested = await deps.store.approvals.request(job.run_id, request, approvalRequestedEvent(planned, place));
  if (!requested) return;
  if (!requested.requestedNow) {
    if (requested.status === 'approved') return void (await deps.queues.addApprovedToolJob(request));
    if (requested.status === 'closed') return;
    if (requested.status === 'conflict') {
      // Approvals are addressed by id, so a second call waiting under one could never be told apart: it fails (the model may call again).
      deps.logger.error('tool call cannot wait for approval: another call of its run waits under the same id', { run_id: job.run_id, ...place, tool_call_id: planned.call.id });
      const recorded = await deps.store.recordToolResult(job.run_id, roundCall(planned, place, true, job.waits === true), lostCall(planned, place));
      if (recorded?.openInRound === 0) await deps.queues.join(job.join, joinJobData(job));
      return;
    }
  }
  const timeout: ApprovalTimeoutData = { run_id: job.run_id, step_id: place.step_id, iteration: place.iteration, tool_call_id: planned.call.id, trace: job.trace };
  await deps.queues.addTimeout(job.join.queue, timeout, JobId.approvalTimeout(job.run_id, place.step_id, place.iteration, planned.call.id), Math.max(0, request.expires_at - now));
}

/**
 * Resolves a waiting call (a person's answer, or its timeout) once, then moves the run on: an
 * approved call's tool job is added; a rejected or timed-out call that settled its round adds the
 * round's join. Resolving again returns the first resolution and does nothing.
 */
export async function resolveApproval(deps: ApprovalDeps, run_id: string, tool_call_id: string, answer: ApprovalAnswer | ApprovalTimeout): Promise<ResolveOutcome> {
  const request = await deps.store.approvals.get(run_id, tool_call_id);
  if (!request) return { status: 'never_waited' };
  // A timeout is for the call it was set for: a later call of the same id (ids may repeat across turns and steps) has its own.
  if ('timeout' in answer && (request.step_id !== answer.timeout.step_id || request.iteration !== answer.timeout.iteration)) return { status: 'never_waited' };
  const outcome = await deps.store.approvals.resolve(run_id, tool_call_id, decisionFor(request, answer));
  if (outcome.status !== 'resolved') return outcome;
  if (!('timeout' in answer) && answer.approved) await deps.queues.addApprovedToolJob(outcome.request);
  else if (outcome.openInRound === 0) await deps.queues.join(outcome.request.tool_job.join, joinJobData(outcome.request.tool_job));
  return outcome;
}

function decisionFor(request: StoredApproval, answer: ApprovalAnswer | ApprovalTimeout): ApprovalDecision {
  const place = { step_id: request.step_id, iteration: request.iteration };
  const resolved_at = Date.now();
  if ('timeout' in answer) {
    return { decision: 'timed_out', resolution: { approved: false, resolved_at, timed_out: true }, result: approvalTimedOutCall(request, place) };
  }
  const resolution: ApprovalResolution = {
    approved: answer.approved,
    ...(answer.by !== undefined ? { by: answer.by } : {}),
    ...(answer.reason !== undefined ? { reason: answer.reason } : {}),
    resolved_at,
  };
  const resolved = approvalResolvedEvent(request, place, answer.approved, answer.by);
  if (answer.approved) return { decision: 'approved', resolution, resolved };
  return { decision: 'rejected', resolution, resolved, result: rejectedCall(request, place, answer.reason) };
}
