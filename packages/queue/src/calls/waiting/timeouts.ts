import type { ToolLogger } from '@arcflow/core';
import { resolveApproval } from './approvals.ts';
import { timeOutResult } from './tool-results.ts';
import { type WaitDeps, waitTimeoutData } from './waiting-call.ts';

/**
 * Processes a waiting call's timeout job (waiting-call.ts), whatever its kind, in whichever worker
 * takes it at `expires_at`: the call fails `approval_timeout` or `result_timeout` unless it was
 * settled first. Returns how settling went (the job's return value).
 */
export async function timeOutWaitingCall(deps: WaitDeps & { readonly logger: ToolLogger }, job: { readonly id?: string; readonly data: unknown }): Promise<string> {
  const data = waitTimeoutData(job.data);
  if (!data) {
    // Not a job this engine wrote: nothing to time out.
    deps.logger.error('timeout job refused: its data is malformed', { job_id: job.id });
    return 'refused';
  }
  const at = { step_id: data.step_id, iteration: data.iteration };
  if (data.kind === 'result') return (await timeOutResult(deps, data.run_id, data.tool_call_id, at)).status;
  return (await resolveApproval(deps, data.run_id, data.tool_call_id, { timeout: at })).status;
}
