import type { EventDraft } from '../events/types.ts';
import type { ToolLogger } from '../tools/define.ts';
import { idempotencyKey } from '../tools/run-handler.ts';
import { ToolResultText } from '../tools/result-text.ts';
import type { ResponseDecision } from './decide.ts';
import type { ExecuteCall } from './plan.ts';
import { type CallPlace, type SettledCall, failedCall } from './tool-events.ts';

/** What a person (or `runLocal`'s `approve`) is asked about a waiting call. */
export interface ApprovalRequest {
  readonly step_id: string;
  readonly iteration: number;
  readonly tool_call_id: string;
  readonly tool_name: string;
  readonly arguments: unknown;
}

/** A person's answer: approve, or reject (with a reason for the model). */
export interface ApprovalAnswer {
  readonly approved: boolean;
  readonly reason?: string;
  readonly by?: string;
}

/**
 * Marks the decision's valid calls whose tool needs approval (`needs_approval`: true, or a
 * function of the arguments and the call's context that returns true). A function that throws, or
 * returns anything but a boolean (an async function's Promise), is taken as asking for approval:
 * the safe side. Calls that failed validation never ask.
 */
export function markApprovals(decision: ResponseDecision, place: CallPlace, run_id: string, log: ToolLogger): ResponseDecision {
  if (decision.type !== 'tools') return decision;
  if (!decision.calls.some((planned) => planned.action === 'execute' && planned.tool.needs_approval !== false)) return decision;
  const calls = decision.calls.map((planned) => (planned.action === 'execute' ? markApproval(planned, place, run_id, log) : planned));
  return { type: 'tools', calls };
}

/** One valid call, marked as {@link markApprovals} marks it: a workflow's tool step's call asks as a model's call does. */
export function markApproval(planned: ExecuteCall, place: CallPlace, run_id: string, log: ToolLogger): ExecuteCall {
  if (planned.tool.needs_approval === false) return planned;
  return needsApproval(planned, place, run_id, log) ? { ...planned, approval: true } : planned;
}

function needsApproval(planned: ExecuteCall, place: CallPlace, run_id: string, log: ToolLogger): boolean {
  const rule = planned.tool.needs_approval;
  if (typeof rule === 'boolean') return rule;
  const ctx = { run_id, ...place, tool_call_id: planned.call.id, attempt: 1, idempotency_key: idempotencyKey({ run_id, ...place, tool_call_id: planned.call.id }), log };
  const where = { run_id, ...place, tool_call_id: planned.call.id, tool: planned.tool.name };
  let decided: unknown;
  try {
    decided = rule(planned.args, ctx);
  } catch (error) {
    log.error('needs_approval threw; the call waits for approval', { ...where, error });
    return true;
  }
  if (typeof decided === 'boolean') return decided;
  // Anything but a boolean (a Promise from an async function, a truthy value) is the safe side too.
  if (decided instanceof Promise) decided.catch(() => undefined);
  log.error(
    `needs_approval returned ${decided instanceof Promise ? 'a Promise' : typeof decided}, not true or false; the call waits for approval (the rule must decide at once: (args, ctx) => boolean)`,
    where,
  );
  return true;
}

/** The request shown to approvers. */
export function approvalRequest(planned: ExecuteCall, place: CallPlace): ApprovalRequest {
  return { step_id: place.step_id, iteration: place.iteration, tool_call_id: planned.call.id, tool_name: planned.tool.name, arguments: planned.args };
}

/** `ToolApprovalRequested`: the call waits (no argument in it). */
export function approvalRequestedEvent(planned: ExecuteCall, place: CallPlace): EventDraft {
  return {
    kind: 'ToolApprovalRequested',
    step_id: place.step_id,
    iteration: place.iteration,
    tool_name: planned.tool.name,
    tool_call_id: planned.call.id,
    input_schema_hash: planned.tool.input_schema_hash,
    input_size_bytes: planned.input_size_bytes,
  };
}

/** `ToolApprovalResolved`: a person approved or rejected the call. */
export function approvalResolvedEvent(call: { tool_name: string; tool_call_id: string }, place: CallPlace, approved: boolean, by: string | undefined): EventDraft {
  return {
    kind: 'ToolApprovalResolved',
    step_id: place.step_id,
    iteration: place.iteration,
    tool_name: call.tool_name,
    tool_call_id: call.tool_call_id,
    approved,
    ...(by ? { by } : {}),
  };
}

/** A rejected call: the exact text for the model and `ToolCallFailed (rejected)`. */
export function rejectedCall(call: { tool_name: string; tool_call_id: string }, place: CallPlace, reason: string | undefined): SettledCall {
  return failedCall(call, place, ToolResultText.rejected(reason), 'rejected');
}

/** A call nobody answered in time: `ToolCallFailed (approval_timeout)`. */
export function approvalTimedOutCall(call: { tool_name: string; tool_call_id: string }, place: CallPlace): SettledCall {
  return failedCall(call, place, ToolResultText.approvalTimedOut(), 'approval_timeout');
}

/** Checks an answer from outside (a client, an HTTP body, `runLocal`'s `approve`); returns why it is not one, if it is not. */
export function answerProblem(answer: unknown): string | undefined {
  const value = answer as Record<string, unknown> | null;
  if (value === null || typeof value !== 'object') return 'the answer must be an object { approved, reason?, by? }';
  if (typeof value.approved !== 'boolean') return 'approved must be true or false';
  if (value.reason !== undefined && (typeof value.reason !== 'string' || value.reason.length > 2_000)) return 'reason must be a string of at most 2000 characters';
  if (value.by !== undefined && (typeof value.by !== 'string' || value.by.length === 0 || value.by.length > 200)) return 'by must be a string of 1 to 200 characters';
  return undefined;
}
