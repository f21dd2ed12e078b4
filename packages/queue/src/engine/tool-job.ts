import { type ToolDefinition, lostCall } from '@arcflow/core';
import type { Job } from 'bullmq';
import { type ToolJobData, attemptsOf, joinJobData } from './jobs.ts';
import { type QueuePool, enqueueJoin } from './join.ts';
import { type ToolRuntime, attemptToolCall, callFromJob, roundCall } from './tool-execution.ts';

export interface ToolJobDeps extends ToolRuntime {
  readonly tools: ReadonlyMap<string, ToolDefinition>;
  readonly queues: QueuePool;
}

/**
 * Processes a tool job: one attempt at one call. A handler error with attempts left is thrown,
 * so BullMQ retries with backoff; everything else is recorded once and the job completes. A
 * re-delivered job whose call is already recorded runs nothing. Whichever job sees its round
 * settled enqueues the join, before the job completes: a crash in between re-delivers the job,
 * which sees the round settled again.
 */
export function toolJobProcessor(deps: ToolJobDeps) {
  return async (job: Job<ToolJobData>): Promise<string> => {
    const data = job.data;
    const tool = deps.tools.get(data.tool_name);
    if (!tool) throw new Error(`this worker does not serve tool '${data.tool_name}'`);
    const attempts = attemptsOf(job);
    // attemptsStarted counts every delivery, so a call re-run after a crash shows a higher attempt.
    const attempt = Math.max(job.attemptsStarted, job.attemptsMade + 1);
    const { retry, roundSettled } = await attemptToolCall(
      deps,
      data.run_id,
      callFromJob(data, tool),
      { step_id: data.step_id, iteration: data.iteration },
      { number: attempt, last: job.attemptsMade + 1 >= attempts, firstDelivery: attempt === 1, fannedOut: true },
    );
    if (retry) throw new Error(`tool '${data.tool_name}' failed; retrying`);
    if (roundSettled) await joinRound(deps, data);
    return 'recorded';
  };
}

/**
 * A tool job that BullMQ failed for good without recording its call: the call gets its failure
 * result, so the round can settle. A job that lost its worker more often than the stall limit
 * allows ends `worker_lost`; one whose recording kept failing, `tool_error`.
 */
export async function settleFailedToolJob(deps: ToolJobDeps, job: Job<ToolJobData>, lostWorker: boolean): Promise<void> {
  const data = job.data;
  const tool = deps.tools.get(data.tool_name);
  if (!tool) return;
  const place = { step_id: data.step_id, iteration: data.iteration };
  const planned = callFromJob(data, tool);
  const lost = lostCall(planned, place, lostWorker ? 'worker_lost' : 'tool_error');
  const recorded = await deps.store.recordToolResult(data.run_id, roundCall(planned, place, true), lost);
  if (recorded?.openInRound === 0) await joinRound(deps, data);
}

/** The round of this tool job is settled: on to its join, provider job `n+1`. */
function joinRound(deps: ToolJobDeps, data: ToolJobData): Promise<void> {
  return enqueueJoin(deps.queues, data.join, joinJobData(data));
}
