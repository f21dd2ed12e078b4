import type { ToolDefinition } from '@arcflow/core';
import type { Job } from 'bullmq';
import type { ToolJobData } from './jobs.ts';
import { type ToolRuntime, attemptToolCall, callFromJob } from './tool-execution.ts';

/**
 * Processes a tool job: one attempt at one call. A handler error with attempts left is thrown,
 * so BullMQ retries with backoff; everything else is recorded once and the job completes. A
 * re-delivered job whose call is already recorded does nothing.
 */
export function toolJobProcessor(runtime: ToolRuntime, tools: ReadonlyMap<string, ToolDefinition>) {
  return async (job: Job<ToolJobData>): Promise<string> => {
    const data = job.data;
    const tool = tools.get(data.tool_name);
    if (!tool) throw new Error(`this worker does not serve tool '${data.tool_name}'`);
    const attempts = job.opts.attempts ?? 1;
    // attemptsStarted counts every delivery, so a call re-run after a crash shows a higher attempt.
    const attempt = Math.max(job.attemptsStarted, job.attemptsMade + 1);
    const { retry } = await attemptToolCall(
      runtime,
      data.run_id,
      callFromJob(data, tool),
      { step_id: data.step_id, iteration: data.iteration },
      attempt,
      job.attemptsMade + 1 >= attempts,
    );
    if (retry) throw new Error(`tool '${data.tool_name}' failed; retrying`);
    return 'recorded';
  };
}
