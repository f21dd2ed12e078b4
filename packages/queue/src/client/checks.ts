import { checkTenantName, isPriority } from '../tenancy/options.ts';
import {
  type ApprovalAnswer,
  NamePattern,
  RequestError,
  type ToolResultInput,
  answerProblem,
  toolResultProblem,
  checkExecConfig,
  checkOnBusy,
  checkRunInput,
  checkThreadId,
} from '@arcflow/core';
import type { EnqueueRequest } from './enqueue-request.ts';
import { checkEnqueueOptions } from './enqueue-options.ts';
import type { ForkRequest } from '../runs/fork.ts';

const SAFE_ID = /^[A-Za-z0-9_.-]{1,200}$/;
/** Who enqueued a run, as its record shows it (e.g. `token:<subject>` for a run enqueued with an end user's token). */
const ENQUEUED_BY = /^[^\p{Cc}]{1,200}$/u;

/** A run id of the form arcflow keeps, before it goes into any key; else a clear error. */
export function checkRunId(run_id: unknown): string {
  if (typeof run_id !== 'string' || !NamePattern.runId.test(run_id)) {
    throw new RequestError('invalid_run_id', `run_id must match ${NamePattern.runId}, got ${JSON.stringify(run_id)?.slice(0, 120)}`);
  }
  return run_id;
}

/** An enqueue request's fields, checked before anything is loaded or read. */
export function checkEnqueueRequest(request: EnqueueRequest): void {
  checkEnqueueNames(request);
  // A string, or a list of messages checked message by message (SPEC §11): a refusal names the index and field.
  checkRunInput(request.input);
  // Checked for any run here; against a workflow's graph once the registry names it one (see ClientJobs.enqueue).
  checkExecConfig(request.exec_config);
}

/**
 * An enqueue request's names and flags (its agent, options, idempotency key, thread, tenant,
 * priority, …), not its input or test mode: what an HTTP body's schema would otherwise refuse in
 * its own words, where the client's are the API's (SPEC §8).
 */
export function checkEnqueueNames(request: EnqueueRequest): void {
  if (typeof request?.agent !== 'string' || !NamePattern.agent.test(request.agent)) {
    throw new RequestError('invalid_request', `agent must match ${NamePattern.agent}, got ${JSON.stringify(request?.agent)?.slice(0, 120)}`);
  }
  checkEnqueueOptions(request);
  if (request.idempotency_key !== undefined && (typeof request.idempotency_key !== 'string' || !SAFE_ID.test(request.idempotency_key))) {
    throw new RequestError('invalid_request', 'idempotency_key must be 1-200 characters of letters, digits, _ . -');
  }
  // A thread (SPEC §11): its id, and what a run does when the thread is busy.
  if (request.thread_id !== undefined) checkThreadId(request.thread_id);
  if (request.on_busy !== undefined) checkOnBusy(request.on_busy);
  if (request.stream !== undefined && typeof request.stream !== 'boolean') {
    throw new RequestError('invalid_request', `stream must be true or false, got ${JSON.stringify(request.stream)?.slice(0, 40)}`);
  }
  if (request.enqueued_by !== undefined && (typeof request.enqueued_by !== 'string' || !ENQUEUED_BY.test(request.enqueued_by))) {
    throw new RequestError('invalid_request', `enqueued_by must be 1-200 characters, no control characters, got ${JSON.stringify(request.enqueued_by)?.slice(0, 60)}`);
  }
  if (request.tenant !== undefined) checkTenantName('tenant', request.tenant);
  if (request.priority !== undefined && !isPriority(request.priority)) {
    throw new RequestError('invalid_request', `priority must be an integer from 1 (first) to 10, got ${JSON.stringify(request.priority)?.slice(0, 40)}`);
  }
}

/** A fork's source and where it forks from (SPEC §15); its iteration is checked against the source run. */
export function checkForkRequest(run_id: string, request: ForkRequest): void {
  checkRunId(run_id);
  const from = request?.from;
  if (typeof from !== 'object' || from === null) throw new RequestError('invalid_request', 'from must be an object: { step_id?, iteration }');
  if (from.step_id !== undefined && (typeof from.step_id !== 'string' || !NamePattern.stepId.test(from.step_id))) {
    throw new RequestError('invalid_request', `from.step_id must match ${NamePattern.stepId}, got ${JSON.stringify(from.step_id)?.slice(0, 120)}`);
  }
  if (from.iteration !== undefined && (!Number.isSafeInteger(from.iteration) || from.iteration < 1)) {
    throw new RequestError('invalid_request', `from.iteration must be an integer >= 1, got ${JSON.stringify(from.iteration)?.slice(0, 40)}`);
  }
  if (request.exec_config !== undefined) checkExecConfig(request.exec_config);
}

/** A waiting call's id, before it goes into any key; else a clear error. */
export function checkToolCallId(tool_call_id: unknown): void {
  if (typeof tool_call_id !== 'string' || !NamePattern.toolCallId.test(tool_call_id)) {
    throw new RequestError('invalid_request', `tool_call_id must match ${NamePattern.toolCallId}, got ${JSON.stringify(tool_call_id)?.slice(0, 120)}`);
  }
}

/** An approval's run, call and answer. */
export function checkApproval(run_id: string, tool_call_id: string, answer: ApprovalAnswer): void {
  checkRunId(run_id);
  checkToolCallId(tool_call_id);
  const problem = answerProblem(answer);
  if (problem) throw new RequestError('invalid_request', problem);
}

/** A result from outside's run, call and answer (SPEC §20). */
export function checkToolResult(run_id: string, tool_call_id: string, answer: ToolResultInput): void {
  checkRunId(run_id);
  checkToolCallId(tool_call_id);
  const problem = toolResultProblem(answer);
  if (problem) throw new RequestError('invalid_request', problem);
}
