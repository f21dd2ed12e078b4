import {
  type CallPlace,
  type ExecuteCall,
  type JsonSchema,
  RequestError,
  type StateChange,
  type ToolDefinition,
  type ToolResultAnswer,
  type ToolResultInput,
  answeredCall,
  compileSchema,
  requestedCallFacts,
  resultRequestedEvent,
  resultTimedOutCall,
} from '@arcflow/core';
import type { ToolJobData } from '../../jobs/jobs.ts';
import { unknownRun } from '../../runs/unknown-run.ts';
import { type ResultTerms, type SettleOutcome, type StoredWait, type WaitDecision, type WaitDeps, parkWaitingCall, settleWaitingCall, waitChunk } from './waiting-call.ts';
import { waitRequest } from './waiting-store.ts';

/**
 * Results from outside (SPEC §20) — waiting calls of kind `result` (waiting-call.ts): an external
 * tool's call (parked when its round fans out, or once approved), and a handler that returned
 * `ctx.defer()` (parked by its tool job, which then ends). Answered by `submitToolResult`, or
 * failed `result_timeout` by its timeout job.
 */

/** What a wait for a result keeps of its tool. */
export function resultTerms(tool: ToolDefinition, timeout_ms: number): ResultTerms {
  return {
    timeout_ms,
    max_result_bytes: tool.max_result_bytes,
    input_schema_hash: tool.input_schema_hash,
    ...(tool.output_schema !== undefined ? { output_schema: tool.output_schema } : {}),
  };
}

/** An external tool's call that needs no approval: it waits for its result now, holding no worker. */
export async function requestResult(deps: WaitDeps, planned: ExecuteCall, place: CallPlace, job: ToolJobData): Promise<void> {
  const request = waitRequest(planned, place, job, planned.tool.result_timeout_ms, { result: resultTerms(planned.tool, planned.tool.result_timeout_ms) });
  await parkWaitingCall(
    deps,
    'result',
    request,
    resultRequestedEvent(requestedCallFacts(planned), place, request.expires_at),
    deps.store.toolResults,
    waitChunk('tool_input', request),
  );
}

/** A handler deferred (`ctx.defer()`): its call waits for its result, with the state changes it made (SPEC §17). */
export async function deferCall(
  deps: WaitDeps,
  planned: ExecuteCall,
  place: CallPlace,
  job: ToolJobData,
  deferred: { readonly timeout_ms: number; readonly changes?: readonly StateChange[]; readonly started_at: number },
): Promise<void> {
  const request = waitRequest(planned, place, job, deferred.timeout_ms, {
    result: resultTerms(planned.tool, deferred.timeout_ms),
    started_at: deferred.started_at,
    ...(deferred.changes ? { changes: deferred.changes } : {}),
  });
  await parkWaitingCall(deps, 'result', request, resultRequestedEvent(requestedCallFacts(planned), place, request.expires_at), deps.store.toolResults);
}

/** An approved external tool's call (its approval's request): it waits for its result from `now`. */
export async function waitForResult(deps: WaitDeps, approved: StoredWait, terms: ResultTerms, now: number): Promise<void> {
  const { result: _, ...rest } = approved;
  const request: StoredWait = { ...rest, requested_at: now, expires_at: now + terms.timeout_ms, result: terms, started_at: now };
  const facts = {
    tool_name: approved.tool_name,
    tool_call_id: approved.tool_call_id,
    input_schema_hash: terms.input_schema_hash,
    input_size_bytes: approved.tool_job.input_size_bytes,
  };
  await parkWaitingCall(deps, 'result', request, resultRequestedEvent(facts, approved, request.expires_at), deps.store.toolResults, waitChunk('tool_input', request));
}

/** The timeout of a wait for a result: `Error: no result came in time`, `result_timeout`. */
export function timeOutResult(deps: WaitDeps, run_id: string, tool_call_id: string, at: CallPlace): Promise<SettleOutcome<ToolResultAnswer>> {
  return settleWaitingCall(deps, deps.store.toolResults, run_id, tool_call_id, (request) => timedOutDecision(request), at);
}

function timedOutDecision(request: StoredWait): WaitDecision<ToolResultAnswer> {
  const answered_at = Date.now();
  return {
    decision: 'timed_out',
    resolution: { status: 'failed', answered_at },
    result: resultTimedOutCall(request, request, Math.max(0, answered_at - (request.started_at ?? request.requested_at))),
  };
}

/**
 * Answers a call waiting for its result (SPEC §20), once: `{ output }` completes it (checked
 * against the tool's `output_schema`, a refusal naming the path with nothing recorded; cut to the
 * tool's `max_result_bytes`), `{ error }` fails it (`tool_error`). Answering again returns the
 * first answer; a call that does not wait for a result is `not_waiting`; an unknown run,
 * `unknown_run`. The answer's shape is checked by the caller (`toolResultProblem`).
 */
export async function answerToolResult(deps: WaitDeps & { readonly prefix: string }, run_id: string, tool_call_id: string, answer: ToolResultInput): Promise<ToolResultAnswer> {
  const request = await deps.store.toolResults.get(run_id, tool_call_id);
  if (!request) throw await notWaiting(deps, run_id, tool_call_id);
  if ('output' in answer && request.result?.output_schema !== undefined) {
    const violation = outputCheck(request.result.output_schema as JsonSchema)(answer.output);
    if (violation !== undefined) {
      // A call answered already keeps its first answer, whatever this one holds.
      const earlier = await deps.store.toolResults.settled(run_id, tool_call_id);
      if (earlier?.decision === 'answered') return earlier.resolution;
      throw new RequestError('invalid_request', `output does not match the output_schema of tool '${request.tool_name}': ${violation}`);
    }
  }
  const outcome = await settleWaitingCall(deps, deps.store.toolResults, run_id, tool_call_id, (waiting) => answeredDecision(waiting, answer));
  switch (outcome.status) {
    case 'settled':
      return outcome.resolution;
    case 'settled_before':
      if (outcome.decision === 'answered') return outcome.resolution;
      throw new RequestError('not_waiting', `tool call '${tool_call_id}' of run '${run_id}' no longer waits for a result: no result came in time`);
    case 'run_ended':
      throw new RequestError('not_waiting', `tool call '${tool_call_id}' of run '${run_id}' no longer waits for a result: the run has ended`);
    default:
      throw await notWaiting(deps, run_id, tool_call_id);
  }
}

function answeredDecision(request: StoredWait, answer: ToolResultInput): WaitDecision<ToolResultAnswer> {
  const answered_at = Date.now();
  const call = { tool_name: request.tool_name, tool_call_id: request.tool_call_id, max_result_bytes: request.result?.max_result_bytes ?? 64 * 1024 };
  const duration_ms = Math.max(0, answered_at - (request.started_at ?? request.requested_at));
  const result = answeredCall(call, request, answer, duration_ms, request.changes as readonly StateChange[] | undefined);
  return { decision: 'answered', resolution: { status: 'error' in answer ? 'failed' : 'completed', answered_at }, result };
}

async function notWaiting(deps: WaitDeps & { readonly prefix: string }, run_id: string, tool_call_id: string): Promise<RequestError> {
  const run = await deps.store.getRun(run_id);
  if (!run) return unknownRun(run_id, deps.prefix);
  // The calls that do wait, so a mistyped id is seen as one.
  const waiting = (run.pending_tool_results ?? []).map((call) => call.tool_call_id);
  const which = waiting.length > 0 ? `calls waiting for one: ${waiting.slice(0, 10).join(', ')}${waiting.length > 10 ? ', …' : ''}` : 'none of its calls waits for one';
  return new RequestError('not_waiting', `tool call '${tool_call_id}' of run '${run_id}' does not wait for a result (${which})`);
}

/** Output schemas compiled once per process, by their JSON. */
const outputChecks = new Map<string, (output: unknown) => string | undefined>();

function outputCheck(schema: JsonSchema): (output: unknown) => string | undefined {
  const key = JSON.stringify(schema);
  let check = outputChecks.get(key);
  if (!check) {
    check = compileSchema('output_schema', schema);
    if (outputChecks.size >= 1_000) outputChecks.clear();
    outputChecks.set(key, check);
  }
  return check;
}
