import { MAX_RETRY_AFTER_SECONDS, ProviderFailure, providerRetryDelayMs } from '@arcflow/core';
import { describe, expect, it } from 'vitest';

// What a provider says of its 429 is untrusted: a run waits as it asks, within a bound, and ends.

const limited = (retry_after_seconds?: number) =>
  new ProviderFailure('rate_limited', 'slow down', { retryable: true, status: 429, ...(retry_after_seconds !== undefined ? { retry_after_seconds } : {}) });

describe('the wait before a provider call is made again', () => {
  it("waits a 429's retry_after_seconds, at most MAX_RETRY_AFTER_SECONDS, and backs off when it gave none that is a wait", () => {
    expect(providerRetryDelayMs(limited(2), 1, 100, 1_000)).toBe(2_000);
    expect(providerRetryDelayMs(limited(1e7), 1, 100, 1_000)).toBe(MAX_RETRY_AFTER_SECONDS * 1000);
    for (const odd of [undefined, Number.NaN, -1, Number.POSITIVE_INFINITY]) {
      expect(providerRetryDelayMs(limited(odd), 1, 100, 1_000)).toBeLessThanOrEqual(1_000);
    }
  });
});
