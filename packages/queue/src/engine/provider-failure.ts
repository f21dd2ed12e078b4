import { PROVIDER_RETRY_DEFAULTS, type RunError, type ToolLogger, asProviderFailure, providerFailureEvent, providerRetryDelayMs, providerRunError } from '@arcflow/core';
import { type Job, Worker } from 'bullmq';
import type { RunStore } from '../store/run-store.ts';
import { type ProviderJobData, attemptsOf } from './jobs.ts';
import type { QueuePool } from './join.ts';
import type { ModelRouter, PreparedCall } from './model-call.ts';
import { WORKER_DEFAULTS } from './options.ts';

/**
 * Thrown to have BullMQ try a provider call again after `delayMs`: the provider queues' backoff
 * strategy reads it (see {@link retryDelayOf}), so a try that hands over to the next model goes
 * at once while one that retries the same model backs off.
 */
export class ProviderRetry extends Error {
  override readonly name = 'ProviderRetry';
  constructor(
    readonly delayMs: number,
    message: string,
  ) {
    super(message);
  }
}

/** The delay a provider job's failure asked for; undefined for any other error (the worker's own backoff applies). */
export function retryDelayOf(error: unknown): number | undefined {
  return error instanceof ProviderRetry ? error.delayMs : undefined;
}

export interface FailureDeps {
  readonly store: RunStore;
  readonly queues: QueuePool;
  readonly logger: ToolLogger;
  readonly models: ModelRouter;
  readonly options: { readonly provider_backoff_ms: number };
}

/**
 * A failed try of call `n`, with its event (`ProviderRateLimited` or `ProviderError`, under the
 * provider that failed). A 429 pauses the queues whose calls go to that provider (and the job's
 * own), for every worker, without spending an attempt: throws BullMQ's rate-limit error. A
 * retryable failure goes back to BullMQ: to the same model after a backoff, or at once to the
 * next `model_fallbacks` entry when this model's tries are spent: throws {@link ProviderRetry}.
 * Returns the step's error when the last model's last try failed, or the failure is one a retry
 * cannot help (400, 401, 403, 404: never passed on to a fallback).
 */
export async function providerFailed(deps: FailureDeps, job: Job<ProviderJobData>, call: PreparedCall, thrown: unknown): Promise<RunError> {
  const { store, options, queues } = deps;
  const { run_id, step_id, iteration } = job.data;
  const failure = asProviderFailure(thrown);
  const lastTry = job.attemptsMade + 1 >= attemptsOf(job);
  const retries = failure.retryable && !failure.rateLimited && !lastTry;
  const handsOver = retries && call.fallsBack && call.attempt >= call.attemptsPerTarget;
  const waitMs = handsOver ? 0 : providerRetryDelayMs(failure, call.attempt, options.provider_backoff_ms, WORKER_DEFAULTS.provider_max_backoff_ms);
  // The failure's own sentence, never the provider's error text (which may echo the prompt):
  // arcflow's providers and response checks word their failures themselves.
  deps.logger.warn('provider call failed', {
    run_id,
    step_id,
    iteration,
    provider: call.provider_id,
    model: call.request.model,
    error_code: failure.error_code,
    status: failure.status,
    retryable: failure.retryable,
    attempt: call.attempt,
    reason: failure.message,
    ...(handsOver ? { next: 'fallback' } : {}),
  });
  const failed = providerFailureEvent(step_id, iteration, call.provider_id, failure, call.attempt, Math.ceil(waitMs / 1000));
  await store.append(run_id, [{ event: failed, once: `failed|${step_id}|${iteration}|${job.attemptsStarted}` }]);
  if (failure.rateLimited && job.attemptsStarted <= attemptsOf(job) + PROVIDER_RETRY_DEFAULTS.rate_limit_waits) {
    // The provider said to wait: only the calls that go to it wait; other providers' agents go on.
    const tags = await store.tags();
    const names = deps.models.queuesPausedBy(call.provider, job.queueName);
    await Promise.all(names.flatMap((name) => tags.map((tag) => queues.get(name, tag).rateLimit(waitMs))));
    throw Worker.RateLimitError();
  }
  if (retries) throw new ProviderRetry(waitMs, `provider call failed (${failure.error_code}); ${handsOver ? 'trying the next model' : 'retrying'}`);
  return providerRunError(failure, call.attempt);
}
