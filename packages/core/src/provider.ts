import type { JsonSchema } from './vocabulary/json-schema.ts';
import type { ChatMessage, RequestedToolCall } from './vocabulary/messages.ts';
import type { Tokens } from './vocabulary/tokens.ts';
import type { ModelSettings } from './definitions/model-settings.ts';
import type { ResponseFormat } from './definitions/output-schema.ts';

/** A tool as offered to the model. */
export interface ToolSpec {
  readonly name: string;
  readonly description: string;
  readonly parameters: JsonSchema;
}

export interface ProviderRequest {
  readonly model: string;
  readonly messages: readonly ChatMessage[];
  /** Empty when tools are disabled (the final-answer call). */
  readonly tools: readonly ToolSpec[];
  /**
   * What this call sends besides the messages and tools (SPEC §16), already adjusted to the call:
   * `tool_choice` only on a step's first call, neither it nor `parallel_tool_calls` without tools.
   * Absent when nothing is set.
   */
  readonly settings?: ModelSettings;
  /**
   * The shape the answer must take (SPEC §11): `{ type: 'json_schema', json_schema: { name, schema,
   * strict } }` on every call of a step with an output schema; absent otherwise.
   */
  readonly response_format?: ResponseFormat;
}

export interface ProviderResponse {
  /** Text of the answer; `null` when the model only asked for tools. */
  readonly content: string | null;
  readonly tool_calls: readonly RequestedToolCall[];
  readonly finish_reason: string;
  readonly usage: Tokens;
  /** The model that answered, when the backend says. */
  readonly model?: string;
  /** Calls whose arguments were too large to keep (their `arguments` are empty): id → size in bytes. */
  readonly oversize_arguments?: Readonly<Record<string, number>>;
}

/** What a provider call is given besides its request. */
export interface CompleteOptions {
  readonly signal?: AbortSignal;
  /**
   * Given when the run streams (SPEC §12): a provider that can stream makes a streamed call and
   * tells each piece of text as the model writes it. Without it the call is a plain one. The
   * pieces of a call that succeeds concatenate to its response's `content` (or to a prefix of it:
   * the runner writes what was not told with the response); a call that fails may have told some
   * first (the runner then marks that attempt as discarded).
   */
  readonly onText?: (delta: string) => void;
  /**
   * Given with `onText`: a provider that streams calls it once, when the stream's first chunk
   * arrives, whatever the chunk holds (text, a tool call's first fragment), for the call's time to
   * first chunk (SPEC §18). A provider that does not call it has that time taken at its first text.
   */
  readonly onFirstChunk?: () => void;
}

/**
 * Any model backend. `complete` makes exactly one call and never retries: the runner (or the
 * queue) owns retries. Failures are thrown as {@link ProviderFailure}.
 */
export interface ModelProvider {
  readonly id: string;
  readonly defaultModel?: string;
  complete(request: ProviderRequest, options?: CompleteOptions): Promise<ProviderResponse>;
}

export type ProviderFailureCode =
  | 'rate_limited'
  | 'server_error'
  | 'timeout'
  | 'connection_error'
  | 'bad_request'
  | 'authentication'
  | 'invalid_config'
  | 'malformed_response'
  | 'test_responses_exhausted';

/**
 * What a failure came from, for logs: the thrown error's name, its code (`ECONNREFUSED`,
 * `ERR_INVALID_URL`, …) and the provider's host. Never the error's text, which may echo a prompt.
 */
export interface FailureCause {
  readonly name: string;
  readonly code?: string;
  readonly host?: string;
}

export interface ProviderFailureDetails {
  readonly status?: number;
  readonly retryable: boolean;
  readonly retry_after_seconds?: number;
  /** The provider could not be reached at all (the connection was refused, the host not found): a fallback takes over at once. */
  readonly unreachable?: boolean;
  readonly cause?: FailureCause;
}

/**
 * A failed provider call, classified once: its code, HTTP status and whether a retry can help.
 * Its message is arcflow's own sentence (never the provider's error text, which may echo the
 * prompt): it names the cause, so a run that fails on it says why.
 */
export class ProviderFailure extends Error {
  override readonly name = 'ProviderFailure';
  constructor(
    readonly error_code: ProviderFailureCode,
    message: string,
    readonly details: ProviderFailureDetails,
  ) {
    super(message);
  }
  get retryable(): boolean {
    return this.details.retryable;
  }
  get status(): number | undefined {
    return this.details.status;
  }
  get rateLimited(): boolean {
    return this.error_code === 'rate_limited';
  }
  /** The same failure, its cause's host set (the provider adds where it was calling). */
  atHost(host: string): ProviderFailure {
    if (this.details.cause?.host !== undefined) return this;
    return new ProviderFailure(this.error_code, this.message, { ...this.details, cause: { name: this.details.cause?.name ?? this.name, ...this.details.cause, host } });
  }
}

/**
 * Anything thrown by a provider, as a classified failure. A provider that throws something
 * unclassified is retried (it may be a passing fault); its error's name and code are kept for
 * the logs.
 */
export function asProviderFailure(error: unknown): ProviderFailure {
  if (error instanceof ProviderFailure) return error;
  return new ProviderFailure('connection_error', 'the provider call failed', { retryable: true, cause: causeOf(error) });
}

/** The name and code of a thrown value, for logs (never its message). */
export function causeOf(error: unknown): FailureCause {
  if (!(error instanceof Error)) return { name: typeof error };
  const code = (error as { code?: unknown }).code;
  // A class that leaves `name` as `Error` (the SDK's RateLimitError, …) is named by its class.
  const name = error.name === 'Error' && error.constructor.name ? error.constructor.name : error.name;
  // A code of the form codes have: one a provider sent (an error body's `code`) may be any text, the prompt too.
  return { name, ...(typeof code === 'string' && /^[A-Za-z0-9_.-]{1,64}$/.test(code) ? { code } : {}) };
}

/**
 * A failed try's log fields: the failure's code, status and sentence, and its cause's name, code
 * and host (never the provider's error text, which may echo the prompt).
 */
export function failureLogFields(failure: ProviderFailure, provider_id: string, attempt: number): Record<string, unknown> {
  const { cause } = failure.details;
  return {
    provider: provider_id,
    error_code: failure.error_code,
    status: failure.status,
    retryable: failure.retryable,
    attempt,
    reason: failure.message,
    ...(cause ? { cause: cause.name, ...(cause.code ? { cause_code: cause.code } : {}), ...(cause.host ? { host: cause.host } : {}) } : {}),
  };
}
