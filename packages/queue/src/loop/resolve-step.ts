import { type RunError, type WorkflowRunConfig, type WorkflowStep, TERMINAL_STATUSES, stepFailedEvent, stepRunError, stepRunConfig } from '@arcflow/core';
import { DelayedError, type Job } from 'bullmq';
import { StoredFormatError } from '../records/formats.ts';
import type { RunSpec } from '../records/run-spec.ts';
import type { StepSnapshot } from '../steps/step-store.ts';
import { endRun, settleParentOf } from '../runs/end-run.ts';
import { cancelChild } from '../runs/cancel.ts';
import type { ProviderJobData } from '../jobs/jobs.ts';
import { startNextOnThread } from '../threads/thread-run.ts';
import { type WorkflowRun, workflowRunOf } from '../workflows/workflow-scheduler.ts';
import type { AgentTarget, ProviderJobDeps } from './step-context.ts';

/** How long a job of a run this worker cannot read waits before it is offered again. */
const UNREADABLE_RETRY_MS = 30_000;

/** What a provider job's step runs (see `resolveStep`). */
export type StepTarget = AgentTarget | { readonly type: 'tool'; readonly step: Extract<WorkflowStep, { type: 'tool' }>; readonly run: WorkflowRun } | { readonly error: RunError };

/** The step as stored, in one round trip; or the job's end when the run is stored unreadably (see `unreadable`). */
export async function loadStep(deps: ProviderJobDeps, job: Job<ProviderJobData>, token: string | undefined): Promise<StepSnapshot | string> {
  const { run_id, step_id, iteration } = job.data;
  try {
    return await deps.store.loadStep(run_id, step_id, iteration);
  } catch (error) {
    if (error instanceof StoredFormatError) return unreadable(deps, job, token, error);
    throw error;
  }
}

/**
 * Why the job's run goes on no further, if it does not: it has ended (`run-ended`), or it is a
 * child whose parent has ended (`parent-ended`, the child is cancelled now).
 */
export async function runStopped(deps: ProviderJobDeps, run_id: string, snapshot: StepSnapshot): Promise<'run-ended' | 'parent-ended' | undefined> {
  const { spec } = snapshot;
  if (!spec || TERMINAL_STATUSES.has(spec.status)) {
    // The process that ended the run may have died before it handed the run on: the next run of its
    // thread starts, and a child's parent gets its call's result, now rather than from the watchdog.
    if (spec) await startNextOnThread(deps.threads, deps.queues, run_id);
    if (spec && snapshot.parent_run_id) await settleParentOf(deps.store, deps.queues, run_id, false);
    return 'run-ended';
  }
  // A child whose parent has ended (a cancel that died before it reached the children) stops here (SPEC §13).
  if (snapshot.parent_run_id && !(await parentGoesOn(deps, snapshot.parent_run_id))) {
    await cancelChild(deps.redis, deps.store, deps.queues, run_id);
    return 'parent-ended';
  }
  return undefined;
}

/** Whether a child's parent run is still going: not ended, and not gone (retention removed it). */
async function parentGoesOn(deps: ProviderJobDeps, parent_run_id: string): Promise<boolean> {
  const status = await deps.store.status(parent_run_id);
  return status !== undefined && !TERMINAL_STATUSES.has(status);
}

/**
 * What the job's step runs: an agent run's agent, or a workflow step (an agent step with its
 * config, or a tool step); an error when this worker does not serve it.
 */
export function resolveStep(deps: ProviderJobDeps, spec: RunSpec, step_id: string): StepTarget {
  const workflow = deps.workflows.get(spec.agent);
  if (!workflow) {
    const agent = deps.agents.get(spec.agent);
    if (!agent) return { error: stepRunError('unknown_agent', `this worker does not serve agent '${spec.agent}'`) };
    return { type: 'agent', agent, definition_hash: agent.definition_hash, config: spec.config, run: undefined };
  }
  const step = workflow.step(step_id);
  if (!step) return { error: stepRunError('unknown_step', `workflow '${workflow.name}' has no step '${step_id}'`) };
  const run = workflowRunOf(workflow, spec, deps.options.provider_attempts);
  if (step.type === 'tool') return { type: 'tool', step, run };
  return { type: 'agent', agent: step.agent, definition_hash: workflow.definition_hash, config: stepRunConfig(spec.config as WorkflowRunConfig, step_id), run, step };
}

/** A step this worker cannot run fails its run. */
export async function failUnresolved(deps: ProviderJobDeps, run_id: string, step_id: string, error: RunError): Promise<string> {
  await endRun(deps.store, run_id, { outcome: { status: 'failed', error }, step_id }, deps);
  return error.error_code;
}

/**
 * A run stored in a format this worker cannot read. Written by a newer arcflow: nothing is
 * written, the error is logged, and the job goes back to wait for a worker that can read it (the
 * watchdog leaves a delayed job alone). Unreadable by any version (not JSON, no format): the
 * run is failed, since no worker could ever take it on.
 */
async function unreadable(deps: ProviderJobDeps, job: Job<ProviderJobData>, token: string | undefined, error: StoredFormatError): Promise<string> {
  const { run_id, step_id, iteration } = job.data;
  if (!error.newer) {
    deps.logger.error('run stored unreadably; failing it', { run_id, step_id, iteration, error: error.message });
    const failure = stepRunError('unreadable_state', `${error.what} cannot be read (${JSON.stringify(error.found) ?? 'no format'}); the run cannot go on`);
    await endRun(deps.store, run_id, { outcome: { status: 'failed', error: failure }, step_id, events: [{ event: stepFailedEvent(step_id, failure) }] }, deps);
    return failure.error_code;
  }
  deps.logger.error('run stored in a format this worker cannot read; leaving it for a worker that can', { run_id, step_id, iteration, error: error.message });
  await job.moveToDelayed(Date.now() + UNREADABLE_RETRY_MS, token);
  throw new DelayedError();
}
