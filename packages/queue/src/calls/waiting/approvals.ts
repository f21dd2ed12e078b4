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
import { type ToolJobData, joinJobData, toolJobOptions } from '../../jobs/jobs.ts';
import { roundCall } from '../tool-execution.ts';
import { type SettleOutcome, type StoredWait, type WaitDecision, type WaitDeps, parkWaitingCall, settleWaitingCall, waitChunk } from './waiting-call.ts';
import { waitRequest } from './waiting-store.ts';
import { resultTerms, waitForResult } from './tool-results.ts';

/** An approval's timeout, for the call at this place. */
export interface ApprovalTimeout {
  readonly timeout: CallPlace;
}

/**
 * A call that needs approval waits (SPEC §10) — a waiting call of kind `approval` (waiting-call.ts):
 * its request, with the tool job that runs it if approved, is parked; its timeout job fails it at
 * `expires_at`. One approved already (whose tool job may have been lost with the process that
 * approved it) gets its tool job again (the id dedupes).
 */
export async function requestApproval(deps: WaitDeps & { tool_backoff_ms: number; logger: ToolLogger }, planned: ExecuteCall, place: CallPlace, job: ToolJobData): Promise<void> {
  const request = waitRequest(planned, place, job, planned.tool.approval_timeout_ms, {
    tool_job_options: toolJobOptions(job, planned.tool, deps.tool_backoff_ms),
    tool_capped: planned.tool.concurrency !== undefined,
    // An external tool's call waits for its result once approved (SPEC §20).
    ...(planned.tool.external ? { result: resultTerms(planned.tool, planned.tool.result_timeout_ms) } : {}),
  });
  const parked = await parkWaitingCall(deps, 'approval', request, approvalRequestedEvent(planned, place), deps.store.approvals, waitChunk('tool_approval', request));
  if (!parked || parked.parkedNow) return;
  if (parked.status === 'approved') return void (await afterApproval(deps, request));
  if (parked.status === 'conflict') {
    // Waiting calls are addressed by id, so a second call waiting under one could never be told apart: it fails (the model may call again).
    deps.logger.error('tool call cannot wait for approval: another call of its run waits under the same id', { run_id: job.run_id, ...place, tool_call_id: planned.call.id });
    const recorded = await deps.store.recordToolResult(job.run_id, roundCall(planned, place, true, job.waits === true), lostCall(planned, place));
    if (recorded?.openInRound === 0) await deps.queues.join(job.join, joinJobData(job));
  }
}

/**
 * Resolves a waiting call (a person's answer, or its timeout) once, then moves the run on: an
 * approved call's tool job is added (an external tool's call waits for its result instead); a
 * rejected or timed-out call that settled its round adds the round's join. Resolving again
 * returns the first resolution and does nothing.
 */
export async function resolveApproval(deps: WaitDeps, run_id: string, tool_call_id: string, answer: ApprovalAnswer | ApprovalTimeout): Promise<SettleOutcome<ApprovalResolution>> {
  const at = 'timeout' in answer ? answer.timeout : undefined;
  const outcome = await settleWaitingCall(deps, deps.store.approvals, run_id, tool_call_id, (request) => decisionFor(request, answer), at);
  if (outcome.status === 'settled' && !('timeout' in answer) && answer.approved) await afterApproval(deps, outcome.request);
  return outcome;
}

function decisionFor(request: StoredWait, answer: ApprovalAnswer | ApprovalTimeout): WaitDecision<ApprovalResolution> {
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

/** What an approved call does next: its tool job runs it, or (an external tool's call) it waits for its result. */
async function afterApproval(deps: WaitDeps, request: StoredWait): Promise<unknown> {
  if (request.result) return waitForResult(deps, request, request.result, Date.now());
  return deps.queues.addApprovedToolJob(request);
}
