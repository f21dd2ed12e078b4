import { ProviderFailure, causeOf } from '@arcflow/core';
import OpenAI from 'openai';

/** Seconds to wait from `retry-after-ms` or `retry-after` (seconds or an HTTP date), if present. */
export function retryAfterSeconds(headers: Headers | undefined, now = Date.now()): number | undefined {
  // Only the header's own forms: digits (`0x10`, `1e7` and `-1` are none of them), or an HTTP date.
  const ms = headers?.get('retry-after-ms')?.trim();
  if (ms && /^\d+(\.\d+)?$/.test(ms)) return Number(ms) / 1000;
  const value = headers?.get('retry-after')?.trim();
  if (!value) return undefined;
  if (/^\d+$/.test(value)) return Number(value);
  const date = /[A-Za-z]/.test(value) ? Date.parse(value) : Number.NaN;
  return Number.isFinite(date) ? Math.max(0, (date - now) / 1000) : undefined;
}

/** Connection errors that say the provider cannot be reached at all (not a passing fault of one request). */
const UNREACHABLE_CODES = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH']);

/**
 * Classifies anything the `openai` client throws. 429 is a rate limit (with its retry-after);
 * 5xx, timeouts and connection errors are retryable (a connection refused, or a host not found,
 * marks the provider unreachable: a fallback takes over at once); other 4xx are not. A body that
 * is not JSON is a malformed response (retryable: a proxy may have hiccuped). What no retry can
 * fix fails at once, naming the cause: a header value fetch refuses (a key with a character
 * outside Latin-1, such as a pasted `…`), a base URL that is not a URL. Every failure keeps its
 * cause's name and code for the logs, never its text.
 */
export function classifyOpenAIError(error: unknown): ProviderFailure {
  if (error instanceof ProviderFailure) return error;
  if (error instanceof OpenAI.APIConnectionTimeoutError) {
    return new ProviderFailure('timeout', 'the provider did not answer in time', { retryable: true, cause: causeOf(error) });
  }
  if (error instanceof OpenAI.APIConnectionError) return connectionFailure(error);
  if (error instanceof OpenAI.APIError && typeof error.status === 'number') {
    const status = error.status;
    const cause = causeOf(error);
    if (status === 429) {
      return new ProviderFailure('rate_limited', 'the provider is rate limiting (HTTP 429)', {
        status,
        retryable: true,
        retry_after_seconds: retryAfterSeconds(error.headers),
        cause,
      });
    }
    if (status >= 500 || status === 408 || status === 409) return new ProviderFailure('server_error', `the provider answered HTTP ${status}`, { status, retryable: true, cause });
    if (status === 401 || status === 403) {
      return new ProviderFailure('authentication', `the provider refused the credentials (HTTP ${status})`, { status, retryable: false, cause });
    }
    if (status === 404) return new ProviderFailure('bad_request', 'the provider has no such model or endpoint (HTTP 404)', { status, retryable: false, cause });
    return new ProviderFailure('bad_request', `the provider rejected the request (HTTP ${status})`, { status, retryable: false, cause });
  }
  if (error instanceof SyntaxError) {
    return new ProviderFailure('malformed_response', 'the provider sent a body that is not valid JSON', { retryable: true, cause: causeOf(error) });
  }
  if (error instanceof TypeError) {
    const cause = causeOf(error);
    if (cause.code === 'ERR_INVALID_URL') return new ProviderFailure('invalid_config', 'the base URL is not a valid URL', { retryable: false, cause });
    if (error.message.includes('ByteString')) {
      return new ProviderFailure('invalid_config', 'a request header is not a valid HTTP header value (it has a character outside Latin-1)', { retryable: false, cause });
    }
  }
  const cause = causeOf(error);
  // The sentence goes into the run's error and its StepExecutionFailed: only a code of this process's
  // own (Node's, the SDK's: ECONNRESET, ERR_…) is named there, never one the provider's body chose.
  const said = cause.code !== undefined && /^[A-Z][A-Z0-9_]+$/.test(cause.code) ? cause.code : cause.name;
  return new ProviderFailure('connection_error', `the provider call failed unexpectedly (${said})`, { retryable: true, cause });
}

/** A request that never got an answer: the deepest cause with a code says why (`ECONNREFUSED`, `ENOTFOUND`, …). */
function connectionFailure(error: Error): ProviderFailure {
  // The chain is the SDK's error, fetch's `TypeError: fetch failed`, then the socket's error.
  let deepest: Error = error;
  let coded: Error | undefined;
  for (let at: unknown = error; at instanceof Error; at = at.cause) {
    deepest = at;
    if (typeof (at as { code?: unknown }).code === 'string') coded = at;
  }
  // Named by the SDK's error, with the socket's code.
  const code = coded === undefined ? undefined : causeOf(coded).code;
  const cause = { name: causeOf(error).name, ...(code ? { code } : {}) };
  if (deepest.message === 'bad port') {
    // fetch refuses some ports outright (6000, 6665–6669, …): no retry reaches them.
    return new ProviderFailure('invalid_config', 'the base URL names a port fetch refuses to connect to', { retryable: false, cause: { ...cause, code: 'bad_port' } });
  }
  if (code && UNREACHABLE_CODES.has(code)) {
    return new ProviderFailure('connection_error', `could not reach the provider (${code})`, { retryable: true, unreachable: true, cause });
  }
  return new ProviderFailure('connection_error', `could not reach the provider${code ? ` (${code})` : ''}`, { retryable: true, cause });
}
