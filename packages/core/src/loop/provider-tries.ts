import { PROVIDER_RETRY_DEFAULTS } from '../defaults.ts';
import type { ProviderFailure } from '../provider.ts';
import { providerRetryDelayMs } from '../runner/backoff.ts';

/**
 * Where a provider call stands among its models (SPEC §16): the entry it tries (0 the agent's own
 * model, then each `model_fallbacks` entry), the failed tries made at that entry, and the 429
 * waits the call has made. Only a failed provider call moves it on; the engine keeps it in Redis
 * beside the call, so a Redis error or a crash after the provider answered leaves it where it was.
 */
export interface TryPosition {
  readonly entry: number;
  readonly failures: number;
  readonly waits: number;
}

export const FIRST_TRY: TryPosition = Object.freeze({ entry: 0, failures: 0, waits: 0 });

/** The retry policy a call's tries follow. */
export interface TryPolicy {
  /** Tries each entry gets for retryable failures. */
  readonly attempts_per_target: number;
  readonly backoff_ms: number;
  readonly max_backoff_ms: number;
  /** 429 waits a call may make (a 429 spends no attempt). */
  readonly rate_limit_waits?: number;
}

/** What follows a failed try: the same entry again after `wait_ms`, the next entry at once, or the step fails. */
export type NextTry =
  | { readonly next: 'retry'; readonly position: TryPosition; readonly wait_ms: number }
  | { readonly next: 'fallback'; readonly position: TryPosition; readonly wait_ms: 0 }
  | { readonly next: 'fail' };

/**
 * The first entry after `entry` that goes to another provider than `entry` does (`providers[i]`:
 * the id of entry i's provider) and that `paused` does not hold back; undefined when none does.
 */
export function entryElsewhere(providers: readonly string[], entry: number, paused: (provider_id: string) => boolean = () => false): number | undefined {
  for (let next = entry + 1; next < providers.length; next++) {
    if (providers[next] !== providers[entry] && !paused(providers[next]!)) return next;
  }
  return undefined;
}

/**
 * The decision after a failed try at `position`. A 429 hands the call over at once to the next
 * entry on another provider when there is one, else waits out the provider's pause (at most
 * `rate_limit_waits` times). A provider that cannot be reached at all hands over at once too. A
 * retryable failure retries the same entry with backoff until its tries are spent, then hands
 * over. A failure a retry cannot help (400, 401, 403, 404, a bad key or URL) fails the step:
 * another model would be refused the same request.
 */
export function afterFailedTry(failure: ProviderFailure, position: TryPosition, providers: readonly string[], policy: TryPolicy): NextTry {
  const onward = (entry: number): NextTry => ({ next: 'fallback', position: { entry, failures: 0, waits: position.waits }, wait_ms: 0 });
  if (failure.rateLimited) {
    const elsewhere = entryElsewhere(providers, position.entry);
    if (elsewhere !== undefined) return onward(elsewhere);
    if (position.waits >= (policy.rate_limit_waits ?? PROVIDER_RETRY_DEFAULTS.rate_limit_waits)) return { next: 'fail' };
    const waits = position.waits + 1;
    return { next: 'retry', position: { ...position, waits }, wait_ms: providerRetryDelayMs(failure, waits, policy.backoff_ms, policy.max_backoff_ms) };
  }
  if (!failure.retryable) return { next: 'fail' };
  const hasNext = position.entry + 1 < providers.length;
  if (failure.details.unreachable && hasNext) return onward(position.entry + 1);
  const failures = position.failures + 1;
  if (failures < policy.attempts_per_target) {
    return { next: 'retry', position: { ...position, failures }, wait_ms: providerRetryDelayMs(failure, failures, policy.backoff_ms, policy.max_backoff_ms) };
  }
  return hasNext ? onward(position.entry + 1) : { next: 'fail' };
}
