import type { ProviderFailure } from '../provider.ts';

/**
 * Exponential backoff with jitter: `base · 2^(attempt-1)`, capped, then scaled by a random factor
 * in [0.5, 1) so retries from many workers spread out.
 */
export function backoffMs(attempt: number, baseMs: number, maxMs: number, random: () => number = Math.random): number {
  const exponential = Math.min(maxMs, baseMs * 2 ** Math.max(0, attempt - 1));
  return Math.round(exponential * (0.5 + random() / 2));
}

/** The longest a provider's `retry_after_seconds` is waited for: what it says is untrusted, and every run ends. */
export const MAX_RETRY_AFTER_SECONDS = 600;

/**
 * How long to wait before retrying a failed provider call: the provider's `retry_after_seconds`
 * for a 429 when it gave one (at most {@link MAX_RETRY_AFTER_SECONDS}), else exponential backoff for this attempt.
 */
export function providerRetryDelayMs(failure: ProviderFailure, attempt: number, baseMs: number, maxMs: number): number {
  const retryAfter = failure.rateLimited ? failure.details.retry_after_seconds : undefined;
  if (retryAfter === undefined || !Number.isFinite(retryAfter) || retryAfter < 0) return backoffMs(attempt, baseMs, maxMs);
  return Math.max(1, Math.round(Math.min(retryAfter, MAX_RETRY_AFTER_SECONDS) * 1000));
}

export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });
}
