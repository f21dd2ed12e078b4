import {
  type RunError,
  type ToolLogger,
  type TryPosition,
  afterFailedTry,
  asProviderFailure,
  entryElsewhere,
  failureLogFields,
  providerFailureEvent,
  providerRetryDelayMs,
  providerRunError,
} from '@arcflow/core';
import { DelayedError, type Job } from 'bullmq';
import type { RunStore } from '../runs/run-store.ts';
import type { ProviderJobData } from '../jobs/jobs.ts';
import type { PreparedCall } from './model-router.ts';
import { WORKER_DEFAULTS } from '../config/options.ts';

export interface FailureDeps {
  readonly store: RunStore;
  readonly logger: ToolLogger;
  readonly options: { readonly provider_backoff_ms: number };
}

/**
 * A failed try of call `n` (SPEC §16), with its event (`ProviderRateLimited` or `ProviderError`,
 * under the provider and model that failed). A 429 pauses that provider for every worker, for
 * the time it asked. What comes next is {@link afterFailedTry}'s decision, recorded with the
 * event as the call's new position (only a failed provider call moves a call along its models):
 * the job is delayed until its next try (the same model after a backoff or the pause; the next
 * model at once), spending none of its BullMQ attempts, which are left for failures of the job
 * itself (a Redis error, a crash), whose retries go to the same model. Returns the step's error
 * when the call has failed for good.
 */
export async function providerFailed(deps: FailureDeps, job: Job<ProviderJobData>, token: string | undefined, call: PreparedCall, thrown: unknown): Promise<RunError> {
  const { store, options } = deps;
  const { run_id, step_id, iteration } = job.data;
  const failure = asProviderFailure(thrown);
  const policy = { attempts_per_target: call.attemptsPerTarget, backoff_ms: options.provider_backoff_ms, max_backoff_ms: WORKER_DEFAULTS.provider_max_backoff_ms };
  const next = afterFailedTry(failure, call.position, call.provider_ids, policy);
  let waitMs = next.next === 'fail' ? 0 : next.wait_ms;
  // What the event reports: the wait before the next try, or for a 429 the pause the provider asked.
  let reportedMs = waitMs;
  if (failure.rateLimited) {
    // The provider said to wait: its calls wait, from any agent or step, on every worker.
    const pauseMs = providerRetryDelayMs(failure, call.position.waits + 1, policy.backoff_ms, policy.max_backoff_ms);
    await store.pauses.pause(call.provider_id, pauseMs);
    reportedMs = pauseMs;
    if (next.next === 'retry') waitMs = pauseMs;
  }
  deps.logger.warn('provider call failed', {
    run_id,
    step_id,
    iteration,
    model: call.request.model,
    ...failureLogFields(failure, call.provider_id, call.attempt),
    next: next.next,
  });
  const event = providerFailureEvent({ step_id, iteration }, { provider_id: call.provider_id, model_id: call.request.model }, failure, call.attempt, Math.ceil(reportedMs / 1000));
  const pending = [{ event, once: `failed|${step_id}|${iteration}|${job.attemptsStarted}` }];
  if (next.next === 'fail') {
    await store.append(run_id, pending);
    return providerRunError(failure, call.attempt);
  }
  await store.moveCall(run_id, { step_id, iteration }, next.position, pending);
  return delayUntil(job, token, waitMs);
}

/**
 * Before a try: a call whose provider is paused by a 429 goes at once to a later model on a
 * provider that is not paused (its new position recorded, returned); without one, the job waits
 * out the pause (delayed, no attempt spent). Undefined when the call's provider is not paused.
 */
export async function pastPause(deps: FailureDeps, job: Job<ProviderJobData>, token: string | undefined, call: PreparedCall): Promise<TryPosition | undefined> {
  if (!call.provider) return undefined;
  const from = call.position.entry;
  const remaining = await deps.store.pauses.remaining(call.provider_ids.slice(from));
  const pausedMs = remaining.get(call.provider_id) ?? 0;
  if (pausedMs === 0) return undefined;
  const { run_id, step_id, iteration } = job.data;
  const elsewhere = entryElsewhere(call.provider_ids, from, (provider_id) => (remaining.get(provider_id) ?? 0) > 0);
  deps.logger.info('provider paused by a 429', {
    run_id,
    step_id,
    iteration,
    provider: call.provider_id,
    paused_ms: pausedMs,
    next: elsewhere === undefined ? 'wait' : 'fallback',
  });
  if (elsewhere === undefined) return delayUntil(job, token, pausedMs);
  const position = { entry: elsewhere, failures: 0, waits: call.position.waits };
  await deps.store.moveCall(run_id, { step_id, iteration }, position, []);
  return position;
}

/** How long a run's first job waits before it asks its tenant for room again (with jitter, so waiting runs do not ask at once). */
const ADMISSION_RETRY_MS = 200;

/** Delays a run's first job: its tenant is at its max_active_runs (SPEC §14). */
export function waitForAdmission(job: Job<ProviderJobData>, token: string | undefined): Promise<never> {
  return delayUntil(job, token, ADMISSION_RETRY_MS + Math.floor(Math.random() * ADMISSION_RETRY_MS));
}

/** Delays the job `ms` from now without spending an attempt (BullMQ's DelayedError). */
async function delayUntil(job: Job<ProviderJobData>, token: string | undefined, ms: number): Promise<never> {
  await job.moveToDelayed(Date.now() + ms, token);
  throw new DelayedError();
}
