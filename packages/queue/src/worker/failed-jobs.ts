import { type Workflow, stepFailedEvent, stepRunError } from '@arcflow/core';
import type { Job } from 'bullmq';
import type { RunStore } from '../runs/run-store.ts';
import { type Succession, endRun } from '../runs/end-run.ts';
import { type ProviderJobData, type ToolJobData, attemptsOf, malformedProviderJobData } from '../jobs/jobs.ts';
import { type ToolJobDeps, settleFailedToolJob } from '../calls/tool-job.ts';
import { type WorkflowScheduler, workflowRunOf } from '../workflows/workflow-scheduler.ts';

/** BullMQ will not try this job again: its attempts are spent, or it stalled too often. */
function failedForGood(job: Job, reason: string | undefined): boolean {
  return job.attemptsMade >= attemptsOf(job) || stalledOut(reason);
}

/** BullMQ failed the job because it lost its worker more often than `maxStalledCount` allows. */
function stalledOut(reason: string | undefined): boolean {
  return reason?.includes('stalled more than allowable limit') === true;
}

/** What failing a provider job's step takes. */
export type FailedStepDeps = Succession & {
  store: RunStore;
  workflows: ReadonlyMap<string, Workflow>;
  scheduler: WorkflowScheduler;
  options: { provider_attempts: number };
};

/**
 * A provider job that BullMQ failed for good fails its step: an agent run with it, a workflow
 * step on its own (the run moves on as its `on_step_failure` says).
 */
export async function failStepIfFinal(deps: FailedStepDeps, job: Job<ProviderJobData> | undefined, reason: string | undefined): Promise<void> {
  if (!job || !failedForGood(job, reason) || malformedProviderJobData(job.data) !== undefined) return;
  const { run_id, step_id, iteration } = job.data;
  const error = stepRunError('job_failed', `provider job for iteration ${iteration} failed permanently`);
  const ending = { outcome: { status: 'failed' as const, error }, step_id, events: [{ event: stepFailedEvent(step_id, error, iteration) }] };
  try {
    const spec = await deps.store.getSpec(run_id);
    const workflow = spec ? deps.workflows.get(spec.agent) : undefined;
    if (!spec || !workflow) {
      await endRun(deps.store, run_id, ending, deps);
      return;
    }
    await deps.scheduler.settle(workflowRunOf(workflow, spec, deps.options.provider_attempts), ending);
  } catch {
    // The watchdog finds the run if this write was lost.
  }
}

/** A tool job that BullMQ failed for good settles its call (see `settleFailedToolJob`). */
export function settleIfFinal(deps: ToolJobDeps, job: Job<ToolJobData> | undefined, reason: string | undefined): void {
  if (!job || !failedForGood(job, reason)) return;
  settleFailedToolJob(deps, job, stalledOut(reason)).catch((failure) => deps.logger.error('settling a failed tool job failed', { job_id: job.id, error: failure }));
}
