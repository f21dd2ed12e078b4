import { ProviderFailure } from '@arcflow/core';
import OpenAI from 'openai';

/** Seconds to wait from `retry-after-ms` or `retry-after` (seconds or an HTTP date), if present. */
export function retryAfterSeconds(headers: Headers | undefined, now = Date.now()): number | undefined {
  const ms = Number(headers?.get('retry-after-ms') ?? Number.NaN);
  if (Number.isFinite(ms) && ms >= 0) return ms / 1000;
  const value = headers?.get('retry-after');
  if (!value) return undefined;
  const seconds = Number(value);
  if (Number.isFinite(seconds) && seconds >= 0) return seconds;
  const date = Date.parse(value);
  return Number.isFinite(date) ? Math.max(0, (date - now) / 1000) : undefined;
}

/**
 * Classifies anything the `openai` client throws: 429 is a rate limit (with its retry-after),
 * 5xx, timeouts and connection errors are retryable, other 4xx are not, and a body that is not
 * JSON is a malformed response (retryable: a proxy may have hiccuped).
 */
export function classifyOpenAIError(error: unknown): ProviderFailure {
  if (error instanceof ProviderFailure) return error;
  if (error instanceof OpenAI.APIConnectionTimeoutError) {
    return new ProviderFailure('timeout', 'the provider did not answer in time', { retryable: true });
  }
  if (error instanceof OpenAI.APIConnectionError) {
    return new ProviderFailure('connection_error', 'could not reach the provider', { retryable: true });
  }
  if (error instanceof OpenAI.APIError && typeof error.status === 'number') {
    const status = error.status;
    if (status === 429) {
      return new ProviderFailure('rate_limited', 'the provider is rate limiting', {
        status,
        retryable: true,
        retry_after_seconds: retryAfterSeconds(error.headers),
      });
    }
    if (status >= 500) return new ProviderFailure('server_error', `the provider answered HTTP ${status}`, { status, retryable: true });
    if (status === 401 || status === 403) {
      return new ProviderFailure('authentication', `the provider refused the credentials (HTTP ${status})`, { status, retryable: false });
    }
    if (status === 408 || status === 409) return new ProviderFailure('server_error', `the provider answered HTTP ${status}`, { status, retryable: true });
    return new ProviderFailure('bad_request', `the provider rejected the request (HTTP ${status})`, { status, retryable: false });
  }
  if (error instanceof SyntaxError) {
    return new ProviderFailure('malformed_response', 'the provider sent a body that is not valid JSON', { retryable: true });
  }
  return new ProviderFailure('connection_error', 'the provider call failed', { retryable: true });
}
